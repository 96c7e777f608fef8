"""The injected-fault sets the finding-power benchmarks run, by name: tests/test_finding_power.py's
BUGS (original), tests/faulty_fresh.py's (fresh), tests/faulty_third.py's (third) and
tests/faulty_fourth.py's (fourth), each a list of (bug, backend, op, expected outcome)."""

from __future__ import annotations

from tests.faulty_fourth import BUGS_FOURTH
from tests.faulty_fresh import BUGS_FRESH
from tests.faulty_third import BUGS_THIRD
from tests.test_finding_power import BUGS

SETS = {"original": BUGS, "fresh": BUGS_FRESH, "third": BUGS_THIRD, "fourth": BUGS_FOURTH}


def add_set_argument(ap) -> None:
    """`--set NAME` (dest bug_set) on an argparse parser: which of SETS to run."""
    ap.add_argument(
        "--set",
        dest="bug_set",
        choices=sorted(SETS),
        default="original",
        help=(
            "tests/faulty.py's faults (original), tests/faulty_fresh.py's (fresh), tests/faulty_third.py's (third) "
            "or tests/faulty_fourth.py's (fourth)"
        ),
    )

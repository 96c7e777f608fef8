"""Finding reach: over many seeds, how often does a default cell find each fault of finding_power?

benchmarks/finding_power.py runs each fault once, as a user runs conform, with one random seed:
a fault found in 9 runs of 10 is found there 9 times in 10, and a full run of 30 faults with a
few such is short of 30/30 most days. This measures the reach behind that: every default-dtype
cell of the fault's op, run by conform.run.cell.run_cell (default CellSettings, no example database)
in a forked child, as a kernel may kill its process (an integer division by zero traps), under
seeds 1..N, and for each fault

- the share of seeds where some cell got the fault's outcome (what one finding_power run sees),
- per dtype, in how many seeds that cell got it (which cells carry the reach).

    python benchmarks/finding_reach.py [--set original|fresh|third] [--only NAME,...] [--seeds 20]

The last line reads `runs that find every fault: P% (product of the per-fault reaches)`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import generators  # noqa: E402
import opdb  # noqa: E402
from conform.config import DEFAULT_DTYPES, CellSettings  # noqa: E402
from conform.run.cell import run_cell  # noqa: E402
from tests.fault_sets import SETS, add_set_argument  # noqa: E402
from tests.test_finding_power import op_for  # noqa: E402


def cell_outcome(op, dtype: str, backend, seed: int) -> str:
    """The outcome of one cell, run in a forked child; "crash" if the child dies."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run the cell, write its outcome, leave without cleanup
        os.close(read)
        try:
            outcome = run_cell(op, dtype, backend, CellSettings(seed=seed, hypothesis_db=None)).outcome
        except BaseException as e:  # noqa: BLE001 - anything the cell raises is its outcome here
            outcome = f"error: {type(e).__name__}"
        os.write(write, outcome.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        outcome = pipe.read().decode()
    os.waitpid(pid, 0)
    return outcome or "crash"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(ap)
    ap.add_argument("--only", default="", help="comma list of bug names")
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    bugs = [b for b in SETS[args.bug_set] if not only or b[0] in only]
    if only - {b[0] for b in bugs}:
        sys.exit(f"finding_reach: unknown bug(s) {', '.join(sorted(only - {b[0] for b in bugs}))}")
    started = time.monotonic()
    all_found = 1.0
    print("| bug | op | runs finding it | cells finding it, by dtype (of seeds) |")
    print("|---|---|---|---|")
    for name, factory, op_name, expected in bugs:
        op = op_for(name, op_name)
        dtypes = generators.cell_dtypes(opdb.lookup(op_name), list(DEFAULT_DTYPES))
        per_dtype = dict.fromkeys(dtypes, 0)
        runs = 0
        for seed in range(1, args.seeds + 1):
            hit = False
            for dt in dtypes:
                if cell_outcome(op, dt, factory(), seed) == expected.value:
                    per_dtype[dt] += 1
                    hit = True
            runs += hit
        all_found *= runs / args.seeds
        cells = ", ".join(f"{dt} {n}" for dt, n in per_dtype.items() if n) or "none"
        print(f"| {name} | {op_name} | {runs}/{args.seeds} | {cells} |", flush=True)
    print(f"total wall time {time.monotonic() - started:.0f} s")
    print(f"runs that find every fault: {100 * all_found:.0f}% (product of the per-fault reaches)")


if __name__ == "__main__":
    main()

"""How long a CI gate takes: a 50-op subset, float32, on the CPU, against a baseline.

    python benchmarks/gate_subset.py [--ops 50] [--examples 10] [-n auto] [--out DIR] [--keep]

What CI does on a PR, end to end, as a user runs it:
  1. (not timed) the baseline: `conform run --derandomize` on main's code, kept as a database;
  2. the PR's run: `conform run --ops <the 50 ops> --dtypes float32 --derandomize`;
  3. `conform gate --baseline base.db --db pr.db --summary ... --junitxml ...`.
It prints the wall time of 2 + 3 (the budget: under 60 s), of the gate alone, and of the
gate against an expectations file written from the baseline. The ops: every k-th functional op
tagged core (a spread over families), the same list each time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def pick_ops(n: int) -> list[str]:
    import opdb

    core = [s for s in opdb.select("core") if s.variant == "functional" and not s.rules.untestable]
    step = max(len(core) // n, 1)
    return [s.qualname for s in core[::step][:n]]


def exact(qualname: str) -> str:
    """A selection term for exactly this overload: a bare name ("aten::abs", the default
    overload) selects all its overloads, so it is written as a glob that matches it alone."""
    ns, _, name = qualname.partition("::")
    return qualname if "." in name else f"{ns}::{name[:-1]}[{name[-1]}]"


def conform(*args: str, cwd: Path, check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "conform.cli", *args], cwd=cwd, capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if check and p.returncode not in (0, 1):
        sys.exit(f"conform {' '.join(args[:1])} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return elapsed, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=50, help="how many ops (default 50)")
    ap.add_argument("--examples", type=int, default=None, help="examples per cell (default: conform's, 10)")
    ap.add_argument("-n", "--workers", default="auto", help="conform run -n (default auto)")
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()

    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="conform-gate-"))
    out.mkdir(parents=True, exist_ok=True)
    ops = pick_ops(a.ops)
    (out / "ops.txt").write_text("\n".join(exact(q) for q in ops) + "\n")
    run_args = [
        "run",
        "--ops",
        f"@{out / 'ops.txt'}",
        "--dtypes",
        "float32",
        "--derandomize",
        "--no-bench",
        "-q",
        "-n",
        a.workers,
    ]
    if a.examples:
        run_args += ["--examples", str(a.examples)]

    t_base, p = conform(*run_args, "--db", str(out / "base.db"), cwd=out)
    print(f"baseline run (not timed in the budget): {t_base:.1f} s: {p.stdout.splitlines()[0]}")
    conform("expectations", "--from-run", "latest", "--db", str(out / "base.db"), "-o", str(out / "base.toml"), cwd=out)

    t_run, p = conform(*run_args, "--db", str(out / "pr.db"), cwd=out)
    print(f"PR run: {t_run:.1f} s: {p.stdout.splitlines()[0]}")
    t_gate, g = conform(
        "gate",
        "--baseline",
        str(out / "base.db"),
        "--db",
        str(out / "pr.db"),
        "--summary",
        str(out / "summary.md"),
        "--junitxml",
        str(out / "gate.xml"),
        cwd=out,
    )
    t_exp, e = conform("gate", "--baseline", str(out / "base.toml"), "--db", str(out / "pr.db"), cwd=out)
    print(f"gate against the baseline run: {t_gate:.1f} s, exit {g.returncode}: {g.stdout.strip().splitlines()[-1]}")
    print(
        f"gate against the expectations file: {t_exp:.1f} s, exit {e.returncode}: {e.stdout.strip().splitlines()[-1]}"
    )
    print(f"{len(ops)} ops, float32: PR run + gate = {t_run + t_gate:.1f} s (budget 60 s)")
    if g.returncode or e.returncode:
        print("\n" + g.stdout)
    if a.keep or a.out:
        print(f"files in {out}")
    else:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()

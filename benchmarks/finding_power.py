"""Finding power: does conform, run as a user runs it, catch realistic backend bugs?

For every bug in tests/test_finding_power.py's BUGS table this runs

    conform run --ops <op> --device tests.faulty:<Backend> --db <tmp>

with default settings (examples, dtypes, seed drawn at random), and reads back the op's cells:
the bug is found when a cell of that op has the expected outcome (its verdict, or a further
failure of the cell: one of another kind found after its verdict, marked "(further)"). The
control is a clean run over the same ops through the same path without a fault
(`tests.faulty:Healthy`: the CPU's kernels under the faults' dispatch mode, judged as the faulty
devices are, parity with the CPU first): any alarm there (README's outcomes: mismatch,
grad_mismatch, meta_mismatch, missing_error, device_error, crash, timeout) is a false alarm; a
kernel gap it reports is the CPU's own (no float16 cholesky), listed apart. The plain CPU is no such control: it is held
against float64 golden, so the CPU's own published bugs (linalg_vector_norm's float32 2-norm
overflowing at 1e20, pytorch#193006) are alarms there, rightly (`--control cpu` shows them).

    python benchmarks/finding_power.py [--only NAME,...] [--workers N] [--control tests.faulty:Healthy]

The last line reads `found N/M bugs with the right outcome; clean run: K false alarms`.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fault_sets import SETS, add_set_argument  # noqa: E402

FAILING = {
    "mismatch",
    "grad_mismatch",
    "meta_mismatch",
    "not_implemented",
    "fallback",
    "unsupported_dtype",
    "device_error",
    "missing_error",
    "crash",
    "timeout",
}
# The control runs the CPU's own kernels: where it reports a kernel gap, the CPU has none (cholesky
# in float16), a true statement of that device and none of README's alarms; listed, not counted.
KERNEL_GAPS = {"not_implemented", "fallback", "unsupported_dtype"}


def run(op: str, device: str, db: Path, workers: int) -> tuple[int, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "conform.cli",
            "run",
            "--ops",
            op,
            "--device",
            device,
            "--db",
            str(db),
            "-n",
            str(workers),
            "--no-bench",
            "-q",
        ],
        cwd=db.parent,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    return proc.returncode, time.monotonic() - t


def outcomes(db: Path, op: str) -> dict[str, list[str]]:
    """{dtype: [the cell's outcome, then those of its further failures]} of the op's cells."""
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT r.dtype, r.outcome, f.further_failures FROM results r JOIN ops o ON o.id = r.op_id "
            "LEFT JOIN failures f ON f.result_id = r.id WHERE o.qualname = ?",
            (op,),
        ).fetchall()
    return {d: [o] + [m["outcome"] for m in (json.loads(more) if more else None) or ()] for d, o, more in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_set_argument(ap)
    ap.add_argument("--only", default="", help="comma list of bug names")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--control", default="tests.faulty:Healthy", help="device of the clean run (false alarms)")
    args = ap.parse_args()
    bugs = [b for b in SETS[args.bug_set] if not args.only or b[0] in args.only.split(",")]
    started = time.monotonic()
    found = 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, backend, op, expected) in enumerate(bugs):
            db = Path(tmp) / f"{name}.db"
            device = f"{backend.__module__}:{backend.__name__}"
            code, secs = run(op, device, db, args.workers)
            got = outcomes(db, op) if code == 0 else {}
            # a cell whose verdict is the expected outcome, or one of its further failures (marked)
            hit = [dt if o[0] == expected.value else f"{dt} (further)" for dt, o in got.items() if expected.value in o]
            other = sorted({o[0] for o in got.values() if o[0] in FAILING and o[0] != expected.value})
            ok = bool(hit)
            found += ok
            rows.append(
                (
                    name,
                    op,
                    expected.value,
                    "yes" if ok else "NO",
                    ",".join(hit) or "-",
                    ",".join(other) or "-",
                    f"{secs:.0f}",
                )
            )
            print(f"[{i + 1}/{len(bugs)}] {name}: {'found' if ok else 'MISSED'} ({secs:.0f} s)", file=sys.stderr)
        clean_db = Path(tmp) / "clean.db"
        clean_ops = ",".join(sorted({op for _, _, op, _ in bugs}))
        run(clean_ops, args.control, clean_db, args.workers)
        with sqlite3.connect(clean_db) as c:
            alarms = c.execute(
                "SELECT o.qualname, r.dtype, r.outcome, substr(r.message, 1, 100) FROM results r "
                f"JOIN ops o ON o.id = r.op_id WHERE r.outcome IN ({','.join('?' * len(FAILING))})",
                sorted(FAILING),
            ).fetchall()
            clean_cells = c.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        gaps = [a for a in alarms if a[2] in KERNEL_GAPS]
        alarms = [a for a in alarms if a[2] not in KERNEL_GAPS]
    header = ("bug", "op", "expected", "found", "dtypes with it", "other failing outcomes", "s")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |")
    print(f"clean run ({args.control}) over the same ops: {clean_cells} cells, {len(alarms)} false alarms")
    for a in alarms:
        print("  false alarm:", *a)
    for a in gaps:
        print("  kernel gap of the CPU itself (no alarm):", *a)
    print(f"total wall time {time.monotonic() - started:.0f} s")
    print(f"found {found}/{len(bugs)} bugs with the right outcome; clean run: {len(alarms)} false alarms")


if __name__ == "__main__":
    main()

"""False alarms caused by the reference: conform on a device whose kernels are exactly the CPU's.

`tests.cpu_kernels:CPUKernels` runs every ATen call on the CPU kernel and returns its result:
to conform's oracle it is an accelerator (parity with the CPU first) whose results are the
reference's bit for bit. Under the verdict rule (docs/verdict-rule.md) such a device can only fail where the
CPU kernel disagrees with itself (reads of uninitialised memory, an out= variant it ignores,
position-dependent results reached through the device's path): every other alarm would be a
false alarm caused by the reference. This runs

    conform run --device tests.cpu_kernels:CPUKernels --ops @<ops> --db <tmp> -n N

over a broad, deterministic op set (every k-th public functional op of the catalog, plus the
ops in NAMED, whose float32 and half-precision results the CPU computes off float64) and prints the alarm cells, the reference findings stored instead, and
the last line `N ops, C cells: A alarm cells (each listed above), R reference findings`.

    python benchmarks/false_alarms.py [--ops 200] [--dtypes float32,bfloat16] [--workers 1] [--keep DIR]
        [--examples 5] [--values-per-draw N]

With --keep the run's database stays in DIR (`conform report --db DIR/c.db`, each alarm cell's
minimal case and reproduction script): an alarm that shows once can then be examined.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NAMED = ("aten::gelu", "aten::native_layer_norm", "aten::pow.Tensor_Scalar")
ALARMS = {"mismatch", "grad_mismatch", "meta_mismatch", "device_error", "missing_error", "crash", "timeout"}


def op_set(n: int) -> list[str]:
    import opdb

    public = sorted(
        o.qualname for o in opdb.catalog()
        if o.variant == "functional" and not o.name.split("::")[-1].startswith("_") and not o.rules.untestable and o.family != "torchscript"
    )  # fmt: skip
    step = max(1, len(public) // n)
    chosen = list(dict.fromkeys(list(NAMED) + public[::step]))
    return chosen[: max(n, len(NAMED))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=200, help="how many ops (at least the named ones)")
    ap.add_argument("--dtypes", default="float32,bfloat16,float16")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--examples", type=int, default=5)
    ap.add_argument("--values-per-draw", type=int, default=None, help="conform's --values-per-draw (default: its own)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--keep", metavar="DIR", help="run in DIR (created) and keep its conform.db: each alarm's case and script"
    )
    args = ap.parse_args()
    ops = op_set(args.ops)
    keep = Path(args.keep).resolve() if args.keep else None
    if keep is not None:
        if (keep / "c.db").exists():
            sys.exit(f"false_alarms: {keep / 'c.db'} exists; give --keep an empty or new folder")
        keep.mkdir(parents=True, exist_ok=True)
    with (
        contextlib.nullcontext(str(keep))
        if keep is not None
        else tempfile.TemporaryDirectory(prefix="conform-false-alarms-") as tmp
    ):
        db = Path(tmp) / "c.db"
        (Path(tmp) / "ops.txt").write_text("\n".join(ops) + "\n")
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        started = time.monotonic()
        cmd = [sys.executable, "-m", "conform.cli", "run", "--ops", "@ops.txt", "--device", "tests.cpu_kernels:CPUKernels", "--dtypes", args.dtypes,
               "--examples", str(args.examples), "--seed", str(args.seed), "--db", str(db), "-n", str(args.workers), "-q"]  # fmt: skip
        if args.values_per_draw is not None:
            cmd += ["--values-per-draw", str(args.values_per_draw)]
        proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
        took = time.monotonic() - started
        if not db.exists():
            sys.exit(f"conform run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        with sqlite3.connect(db) as c:
            rows = c.execute(
                "SELECT o.qualname, r.dtype, r.outcome, r.message, r.findings FROM results r JOIN ops o ON o.id = r.op_id ORDER BY o.qualname, r.dtype"
            ).fetchall()
    outcomes = Counter(r[2] for r in rows)
    alarms = [r for r in rows if r[2] in ALARMS]
    findings = Counter()
    for r in rows:
        for f in json.loads(r[4]) if r[4] else []:
            findings[f.get("kind", "")] += 1
    print(
        f"conform run took {took:.0f} s (exit {proc.returncode}); outcomes: "
        + ", ".join(f"{k} {v}" for k, v in outcomes.most_common())
    )
    print("findings stored instead of alarms: " + (", ".join(f"{k} {v}" for k, v in findings.most_common()) or "none"))
    for q, d, o, _, _ in rows:
        if q in NAMED:
            print(f"  named  {q} {d}: {o}")
    for q, d, o, m, _ in alarms:
        print(f"  ALARM  {q} {d}: {o}: {m[:240]}")
    print(
        f"{len(ops)} ops, {len(rows)} cells: {len(alarms)} alarm cells (each listed above), {findings.get('reference', 0)} reference findings"
    )


if __name__ == "__main__":
    main()

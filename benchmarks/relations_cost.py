"""What the metamorphic relations and finite-difference gradients add to a cell's time.

Runs each cell twice in one process, with and without them (conform.config.CellSettings
`relations`), the same seed and examples, alternating so that a busy machine slows both alike,
and prints per op the two times and the ratio, then the total.

    python benchmarks/relations_cost.py [--ops aten::sin,aten::mm,...] [--dtypes float32,bfloat16] [--repeat 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_OPS = (
    "aten::sin,aten::exp,aten::add.Tensor,aten::mul.Tensor,aten::maximum,aten::where.self,aten::clamp,"
    "aten::sigmoid,aten::sum,aten::mean,aten::amax,aten::cumsum,aten::mm,aten::addmm,aten::_softmax,"
    "aten::native_layer_norm,aten::scaled_dot_product_attention,aten::linspace.out,aten::index_select,aten::cat"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=DEFAULT_OPS)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    import torch

    import opdb
    from conform.backends import CPUBackend
    from conform.config import CellSettings
    from conform.run.cell import run_cell

    torch.set_num_threads(1)
    backend = CPUBackend()
    on = CellSettings(hypothesis_db=None, seed=3)
    off = dataclasses.replace(on, relations=False)
    totals = [0.0, 0.0]
    print(f"{'cell':55} {'without':>9} {'with':>9} {'ratio':>6}")
    for q in args.ops.split(","):
        op = opdb.lookup(q)
        for dt in args.dtypes.split(","):
            t = [0.0, 0.0]
            outcomes = set()
            for _ in range(args.repeat):
                for i, settings in enumerate((off, on)):
                    started = time.perf_counter()
                    r = run_cell(op, dt, backend, settings)
                    t[i] += time.perf_counter() - started
                    outcomes.add(r.outcome)
            totals[0] += t[0]
            totals[1] += t[1]
            ratio = t[1] / t[0] if t[0] else float("nan")
            print(
                f"{q + ' ' + dt:55} {t[0] / args.repeat:8.3f}s {t[1] / args.repeat:8.3f}s {ratio:6.2f} {sorted(outcomes)}"
            )
    print(
        f"total: {totals[0] / args.repeat:.2f} s without, {totals[1] / args.repeat:.2f} s with ({totals[1] / totals[0]:.2f}x)"
    )


if __name__ == "__main__":
    main()

"""How `conform site` scales: 10 environments x the full catalog x 8 dtypes (synthetic results).

    python benchmarks/site_scale.py [--envs 10] [--out DIR] [--keep]

Writes a synthetic database (bulk inserts, not timed), then times `conform site` as a user runs
it and reports the build time, the number and size of files, and the largest page. The
budget: under 60 s, and no page over 2 MB.
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import select

DTYPES = ["float32", "float16", "bfloat16", "float64", "complex64", "int64", "uint8", "bool"]
ENVIRONMENTS = [
    ("2.11.0", "mps", "Apple M1"), ("2.11.0", "cuda", "NVIDIA A100"), ("2.12.0", "mps", "Apple M1"), ("2.12.0", "mps", "Apple M2 Pro"),
    ("2.13.0", "cpu", "Intel Xeon"), ("2.13.0", "mps", "Apple M2 Pro"), ("2.13.0", "mps", "Apple M3 Max"), ("2.13.0", "cuda", "NVIDIA H100"),
    ("2.14.1", "mps", "Apple M3 Max"), ("2.14.1", "cuda", "NVIDIA H100"), ("2.15.0", "xpu", "Intel Arc"), ("2.15.0", "mps", "Apple M4"),
]  # fmt: skip
OUTCOMES = (
    ["pass"] * 80
    + ["mismatch"] * 4
    + ["not_implemented"] * 6
    + ["unsupported_dtype"] * 4
    + ["device_error"] * 2
    + ["skipped"] * 3
    + ["grad_mismatch"]
)
TRACEBACK = (
    "Traceback (most recent call last):\n"
    + '  File "conform/execute.py", line 120, in run_case\n    out = op(*args)\n' * 12
    + "RuntimeError: {msg}\n"
)


def made_up_catalog(n: int):
    from opdb import FAMILY_NAMES
    from opdb.spec import OpSpec

    fams = list(FAMILY_NAMES)
    return [
        OpSpec(name=f"aten::op{i:04d}_{fams[i % len(fams)]}", overload="Tensor" if i % 3 else "", schema=f"aten::op{i}(Tensor self) -> Tensor",
               arguments=(), returns=("Tensor",), variant="functional", tags=(), family=fams[(i * i) % len(fams)], kernels=("CPU", "CUDA", "MPS"))
        for i in range(n)
    ]  # fmt: skip


def synthetic_db(path: Path, n_envs: int) -> int:
    import opdb
    from conform.store import CatalogEntry, Environment, Failure, Op, Result, Run, Store, Timing

    try:
        specs = opdb.catalog()
    except Exception as e:  # the catalog is being worked on: the site's scale does not depend on it
        print(f"opdb.catalog() failed ({type(e).__name__}: {e}); using 3,754 made-up ops in its families")
        specs = made_up_catalog(3754)
    store = Store(path)
    store.op_ids(specs)
    rng = random.Random(7)
    rows = 0
    with store.engine.begin() as c:
        ops = dict(c.execute(select(Op.qualname, Op.id)).all())
        for k, (version, backend, device) in enumerate((ENVIRONMENTS * 2)[:n_envs]):
            env_id = c.execute(Environment.__table__.insert().values(
                fingerprint=uuid.uuid4().hex, torch_version=version, backend=backend, device_name=device, os="macOS" if backend == "mps" else "Linux",
                os_version="15.1", python_version="3.11.7", details={},
            )).inserted_primary_key[0]  # fmt: skip
            run_id = c.execute(
                Run.__table__.insert().values(
                    uuid=str(uuid.uuid4()),
                    environment_id=env_id,
                    state="finished",
                    seed=k,
                    options={},
                    ops_total=len(specs),
                    cells_planned=len(specs) * len(DTYPES),
                )
            ).inserted_primary_key[0]
            c.execute(
                CatalogEntry.__table__.insert(),
                [
                    {"run_id": run_id, "op_id": ops[s.qualname], "kernels": list(s.kernels), "coverage": ""}
                    for s in specs
                ],
            )
            results, details = [], []
            for s in specs:
                for d in DTYPES:
                    o = rng.choice(OUTCOMES)
                    msg = (
                        ""
                        if o == "pass"
                        else f"{o}: greatest absolute difference {rng.random():.3g} at index (1, 2) (up to 1e-05 allowed)"
                    )
                    results.append(
                        {
                            "run_id": run_id,
                            "op_id": ops[s.qualname],
                            "dtype": d,
                            "outcome": o,
                            "examples_run": 10,
                            "examples_passed": 10 if o == "pass" else 3,
                            "max_abs_err": rng.random() * 1e-5,
                            "max_rel_err": rng.random() * 1e-4,
                            "message": msg,
                            "duration_s": rng.random(),
                        }
                    )
                    if o not in ("pass", "skipped"):
                        details.append((ops[s.qualname], d, s.qualname, msg))
            for i in range(0, len(results), 5000):
                c.execute(Result.__table__.insert(), results[i : i + 5000])
            rows += len(results)
            ids = {
                (op, d): rid
                for rid, op, d in c.execute(
                    select(Result.id, Result.op_id, Result.dtype).where(Result.run_id == run_id)
                )
            }
            failures = [
                {
                    "result_id": ids[(op, d)],
                    "case": {"op": q, "dtype": d, "args": [{"shape": [3, 4], "dtype": d}]},
                    "repro": f"import torch\nx = torch.randn(3, 4).to({d!r})\nprint(torch.ops.{q.replace('::', '.')}(x))\n",
                    "traceback": TRACEBACK.format(msg=msg),
                }
                for op, d, q, msg in details
            ]
            for i in range(0, len(failures), 5000):
                c.execute(Failure.__table__.insert(), failures[i : i + 5000])
            timings = []
            for s in specs[::3]:
                for size, numel in (("small", 64), ("medium", 65536), ("large", 4194304)):
                    ref = 1e-6 + numel * 1e-9 * rng.uniform(0.5, 2)
                    timings.append({"run_id": run_id, "op_id": ops[s.qualname], "dtype": "float32", "size_label": size, "shape": [numel], "numel": numel,
                                    "device_median_s": ref / rng.lognormvariate(0.5, 1.2), "ref_median_s": ref, "repeats": 20})  # fmt: skip
            c.execute(Timing.__table__.insert(), timings)
    store.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=10)
    ap.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "conform-site-scale"))
    ap.add_argument("--keep", action="store_true", help="keep the database and the site")
    args = ap.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    db = out / "scale.db"
    t0 = time.perf_counter()
    rows = synthetic_db(db, args.envs)
    print(
        f"synthetic database: {args.envs} environments, {rows:,} results, {db.stat().st_size / 1e6:.0f} MB, written in {time.perf_counter() - t0:.0f} s"
    )
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "conform.cli", "site", "--db", str(db), "--out", str(out / "site")],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    if proc.returncode:
        sys.exit(f"conform site failed:\n{proc.stderr}")
    print(proc.stdout.strip().splitlines()[0])
    files = [p for p in (out / "site").rglob("*") if p.is_file()]
    pages = [p for p in files if p.suffix == ".html"]
    big = max(pages, key=lambda p: p.stat().st_size)
    bigf = max(files, key=lambda p: p.stat().st_size)
    over = [p for p in files if p.stat().st_size > 2_000_000]
    print(
        f"conform site wall time (process start to exit): {wall:.1f} s  [budget 60 s: {'ok' if wall < 60 else 'OVER'}]"
    )
    print(f"pages: {len(pages):,}; files: {len(files):,}; total {sum(p.stat().st_size for p in files) / 1e6:.1f} MB")
    print(
        f"largest page: {big.relative_to(out / 'site')} {big.stat().st_size / 1e3:.0f} kB; "
        f"largest file: {bigf.relative_to(out / 'site')} {bigf.stat().st_size / 1e3:.0f} kB  "
        f"[budget 2 MB: {'ok' if not over else 'OVER: ' + ', '.join(map(str, over))}]"
    )
    print(
        f"matrix.html {(out / 'site/matrix.html').stat().st_size / 1e3:.0f} kB + "
        f"data/index.js {(out / 'site/data/index.js').stat().st_size / 1e3:.0f} kB on first load"
    )
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    if wall >= 60 or over:
        sys.exit(1)


if __name__ == "__main__":
    main()

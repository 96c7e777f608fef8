"""Small conform databases for the site and merge tests, written through the Store API."""

from __future__ import annotations

from conform.results import CellResult
from conform.store import Store, Timing
from opdb.spec import OpSpec

EVIL_DEVICE = "Test CPU <script>window.__pwned = 3</script>"
EVIL = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


def spec(name: str, family: str, overload: str = "", variant: str = "functional") -> OpSpec:
    q = f"aten::{name}"
    return OpSpec(
        name=q, overload=overload, schema=f"{q}{'.' + overload if overload else ''}(Tensor self) -> Tensor", arguments=(), returns=("Tensor",),
        variant=variant, tags=("pointwise",) if family == "pointwise" else (), family=family, kernels=("CPU", "CUDA"),
    )  # fmt: skip


OPS_213 = [
    spec("add", "pointwise", "Tensor"),
    spec("relu", "activation"),
    spec("mm", "linalg"),
    spec("sum", "reduction"),
    spec("size", "shape", "int"),
    spec("Size", "torchscript"),
]
OPS_214 = OPS_213 + [spec("new_op_in_214", "pointwise")]


def env(version: str, device: str = "Test CPU", backend: str = "cpu") -> dict:
    return {
        "fingerprint": f"{version}-{backend}-{device}".replace(" ", "_")[:64],
        "torch_version": version,
        "backend": backend,
        "device_name": device,
        "os": "Linux",
        "os_version": "6.1",
        "python_version": "3.11.7",
    }


def add_run(store: Store, environment: dict, ops, outcomes: dict, *, timings: dict | None = None) -> int:
    """One run: `outcomes` maps (qualname, dtype) -> outcome; non-pass cells get a failure with a
    reproduction script; `timings` maps (qualname, dtype, size) -> (device s, cpu s)."""
    run = store.start_run(environment, options={"ops": "test"}, seed=1, ops_total=len(ops), cells_planned=len(outcomes))
    store.record_catalog(run, ops)
    for (op, dtype), outcome in outcomes.items():
        r = {
            "op": op,
            "dtype": dtype,
            "outcome": outcome,
            "examples_run": 3,
            "examples_passed": 3 if outcome == "pass" else 0,
            "max_abs_err": 0.0 if outcome == "pass" else 0.25,
        }
        if outcome != "pass":
            r.update(
                message=f"Mismatched elements: 1 / 4 (25.0%) {EVIL}",
                repro=f"import torch\n# {EVIL}\nprint(torch.ops.{op.replace('::', '.')})\n",
                traceback=f"Traceback: {EVIL}",
                case={"op": op, "args": [EVIL]},
                further_failures=[
                    {
                        "outcome": "grad_mismatch",
                        "phase": "backward",
                        "message": f"a further failure {EVIL}",
                        "case": {"op": op, "args": []},
                        "repro": "import torch\n# the further failure's script\n",
                    }
                ],
            )
        store.record_result(run, CellResult(**r))
    if timings:
        ids = store.op_ids(ops)

        def go(s):
            for (op, dtype, size), (dev, ref) in timings.items():
                numel = {"small": 64, "medium": 4096, "large": 262144}[size]
                s.add(
                    Timing(
                        run_id=run,
                        op_id=ids[op],
                        dtype=dtype,
                        size_label=size,
                        shape=[numel],
                        numel=numel,
                        device_median_s=dev,
                        ref_median_s=ref,
                        repeats=10,
                    )
                )

        store.write(go)
    store.set_run_state(run, "finished")
    return run


def make_two_versions(path) -> Store:
    """torch 2.13 and 2.14 on the same CPU: add regresses (newly failing), mm is fixed (newly
    passing), one op is new in 2.14, and mm got 3x slower."""
    store = Store(path)
    base = {(op.qualname, d): "pass" for op in OPS_213 for d in ("float32", "int64")}
    o213 = {**base, ("aten::mm", "float32"): "mismatch", ("aten::relu", "int64"): "not_implemented"}
    o214 = {
        **base,
        ("aten::add.Tensor", "float32"): "mismatch",
        ("aten::relu", "int64"): "not_implemented",
        ("aten::new_op_in_214", "float32"): "pass",
    }
    t213 = {("aten::mm", "float32", s): (t, 2 * t) for s, t in (("small", 1e-5), ("medium", 1e-4), ("large", 1e-3))}
    t214 = {("aten::mm", "float32", s): (3 * t, 2 * t) for s, t in (("small", 1e-5), ("medium", 1e-4), ("large", 1e-3))}
    add_run(store, env("2.13.0"), OPS_213, o213, timings=t213)
    add_run(store, env("2.14.1", device=EVIL_DEVICE), OPS_214, o214, timings=t214)
    return store

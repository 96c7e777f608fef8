"""The batch relation: an op applied per item gives each item the same result alone as in the
batch, and a tall batch its items' results (conform/judge/batching.py)."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run import execute
from generators.case import Case, TensorSpec
from tests.test_relations import _Kernel

aten = torch.ops.aten


def _run(qualname, *args, bug=None, target=None, relations=True):
    op = opdb.lookup(qualname)
    with _Kernel(target, bug) if bug is not None else contextlib.nullcontext():
        return execute.run_case(op, Case(qualname, args, {}, seed=3), CPUBackend(), relations=relations)


def _spec(t: torch.Tensor) -> TensorSpec:
    return TensorSpec(tuple(t.shape), "float32", data=tuple(t.reshape(-1).tolist()))


def test_cdist_past_25_rows_far_from_the_origin_is_found():
    """The real kernel (pytorch#37734): past 25 rows cdist computes |x|^2 + |y|^2 - 2xy, which
    cancels for points near 1000; a few rows take the direct path, which golden agrees with."""
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(4, 3, generator=g) + 1000, torch.randn(5, 3, generator=g) + 1000
    plain = _run("aten::cdist", _spec(x1), _spec(x2), relations=False)
    assert plain.outcome is Outcome.PASS, plain.message
    r = _run("aten::cdist", _spec(x1), _spec(x2))
    assert r.outcome is Outcome.MISMATCH and "[batch relation]" in r.message, r.message
    assert "repeated to 32" in r.message
    # the reproduction script replays the relation: the tall batch against the drawn items
    case = Case("aten::cdist", (_spec(x1), _spec(x2)), {}, seed=3)
    script = repro_script(opdb.lookup("aten::cdist"), case, "cpu", result=r, golden_is_expectation=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "repro.py", "exec"), {"__name__": "__main__"})
    assert out.getvalue().strip().splitlines()[-1].startswith("verdict: mismatch"), out.getvalue()[-2000:]


def _wrong_from_16(func, args, kwargs):
    """A batched kernel whose large-batch path drops the last column of every product."""
    out = func(*args, **kwargs)
    if args[0].shape[0] >= 16:
        out = out.clone()
        out[..., -1] = 0
    return out


def test_a_kernel_wrong_only_for_large_batches_is_found():
    a, b = TensorSpec((3, 4, 5), "float32", seed=1), TensorSpec((3, 5, 2), "float32", seed=2)
    plain = _run("aten::bmm", a, b, bug=_wrong_from_16, target=aten.bmm.default, relations=False)
    assert plain.outcome is Outcome.PASS, plain.message  # the drawn batch is small
    r = _run("aten::bmm", a, b, bug=_wrong_from_16, target=aten.bmm.default)
    assert r.outcome is Outcome.MISMATCH and "[batch relation]" in r.message, r.message


@pytest.mark.parametrize(
    "qualname, args",
    [
        ("aten::cdist", (TensorSpec((6, 3), "float32", seed=1), TensorSpec((5, 3), "float32", seed=2))),
        ("aten::bmm", (TensorSpec((3, 4, 5), "float32", seed=1), TensorSpec((3, 5, 2), "float32", seed=2))),
        (
            "aten::baddbmm",
            (
                TensorSpec((1, 4, 2), "float32", seed=1),
                TensorSpec((3, 4, 5), "float32", seed=1),
                TensorSpec((3, 5, 2), "float32", seed=2),
            ),
        ),
        ("aten::mm", (TensorSpec((6, 5), "bfloat16", seed=1), TensorSpec((5, 7), "bfloat16", seed=2))),
        ("aten::linalg_det", (TensorSpec((3, 4, 4), "float32", seed=1),)),
        ("aten::linalg_inv", (TensorSpec((3, 4, 4), "float32", seed=1, values="invertible"),)),
    ],
)
def test_healthy_batched_kernels_keep_the_batch_relation(qualname, args):
    r = _run(qualname, *args)
    assert r.outcome is Outcome.PASS, r.message

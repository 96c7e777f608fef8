"""Output elements a kernel never writes: the op run again with every allocation filled (NaN, an
integer dtype's largest value) reads the fill there, and the first run the allocator's memory."""

from __future__ import annotations

import torch

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.run import execute
from conform.run.execute import run_case
from generators.case import Case, TensorSpec
from opdb.spec import OpSpec


def _with_kernel(monkeypatch, qualname, kernel):
    resolve = OpSpec.resolve
    monkeypatch.setattr(OpSpec, "resolve", lambda self: kernel if self.qualname == qualname else resolve(self))


def test_an_element_the_kernel_never_writes_fails(monkeypatch):
    def holes(x):
        out = torch.empty_like(x)
        out.view(-1)[1:] = -x.view(-1)[1:]  # the first element is left as allocated
        if not torch.are_deterministic_algorithms_enabled():
            # outside the check's filled allocations, the allocator's memory happens to hold the
            # right value (stale memory often does): only the check can see the hole. Left to
            # chance, memory that held a NaN failed the value comparison first, and the message
            # was that one's
            out.view(-1)[0] = -x.view(-1)[0]
        return out

    _with_kernel(monkeypatch, "aten::neg", holes)
    op = opdb.lookup("aten::neg")
    for dtype in ("float32", "int64"):
        r = run_case(
            op, Case(op.qualname, (TensorSpec((2, 3), dtype, seed=1),)), CPUBackend(), grad=False, relations=True
        )
        assert r.outcome is Outcome.MISMATCH, (dtype, r.message)
        assert "[unwritten output]" in r.message and "1 of 6 elements" in r.message and "index (0, 0)" in r.message


def test_a_kernel_that_writes_everything_passes_and_the_mode_is_restored():
    op = opdb.lookup("aten::neg")
    case = Case(op.qualname, (TensorSpec((2, 3), "float32", seed=1),))
    assert (
        execute._unwritten_elements(
            op, case, execute._run_side(op, case, to_device=execute._cpu_copy, device=torch.device("cpu"))
        )
        == ""
    )
    assert not torch.are_deterministic_algorithms_enabled()
    assert run_case(op, case, CPUBackend(), grad=False, relations=True).outcome is Outcome.PASS

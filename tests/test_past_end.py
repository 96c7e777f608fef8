"""Indices past the end of what they index: where a generator family knows the size an index
tensor indexes, about one index tensor in six is drawn past it (the "past_end" value kind), and
the op must refuse it. A CPU kernel that returns a result instead has no bounds check (this
torch build's take_along_dim reads index 9 of a dim of 5 as 4, pytorch#196106); a device that
refuses it is right."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, seed, settings
from torch.utils._python_dispatch import TorchDispatchMode

import generators
import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.run import execute
from generators.case import Case, TensorSpec
from tests.replay import replayed

aten = torch.ops.aten


def _take_along_dim_unchecked() -> bool:
    try:
        torch.take_along_dim(torch.zeros(2, 5), torch.tensor([[9]]), 1)
    except (RuntimeError, IndexError):
        return False
    return True


UNCHECKED = _take_along_dim_unchecked()


def _case(index_values="past_end"):
    x = TensorSpec((2, 5), "float32", seed=1)
    index = TensorSpec(
        (2, 2),
        "int64",
        values=index_values,
        low=5 if index_values == "past_end" else 0,
        high=7 if index_values == "past_end" else 5,
        seed=2,
    )
    return Case("aten::take_along_dim", (x, index), {"dim": 1}, seed=3)


@pytest.mark.skipif(not UNCHECKED, reason="this torch build's take_along_dim checks its indices")
def test_a_cpu_kernel_that_accepts_an_index_past_the_end_is_a_missing_error_with_a_script():
    op = opdb.lookup("aten::take_along_dim")
    r = execute.run_case(op, _case(), CPUBackend(), grad=False)
    assert r.outcome is Outcome.MISSING_ERROR, r.message
    assert "past the end" in r.message and "missing bounds check" in r.message, r.message
    assert replayed(op, _case(), r).startswith("verdict: missing_error")
    assert execute.run_case(op, _case("index"), CPUBackend(), grad=False).outcome is Outcome.PASS


def test_a_kernel_that_refuses_it_is_an_invalid_case_and_unchecked_ops_are_not_judged():
    gather = opdb.lookup("aten::gather")
    x, index = _case().args
    r = execute.run_case(gather, Case("aten::gather", (x, 1, index), {}, seed=3), CPUBackend(), grad=False)
    assert r.outcome is Outcome.PASS and r.invalid, r.message  # the CPU raises "index out of bounds"
    unsafe = opdb.lookup("aten::_unsafe_index.Tensor")
    assert not execute._past_end(unsafe, Case("aten::_unsafe_index.Tensor", (x, [index]), {}))


class _RefusingTakeAlongDim(TorchDispatchMode):
    """A device that checks take_along_dim's indices before it wraps negative ones (the CPU's
    composite wraps every index by the dim's size, pytorch#196106)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.remainder.Scalar and args[0].dtype == torch.int64 and bool((args[0] >= args[1]).any()):
            raise IndexError(f"index out of bounds for dimension with size {args[1]}")
        return func(*args, **(kwargs or {}))


class RefusingDevice(CPUBackend):
    name = "refusing-take-along-dim"

    def device_context(self):
        return _RefusingTakeAlongDim()


@pytest.mark.skipif(not UNCHECKED, reason="this torch build's take_along_dim checks its indices")
def test_a_device_that_refuses_what_the_cpu_accepts_passes_with_a_finding_on_the_cpu():
    r = execute.run_case(opdb.lookup("aten::take_along_dim"), _case(), RefusingDevice(), grad=False)
    assert r.outcome is Outcome.PASS, r.message
    assert r.finding and r.finding["kind"] == "cpu_wrong" and "past the end" in r.finding["message"], r.finding


def test_only_families_that_know_the_bound_draw_past_the_end():
    def kinds(qualname, n=80):
        seen = []

        @seed(7)
        @settings(
            max_examples=n, phases=[Phase.generate], database=None, deadline=None,
            suppress_health_check=list(HealthCheck),
        )  # fmt: skip
        @given(generators.from_schema(opdb.lookup(qualname), "float32"))
        def draw(case):
            seen.extend(s.values for s in case.tensor_specs() if s.dtype in ("int64", "int32"))

        draw()
        return set(seen)

    assert "past_end" in kinds("aten::index_select")  # its family sizes the index by the dim
    assert "past_end" not in kinds("aten::max_unpool2d")  # indices of a guessed bound: "index" only

"""Integer results against the op with its narrow integer inputs widened to int64
(conform.judge.widening): a Python scalar an int32 tensor's dtype cannot hold is wrapped into it
by ATen's conversion in comparisons, remainders, divisions and shifts, and the result is wrong
where the right one is a value the dtype holds."""

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
from generators.argtypes import ELEMENT_SCALARS
from generators.case import Case, TensorSpec
from tests.replay import replayed

aten = torch.ops.aten
VALUES = (0, 1, 5, -3, 7, 2**31 - 1, -(2**31))


def _case(qualname, *args, values=VALUES, **kwargs):
    x = TensorSpec((len(values),), "int32", data=tuple(values))
    return Case(qualname, (x, *args), kwargs, seed=1)


def _run(qualname, case, backend=None):
    return execute.run_case(opdb.lookup(qualname), case, backend or CPUBackend(), relations=True)


@pytest.mark.parametrize(
    ("qualname", "scalar"),
    [
        ("aten::remainder.Scalar", 2**32 + 3),  # x % 3 where x % (2**32 + 3) is x
        ("aten::floor_divide.Scalar", 2**31),  # 1 // INT_MIN is -1 where 1 // 2**31 is 0
        ("aten::isin.Tensor_Scalar", 2**32 + 1),  # 1 is "in" [2**32 + 1]
        ("aten::bitwise_right_shift.Tensor_Scalar", 2**32 + 1),  # x >> 1 where x >> (2**32 + 1) is 0 or -1
    ],
)
def test_a_python_scalar_wrapped_into_int32_is_found_with_a_script_that_reproduces(qualname, scalar):
    case = _case(qualname, scalar)
    r = _run(qualname, case)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "widened to int64" in r.message and r.relation["relation"] == "widened"
    assert replayed(opdb.lookup(qualname), case, r).startswith("verdict: mismatch")


@pytest.mark.parametrize(
    ("qualname", "scalar"),
    [
        ("aten::add.Scalar", 2**32 + 1),  # x + 1: the sum modulo 2**32, which int32 cannot hold exactly
        ("aten::mul.Scalar", 2**32 + 2),  # 2x: likewise
        ("aten::remainder.Scalar", 7),  # in range: nothing to convert
    ],
)
def test_no_opinion_where_the_right_value_does_not_fit_or_no_scalar_is_out_of_range(qualname, scalar):
    r = _run(qualname, _case(qualname, scalar))
    assert r.outcome is Outcome.PASS, r.message


def test_no_opinion_on_an_intermediate_overflow_between_tensors():
    """relu(x + y) of two int32 tensors near the limits wraps in the dtype's own arithmetic; no
    Python scalar is converted, so the widened run has no say."""
    x = TensorSpec((3,), "int32", data=(-(2**31), 2**31 - 1, 5))
    y = TensorSpec((3,), "int32", data=(-1, 1, 2))
    r = _run("aten::_add_relu.Tensor", Case("aten::_add_relu.Tensor", (x, y), {}, seed=1))
    assert r.outcome is Outcome.PASS, r.message


def test_the_int64_run_is_confirmed_in_float64_where_it_wraps_itself():
    """pow(2**31, x): in int64 too, 2**93 wraps (to 0, which int32 holds); float64 says otherwise."""
    x = TensorSpec((4,), "int32", data=(0, 3, 4, 5))
    r = _run("aten::pow.Scalar", Case("aten::pow.Scalar", (2**31, x), {}, seed=1))
    assert r.outcome is Outcome.PASS, r.message


class _RemainderInInt64(TorchDispatchMode):
    """A device whose remainder holds the Python scalar at its own value: right."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.remainder.Scalar and args[0].dtype == torch.int32:
            return torch.remainder(args[0].long(), args[1]).to(torch.int32)
        return func(*args, **(kwargs or {}))


class RightRemainder(CPUBackend):
    name = "right-remainder"

    def device_context(self):
        return _RemainderInInt64()


def test_on_an_accelerator_the_cpus_wrap_is_a_finding_and_a_right_device_passes():
    from tests.cpu_kernels import CPUKernels

    case = _case("aten::remainder.Scalar", 2**32 + 3)
    shared = _run("aten::remainder.Scalar", case, CPUKernels())
    assert shared.outcome is Outcome.PASS, shared.message  # parity: the device shares the CPU's wrap
    assert shared.finding and shared.finding["kind"] == "reference" and "widened" in shared.finding["message"]
    right = _run("aten::remainder.Scalar", case, RightRemainder())
    assert right.outcome is Outcome.PASS, right.message  # the CPU disagrees with it; the widened run does not
    assert right.finding and right.finding["kind"] == "cpu_wrong", right.finding


def _drawn(qualname, dtype, n=60):
    seen = []

    @seed(3)
    @settings(
        max_examples=n, phases=[Phase.generate], database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(generators.from_schema(opdb.lookup(qualname), dtype))
    def draw(case):
        seen.append(case)

    draw()
    return seen


def _scalars(case):
    return [v for v in list(case.args) + list(case.kwargs.values()) if isinstance(v, int) and not isinstance(v, bool)]


def test_the_generator_draws_scalars_beyond_a_narrow_dtype_for_element_arguments_only():
    beyond = [s for c in _drawn("aten::eq.Scalar", "int32") for s in _scalars(c) if not -(2**31) <= s < 2**31]
    assert beyond and set(beyond) <= {2**31, -(2**31) - 1, 2**32 + 1, 2**32 + 2, -(2**32) - 1}
    # int64 cells hold every such scalar; a polynomial's degree n is a count, not an element
    assert not [s for c in _drawn("aten::eq.Scalar", "int64") for s in _scalars(c) if abs(s) > 2**31]
    degree = "aten::special_legendre_polynomial_p.n_scalar"
    assert "n" not in ELEMENT_SCALARS
    assert not [s for c in _drawn(degree, "int32", 30) for s in _scalars(c) if abs(s) >= 2**31]


class _RefusesTheScalar(TorchDispatchMode):
    """A device whose remainder checks the Python scalar's conversion, as the CPU's clamp does."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.remainder.Scalar and not -(2**31) <= args[1] < 2**31:
            raise RuntimeError("value cannot be converted to type int without overflow")
        return func(*args, **(kwargs or {}))


class RefusingRemainder(CPUBackend):
    name = "refusing-remainder"

    def device_context(self):
        return _RefusesTheScalar()


def test_a_device_that_refuses_the_scalar_with_the_conversion_error_is_no_worse_than_the_cpu():
    r = _run("aten::remainder.Scalar", _case("aten::remainder.Scalar", 2**32 + 3), RefusingRemainder())
    assert r.outcome is Outcome.PASS, r.message
    assert r.finding and r.finding["kind"] == "reference" and "refuses" in r.finding["message"]

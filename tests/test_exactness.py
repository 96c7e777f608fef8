"""Exactly determined results are compared exactly: moved, selected and rounded values have one
right answer, and an integer-valued bfloat16 result one off is wrong though within rtol."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge.compare import compare
from conform.judge.tolerances import tolerance_for
from conform.outcomes import Outcome
from conform.run.execute import run_case
from generators.case import Case
from generators.case import TensorSpec as T
from tests.faulty import BACKENDS


@pytest.mark.parametrize(
    "name",
    [
        "aten::round",
        "aten::floor",
        "aten::trunc",
        "aten::cat",
        "aten::index_select",
        "aten::gather",
        "aten::sort",
        "aten::max.dim",
        "aten::amax",
        "aten::clamp",
        "aten::where.self",
        "aten::flip",
        "aten::arange.start_step",
        "aten::cummax",
        "aten::maximum",
        "aten::neg",
        "aten::floor_divide",
        "aten::fmod.Tensor",
        "aten::remainder.Scalar_Tensor",
    ],
)
def test_moved_selected_and_rounded_values_are_exact(name):
    assert opdb.lookup(name).exact


@pytest.mark.parametrize(
    "name",
    [
        "aten::round.decimals",
        "aten::sum",
        "aten::mul.Tensor",
        "aten::exp",
        "aten::scatter.reduce",
        "aten::index_add",
        "aten::unfold_backward",
        "aten::quantile",
        "aten::linspace",
        "aten::_foreach_neg",
    ],
)
def test_computed_values_are_not(name):
    assert not opdb.lookup(name).exact


def test_tolerance_is_zero_for_exact_forward_results_only():
    round_ = opdb.lookup("aten::round")
    assert tolerance_for(round_, torch.bfloat16) == (0.0, 0.0)
    assert tolerance_for(round_, torch.bfloat16, gradient=True) != (0.0, 0.0)  # a gradient sums
    assert tolerance_for(opdb.lookup("aten::exp"), torch.bfloat16) != (0.0, 0.0)
    # an op owner's tolerance rule still wins over the derived exactness
    ruled = dataclasses.replace(
        round_, rules=dataclasses.replace(round_.rules, tolerances={"bfloat16": opdb.Tolerance(1e-2, 1.0)})
    )
    assert tolerance_for(ruled, torch.bfloat16) == (1e-2, 1.0)


def test_an_integer_valued_bfloat16_result_off_by_one_fails():
    want = torch.tensor([129.0, 200.0], dtype=torch.bfloat16)
    got = torch.tensor([130.0, 200.0], dtype=torch.bfloat16)
    round_ = opdb.lookup("aten::round")
    [exact] = compare(got, want, tolerance=lambda dt: tolerance_for(round_, dt))
    assert exact.kind == "values" and exact.mismatched == 1
    [loose] = compare(got, want, tolerance=lambda dt: tolerance_for(opdb.lookup("aten::exp"), dt))
    assert loose.ok  # 1/129 is within bfloat16's rtol of 1.6%: what exactness is for


def test_the_off_by_one_round_fault_is_found_only_by_the_exact_rule():
    op = opdb.lookup("aten::round")
    case = Case("aten::round", (T((64,), "bfloat16", seed=1, magnitude="moderate"),))
    r = run_case(op, case, BACKENDS["bf16_integer_off_by_one"]())
    assert r.outcome == Outcome.MISMATCH, r.message
    loose = dataclasses.replace(op, rules=dataclasses.replace(op.rules, exact=False))
    assert run_case(loose, case, BACKENDS["bf16_integer_off_by_one"]()).outcome == Outcome.PASS
    assert run_case(op, case, BACKENDS["none"]()).outcome == Outcome.PASS


def test_exact_rule_in_a_rules_file_is_checked(tmp_path):
    (tmp_path / "x.toml").write_text('["aten::sum"]\nexact = "yes"\nreason = "r"\n')
    with pytest.raises(opdb.RulesError, match="exact must be true or false"):
        opdb.rules.load_entries(tmp_path)


# -- floor division and remainders: one right value per reading of the inputs ---------------


class _HalfQuotientFloorDivide(CPUBackend):
    """floor_divide whose half-precision path rounds the quotient to the dtype before the floor,
    as the CPU's vectorised bfloat16/float16 kernel does (pytorch#193754): 560 // 3 is 187."""

    name = "faulty-half-quotient-floor-divide"

    def device_context(self):
        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func is torch.ops.aten.floor_divide.default and out.dtype in (torch.bfloat16, torch.float16):
                    out = torch.floor(torch.div(*args))  # the quotient rounded to the dtype first
                return out

        return Mode()


def _floor_divide_case(dtype, a, b):
    return Case("aten::floor_divide", (T((len(a),), dtype, data=tuple(a)), T((len(b),), dtype, data=tuple(b))))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_half_floor_divide_off_by_one_alarms_and_the_cpu_passes(dtype):
    # quotients just below an integer that round up to it in the dtype: 560 / 3 = 186.67 is 187
    # in bfloat16, 4100 / 3 = 1366.67 is 1367 in float16
    a, b = [560.0, 4100.0, 2.0, -560.0] * 16, [3.0, 3.0, 3.0, 3.0] * 16
    case = _floor_divide_case(dtype, a, b)
    op = opdb.lookup("aten::floor_divide")
    bad = run_case(op, case, _HalfQuotientFloorDivide())
    assert bad.outcome == Outcome.MISMATCH, bad.message
    assert run_case(op, case, BACKENDS["none"]()).outcome == Outcome.PASS


def test_half_floor_divide_by_a_scalar_read_in_float32_passes():
    # the CPU's float16 kernel reads 1.136 as float32: -3124 / 1.136f is -2750.0, whose floor
    # is the float16 result; float64's quotient -2750.0000000000005 floors to -2751 (-2752 in
    # float16). Both are right readings of the scalar (ATen's opmath is float32 for half).
    op = opdb.lookup("aten::floor_divide.Scalar")
    case = Case("aten::floor_divide.Scalar", (T((64,), "float16", data=(-3124.0,) * 64), 1.136))
    r = run_case(op, case, BACKENDS["none"]())
    assert r.outcome == Outcome.PASS, r.message


def test_remainder_by_a_0_dim_tensor_of_a_wider_dtype_passes():
    # type promotion casts the 0-dim float32 divisor to the bfloat16 result dtype before the op:
    # 412 mod bfloat16(-1.39077) = -1.015625, not float64's -1.0587
    op = opdb.lookup("aten::remainder.Tensor")
    case = Case(
        "aten::remainder.Tensor",
        (T((4,), "bfloat16", data=(412.0, 286.0, 932.0, -1136.0)), T((), "float32", data=(-1.3907701969146729,))),
    )
    r = run_case(op, case, BACKENDS["none"]())
    assert r.outcome == Outcome.PASS, r.message


def test_div_is_exact_only_with_a_rounding_mode():
    op = opdb.lookup("aten::div.Tensor_mode")
    x = T((4,), "bfloat16")
    assert tolerance_for(op, torch.bfloat16, case=Case(op.qualname, (x, x), {"rounding_mode": "floor"})) == (0.0, 0.0)
    assert tolerance_for(op, torch.bfloat16, case=Case(op.qualname, (x, x), {"rounding_mode": None})) != (0.0, 0.0)


@pytest.mark.parametrize("name", ["aten::fmod.Tensor", "aten::remainder.Tensor"])
def test_a_half_precision_nan_from_the_float32_kernel_is_not_a_reading_of_the_semantics(name):
    # bfloat16's loop is float32's: 300 / 7.3e-40 overflows in the vectorised path and fmod is
    # NaN where it is exactly -0.0 or 0.0 (pytorch#193753). The float32 reading of a half-precision
    # exact op rounds differently; it must not turn the CPU's float32 NaN into the expectation.
    sub = 7.3e-40
    case = Case(name, (T((64,), "bfloat16", data=(300.0,) * 64), T((64,), "bfloat16", data=(sub,) * 64)))
    r = run_case(opdb.lookup(name), case, CPUBackend())  # the CPU under test: golden judges it
    assert r.outcome == Outcome.MISMATCH and "NaN mismatch" in r.message, r.message


def test_an_integer_the_dtype_cannot_hold_may_round_to_either_neighbour():
    # int32 extremes over float32 divisors: promotion makes 2147483632 2147483648.0, and
    # floor(2147483648 / 118.368) = 18142371 lies between float32's 18142370 and 18142372: the
    # CPU's neighbour is as right as golden's (seed 20's floor_divide.out int32 cell)
    op = opdb.lookup("aten::floor_divide")
    a = (-2147483632, 2147483631, -2147483634, 2147483637) * 16
    b = (-118.368408203125, 376.9642028808594, 759.275390625, 111.6659164428711) * 16
    case = Case(op.qualname, (T((64,), "int32", data=a), T((64,), "float32", data=b)))
    r = run_case(op, case, CPUBackend())
    assert r.outcome == Outcome.PASS, r.message


class _RoundOneUlpUp(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.round.default:
            out = torch.nextafter(out, torch.full_like(out, math.inf))
        return out


class _RoundOneUlpUpBackend(CPUBackend):
    name = "round-one-ulp-up"

    def device_context(self):
        return _RoundOneUlpUp()


def test_a_representable_integer_stays_exact_beyond_the_integer_resolution():
    # round(x) of a float32 beyond 2**24 is x itself, representable: a neighbour is wrong
    op = opdb.lookup("aten::round")
    case = Case(op.qualname, (T((8,), "float32", data=(3.0e7, -5.5e7, 1.7e8, 2.0e9) * 2),))
    assert run_case(op, case, _RoundOneUlpUpBackend()).outcome == Outcome.MISMATCH
    assert run_case(op, case, CPUBackend()).outcome == Outcome.PASS

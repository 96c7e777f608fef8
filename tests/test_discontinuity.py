"""Discontinuous ops judged at their discontinuity (opdb/rules/discontinuities.toml; rules (6e) and
(6f) of docs/verdict-rule.md): a value the kernel computes within its rounding of a step may land
on either side, a value far from a step or a step at an input as given may not."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import references
from conform.outcomes import Outcome as O
from conform.run.execute import run_case
from generators.case import Case
from generators.case import TensorSpec as T

aten = torch.ops.aten


def _backend(target, bug):
    """The CPU, with `bug(args)` computing `target`'s result on the device side."""

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return bug(*args) if func is target else func(*args, **(kwargs or {}))

    class Faulty(CPUBackend):
        name = f"faulty-{target.__name__}"

        def device_context(self):
            return Mode()

    return Faulty()


def _binary(qualname, dtype, a, b):
    op = opdb.lookup(qualname)
    return op, Case(qualname, (T((len(a),), dtype, data=tuple(a)), T((len(b),), dtype, data=tuple(b))))


# 1 / 0.1f is 9.99999985 exactly, 10.0 once float32 divides: floor and remainder lie on the step;
# 7 / 2 is far from any. (A half-precision quotient rounded to the dtype before the floor stays an
# alarm: test_exactness.py, the float32 unit of the math type does not reach it.)
A = (1.0, 7.0, 2.0, -5.0) * 16
B = (0.1, 2.0, 0.5, 0.7) * 16


def _floor_of_the_rounded_quotient(a, b):
    return torch.floor(a / b)


def _remainder_of_the_rounded_quotient(a, b):
    return a - b * torch.floor(a / b)


def test_a_quotient_within_rounding_of_an_integer_floors_to_either_side():
    # floor(a / b) with the quotient rounded to float32 is the definition read as written: 10, where
    # float64's 9.99999985 floors to 9. Judged by golden with the inputs a float32 unit apart.
    op, case = _binary("aten::floor_divide", "float32", A, B)
    r = run_case(op, case, _backend(aten.floor_divide.default, _floor_of_the_rounded_quotient), grad=False)
    assert r.outcome == O.PASS, r.message


def test_a_remainder_on_the_step_is_near_zero_or_near_the_divisor():
    # the other side of the jump: 1 - 0.1f * 10 in float32, not float64's 0.09999999
    op, case = _binary("aten::remainder.Tensor", "float32", A, B)
    r = run_case(op, case, _backend(aten.remainder.Tensor, _remainder_of_the_rounded_quotient), grad=False)
    assert r.outcome == O.PASS, r.message


@pytest.mark.parametrize(
    ("qualname", "target", "bug"),
    [
        (
            "aten::floor_divide",
            aten.floor_divide.default,
            lambda a, b: torch.where(a == 7, a.div(b).floor() + 1, a // b),
        ),
        (
            "aten::remainder.Tensor",
            aten.remainder.Tensor,
            lambda a, b: torch.where(a == 7, a.remainder(b) + 0.5, a.remainder(b)),
        ),
    ],
)
def test_a_value_far_from_the_step_on_the_wrong_side_alarms(qualname, target, bug):
    # 7 // 2 = 4 and 7 % 2 = 1.5: no move of the inputs by a unit reaches a step there
    op, case = _binary(qualname, "float32", A, B)
    r = run_case(op, case, _backend(target, bug), grad=False)
    assert r.outcome == O.MISMATCH, r.message
    assert "at index (1,)" in r.message, r.message


@pytest.fixture
def golden_alone(monkeypatch):
    """No independent reference: golden's verdict alone decides (comparisons have NumPy's)."""
    monkeypatch.setattr(references, "reference_for", lambda op: None)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_a_comparison_wrong_at_equal_inputs_alarms(golden_alone, dtype):
    # lt answering True for equal values: moving the inputs a unit apart crosses the step either
    # way, and the conditioning rule passed it; a step at the inputs as given has no such excuse
    x = (1.0, 2.5, -3.0, 0.75) * 16
    op, case = _binary("aten::lt.Tensor", dtype, x, x)
    r = run_case(op, case, _backend(aten.lt.Tensor, aten.le.Tensor), grad=False)
    assert r.outcome == O.MISMATCH, r.message


def test_a_comparison_with_a_wider_0_dim_tensor_compares_in_the_promoted_dtype(golden_alone):
    # bfloat16 vs a 0-dim float32 0.1: type promotion compares in bfloat16, where 0.1 is
    # 0.10009765625, so the bfloat16 0.10009765625 is not below it; float64 says it is
    op = opdb.lookup("aten::lt.Tensor")
    case = Case(
        op.qualname, (T((4,), "bfloat16", data=(0.10009765625, 0.25, -1.0, 0.1)), T((), "float32", data=(0.1,)))
    )
    r = run_case(op, case, CPUBackend(), grad=False)
    assert r.outcome == O.PASS, r.message


def test_an_integer_compared_with_a_float_is_compared_as_the_float_dtype_holds_it(golden_alone):
    # lt(float32, int64) promotes to float32, where 16777217 is 16777216: 16777216 < 16777217 is
    # False as the kernel computes it, True in float64
    op = opdb.lookup("aten::lt.Tensor")
    a = T((4,), "float32", data=(16777216.0, 3.0, -16777216.0, 16777220.0))
    case = Case(op.qualname, (a, T((4,), "int64", data=(16777217,) * 4)))
    r = run_case(op, case, CPUBackend(), grad=False)
    assert r.outcome == O.PASS, r.message


def test_a_tie_rounded_away_from_even_alarms():
    # round(2.5) is 2: the step sits at the input as given, which no precision moves
    op = opdb.lookup("aten::round")
    case = Case(op.qualname, (T((64,), "bfloat16", data=(2.5, 0.5, -1.5, 3.0) * 16),))
    r = run_case(op, case, _backend(aten.round.default, lambda x: torch.where(x > 0, (x + 0.5).floor(), x.round())))
    assert r.outcome == O.MISMATCH, r.message


def test_every_discontinuity_names_where_its_step_sits():
    kinds = {"input", "computed"}
    for op in opdb.select("all"):
        edge = opdb.hints.hint(op, "discontinuity")
        if edge:
            assert edge.get("at") in kinds, (op.qualname, edge)
            assert edge.get("precision", "math") in ("math", "dtype"), (op.qualname, edge)
            assert op.rules.hints["reasons"]["hints"], op.qualname

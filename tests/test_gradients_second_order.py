"""The backward's own derivatives (double backward, forward-over-reverse) and the forward-mode
formula's (reverse-over-forward, forward-over-forward) held against finite differences of them,
and the directions finite differences take: inside the triangle an op reads, Hermitian for a
Hermitian input, and not through elements so large that a relative step spans integers."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import opdb
from conform.backends import CPUBackend
from conform.judge import gradients
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run import execute
from generators.case import Case, TensorSpec


def _run(qualname, *args, backend=None, second_order=True):
    op = opdb.lookup(qualname)
    case = Case(qualname, tuple(args), {}, seed=5)
    r = execute.run_case(
        op, case, backend or CPUBackend(), grad=True, relations=True, finite_differences=True, second_order=second_order
    )
    return op, case, r


def _replayed(op, case, result) -> str:
    script = repro_script(op, case, "cpu", result=result, golden_is_expectation=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "repro.py", "exec"), {"__name__": "__main__"})
    return out.getvalue().strip().splitlines()[-1]


def test_a_second_derivative_nan_where_the_first_is_masked_is_found():
    """pow(0, x) is 0 for x > 0: its first derivative masks the zero base (0), and the derivative
    of that mask multiplies 0 by log(0): NaN where 0 is right."""
    x = TensorSpec((3, 4), "float32", seed=1, values="positive")
    _, _, first = _run("aten::pow.Scalar", 0.0, x, second_order=False)
    assert first.outcome is Outcome.PASS, first.message  # the first derivative is right
    op, case, r = _run("aten::pow.Scalar", 0.0, x)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert r.message.startswith("the derivative of the backward") and "nan" in r.message
    assert _replayed(op, case, r).startswith("verdict: grad_mismatch")


def test_triangular_solves_forward_over_reverse_derivative_is_found():
    """The real kernel (an expected failure of PyTorch's test_fn_fwgrad_bwgrad): the first
    derivatives agree with finite differences once the tangent stays in the triangle the solve
    reads; the derivative of the backward does not."""
    b = TensorSpec((3, 2), "float32", seed=1)
    a = TensorSpec((3, 3), "float32", seed=2, values="invertible")
    _, _, first = _run("aten::triangular_solve", b, a, second_order=False)
    assert first.outcome is Outcome.PASS, first.message
    op, case, r = _run("aten::triangular_solve", b, a)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert "the derivative of the backward" in r.message and "forward-mode" in r.message
    assert _replayed(op, case, r).startswith("verdict: grad_mismatch")


@pytest.mark.parametrize(
    "qualname, args",
    [
        # a formula that moves with the input where finite differences do not agree with it
        (
            "aten::linalg_householder_product",
            (TensorSpec((3, 2), "float32", seed=1), TensorSpec((2,), "float32", seed=2)),
        ),
        ("aten::linalg_det", (TensorSpec((3, 3), "float32", seed=1),)),
        # one autograd does not track through (computed from detached values): a zero derivative
        ("aten::linalg_slogdet", (TensorSpec((3, 3), "float32", seed=1),)),
    ],
)
def test_a_wrong_derivative_of_the_forward_mode_formula_is_found(qualname, args):
    """Real kernels of torch 2.13: the first derivatives (both modes) and the backward's own agree
    with finite differences; the derivative of the forward-mode formula J(x) u, by autograd through
    it and by forward-over-forward alike, does not (jacrev(jacfwd(f)) and jacfwd(jacfwd(f)) are
    wrong where jacrev(jacrev(f)) is right)."""
    _, _, first = _run(qualname, *args, second_order=False)
    assert first.outcome is Outcome.PASS, first.message
    op, case, r = _run(qualname, *args)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert r.message.startswith("the derivative of the forward-mode formula"), r.message
    assert "reverse-over-forward" in r.message and "forward-over-forward gives" in r.message
    assert _replayed(op, case, r).startswith("verdict: grad_mismatch")


@pytest.mark.parametrize(
    "qualname, args",
    [
        ("aten::sigmoid", (TensorSpec((4, 6), "float32", seed=1),)),
        ("aten::softmax.int", (TensorSpec((4, 6), "float32", seed=1), -1)),
        ("aten::mm", (TensorSpec((3, 4), "float32", seed=1), TensorSpec((4, 2), "float32", seed=2))),
        ("aten::atan2", (TensorSpec((3, 5), "float32", seed=1), TensorSpec((3, 5), "float32", seed=2))),
        # a Hermitian input read through one triangle: its gradient is the Hermitian part
        ("aten::linalg_cholesky", (TensorSpec((3, 3), "float32", seed=1, values="spd"),)),
        ("aten::linalg_eigvalsh", (TensorSpec((3, 3), "float32", seed=1, values="spd"), "L")),
        # a factor read through one triangle, and a backward that reads the other
        ("aten::cholesky_solve", (TensorSpec((3, 2), "float32", seed=1), TensorSpec((3, 3), "float32", values="spd"))),
        ("aten::tanh", (TensorSpec((4, 6), "complex64", seed=1),)),
    ],
)
def test_right_formulas_keep_both_orders_quiet(qualname, args):
    _, _, r = _run(qualname, *args)
    assert r.outcome is Outcome.PASS, r.message


def test_a_derivative_autograd_does_not_track_is_zero_and_right_for_a_linear_op():
    """The forward-mode formula of add does not move with the input: its derivative is zero, which
    autograd does not track, and finite differences agree."""
    op = opdb.lookup("aten::add.Tensor")
    case = Case(op.qualname, (TensorSpec((3, 4), "float32", seed=1), TensorSpec((3, 4), "float32", seed=2)), seed=5)
    for check in (gradients.second_order, gradients.forward_second_order):
        r = check(op, case)
        assert r is not None and not r["bad"] and r["vjp"] == 0.0, r


def test_floor_of_values_beyond_a_unit_step_is_no_alarm():
    """At 1e22 a relative step of 1e-6 spans 1e16 integers: floor, the identity on float64's
    integers there, would difference to a slope of 1 where its derivative is 0."""
    _, _, r = _run("aten::floor", TensorSpec((3, 5), "float32", seed=1, magnitude="beyond_sqrt"))
    assert r.outcome is Outcome.PASS, r.message


class _OtherDevice(CPUBackend):
    """Not the plain CPU: the reference side and golden are no longer the expectation."""

    name = "other-device"

    def device_context(self):
        return contextlib.nullcontext()


def test_on_an_accelerator_a_wrong_second_derivative_is_a_finding_about_the_formula():
    _, _, r = _run(
        "aten::pow.Scalar", 0.0, TensorSpec((3, 4), "float32", seed=1, values="positive"), backend=_OtherDevice()
    )
    assert r.outcome is Outcome.PASS, r.message
    assert r.finding and "the derivative of the backward" in r.finding["message"]


class _WrongSecond(torch.autograd.Function):
    """x ** 3 whose backward is right and whose backward's derivative is off by a factor."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return _Square3.apply(x) * g


class _Square3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return 3 * x**2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 5 * x * g  # 6 x is right


def test_directional_of_the_backward_finds_a_wrong_double_backward():
    x = torch.linspace(0.5, 2.0, 6, dtype=torch.float64)
    vs = [torch.ones(6, dtype=torch.float64)]
    first = gradients.directional(lambda xs: [_WrongSecond.apply(xs[0])], [x.clone()], vs, 1)
    assert first is not None and not first["bad"]
    ws = [torch.linspace(-1.0, 1.0, 6, dtype=torch.float64)]
    second = gradients.directional(
        gradients.backward_function(lambda xs: [_WrongSecond.apply(xs[0])], vs), [x.clone()], ws, 2
    )
    assert second is not None and second["bad"] == "vjp"

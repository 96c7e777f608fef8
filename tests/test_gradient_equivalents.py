"""Gradients held against an equivalent API's where an input is infinite (opdb/rules/gradients.toml,
conform.judge.gradients.equivalent): there finite differences cannot move the forward, and
golden's gradient is autograd's own formula."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import gradients
from conform.outcomes import Outcome
from conform.run import execute
from generators.case import Case, TensorSpec
from tests.test_relations import _Kernel

aten = torch.ops.aten
INF = float("inf")


def _case(qualname, data, *rest, shape=None):
    spec = TensorSpec(shape or (len(data),), "float32", data=tuple(data))
    return Case(qualname, (spec, *rest), {}, seed=5)


def _run(qualname, case, backend=None, *, relations=True):
    op = opdb.lookup(qualname)
    return execute.run_case(op, case, backend or CPUBackend(), grad=True, relations=relations)


def test_logsumexp_gradient_at_inf_is_held_against_softmax():
    # d logsumexp([inf, 1, 2]) is softmax's limit (1, 0, 0); the formula's exp(x - y) is NaN at inf
    case = _case("aten::logsumexp", (INF, 1.0, 2.0, 0.5, -1.0, 2.0), [1], shape=(2, 3))
    assert _run("aten::logsumexp", case, relations=False).outcome is Outcome.PASS  # golden shares it
    r = _run("aten::logsumexp", case)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert "gradient of an equivalent API" in r.message and "[grad[self]]" in r.message


@pytest.mark.parametrize(
    "qualname, data, rest",
    [
        ("aten::logsumexp", (-INF, 1.0, 2.0, 0.5, -1.0, 2.0), ([1],)),  # -inf: exp(-inf - y) = 0, as softmax
        ("aten::logsumexp", (0.3, 1.0, 2.0, 0.5, -1.0, 2.0), ([0, 1],)),  # finite: finite differences decide
        ("aten::softplus", (INF, -INF, 2.0, 0.0, -3.0, 1e3), ()),
        ("aten::log_sigmoid_forward", (INF, -INF, 2.0, 0.0, -3.0, 1e3), ()),
    ],
)
def test_right_gradients_at_inf_raise_no_alarm(qualname, data, rest):
    shape = (2, 3)
    r = _run(qualname, _case(qualname, data, *rest, shape=shape))
    assert r.outcome is Outcome.PASS, r.message


def _nan_at_neg_inf(func, args, kwargs):
    """log_sigmoid's backward formula that meets inf - inf at -inf (NaN where 1 is right)."""
    out = func(*args, **kwargs)
    return torch.where(torch.isneginf(args[1]), torch.full_like(out, float("nan")), out)


class _RightLogSigmoidBackward(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.log_sigmoid_backward.default:
            grad, x, _ = args
            return grad * torch.sigmoid(-x)
        return func(*args, **(kwargs or {}))


class RightLogSigmoidBackward(CPUBackend):
    name = "right-log-sigmoid-backward"

    def device_context(self):
        return _RightLogSigmoidBackward()


def test_an_accelerator_that_matches_the_equivalent_is_not_failed_for_the_cpus_formula():
    case = _case("aten::log_sigmoid_forward", (-INF, 1.0, 2.0, -3.0))
    with _Kernel(aten.log_sigmoid_backward.default, _nan_at_neg_inf):
        plain = _run("aten::log_sigmoid_forward", case)
        blamed = _run("aten::log_sigmoid_forward", case, RightLogSigmoidBackward(), relations=False)
        judged = _run("aten::log_sigmoid_forward", case, RightLogSigmoidBackward())
    assert plain.outcome is Outcome.GRAD_MISMATCH, plain.message  # the CPU, and golden, are wrong
    assert blamed.outcome is Outcome.GRAD_MISMATCH  # golden shares the CPU's formula
    assert judged.outcome is Outcome.PASS, judged.message
    assert judged.finding and "gradient of an equivalent API" in judged.finding["message"]


def test_the_equivalent_decides_nothing_where_it_is_nan():
    # a row of -inf only: logsumexp is -inf, softmax 0/0; neither gradient is defined
    op = opdb.lookup("aten::logsumexp")
    case = _case("aten::logsumexp", (-INF, -INF, 1.0, 2.0), [1], shape=(2, 2))
    r = gradients.equivalent(op, case, vs=[torch.ones(2, dtype=torch.float64)])
    assert r is not None and r["bad"] == ""
    assert bool(torch.isnan(r["grads"]["self"][0]).all())


def _nan_at_neg_inf_in_float64(func, args, kwargs):
    """The formula wrong in float64 only: golden is off, the CPU in float32 is right."""
    out = func(*args, **kwargs)
    return _nan_at_neg_inf(func, args, kwargs) if out.dtype == torch.float64 else out


def test_golden_alone_off_the_equivalent_is_a_finding_not_the_cpus_alarm():
    case = _case("aten::log_sigmoid_forward", (-INF, 1.0, 2.0, -3.0))
    with _Kernel(aten.log_sigmoid_backward.default, _nan_at_neg_inf_in_float64):
        r = _run("aten::log_sigmoid_forward", case)
    assert r.outcome is Outcome.PASS, r.message
    assert r.finding and "gradient of an equivalent API" in r.finding["message"]

"""Values at infinity (conform.judge.limits): an elementwise op saturated in float64 over the top
of its dtype's range takes that value at +-inf, whatever its formula meets there."""

from __future__ import annotations

import contextlib
import io
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run import execute
from generators.case import Case, TensorSpec

aten = torch.ops.aten
INF = math.inf


def _case(qualname, dtype, values=(1.0, -INF, INF, -2.0)):
    return Case(qualname, (TensorSpec((len(values),), dtype, data=tuple(values)),), {}, seed=1)


def _run(qualname, case, backend=None):
    return execute.run_case(opdb.lookup(qualname), case, backend or CPUBackend(), relations=True)


def _replayed(qualname, case, result, device="cpu") -> str:
    script = repro_script(opdb.lookup(qualname), case, device, result=result, golden_is_expectation=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "repro.py", "exec"), {"__name__": "__main__"})
    return out.getvalue().strip().splitlines()[-1]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_silu_at_minus_infinity_is_its_saturated_value_not_nan(dtype):
    """silu(x) = x * sigmoid(x) is -0.0 for every finite x below -750 in float64; at -inf the
    formula meets -inf * 0 (NaN on the CPU and in float64 golden alike: pytorch's silu(-inf))."""
    case = _case("aten::silu", dtype)
    r = _run("aten::silu", case)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "for an input -inf" in r.message and "-0.0" in r.message and "saturated" in r.message
    assert _replayed("aten::silu", case, r).startswith("verdict: mismatch")


@pytest.mark.parametrize(
    "qualname",
    [
        "aten::exp",  # 0 at -inf, inf at +inf: right
        "aten::tanh",  # +-1: right
        "aten::sin",  # no limit: float64 differs across the probe
        "aten::log",  # NaN below 0 at every probe: no opinion
        "aten::frac",  # 0 at every large float only because they are integers (opdb rule)
        "aten::sinc",
        "aten::reciprocal",  # decays: other values across the probe
    ],
)
def test_no_opinion_where_the_op_has_no_saturated_value_or_is_right(qualname):
    for dtype in ("float32", "float16"):
        r = _run(qualname, _case(qualname, dtype))
        assert r.outcome is Outcome.PASS, (dtype, r.message)


class _SiluRightAtInfinity(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is aten.silu.default:
            out = torch.where(args[0] == -INF, torch.zeros_like(out).neg(), out)
        return out


class RightSilu(CPUBackend):
    name = "right-silu"

    def device_context(self):
        return _SiluRightAtInfinity()


def test_on_an_accelerator_the_cpus_nan_is_a_finding_and_a_right_device_passes():
    from tests.cpu_kernels import CPUKernels

    case = _case("aten::silu", "float32")
    shared = _run("aten::silu", case, CPUKernels())
    assert shared.outcome is Outcome.PASS, shared.message
    assert shared.finding and shared.finding["kind"] == "reference" and "saturated" in shared.finding["message"]
    right = _run("aten::silu", case, RightSilu())
    assert right.outcome is Outcome.PASS, right.message  # golden sides with the CPU's NaN; the limit does not
    assert right.finding and right.finding["kind"] == "cpu_wrong", right.finding


@pytest.mark.parametrize(("qualname", "scalar"), [("aten::mul.Scalar", 0.0), ("aten::xlogy.Scalar_Other", 1.0)])
def test_an_op_constant_on_that_side_is_ieee_arithmetic_at_infinity_not_a_limit(qualname, scalar):
    """x * 0 is 0 at every finite x and NaN at inf (IEEE 754): no limit is at stake."""
    spec = TensorSpec((4,), "float32", data=(1.0, -INF, INF, -2.0))
    r = _run(qualname, Case(qualname, (spec, scalar), {}, seed=1))
    assert r.outcome is Outcome.PASS, r.message


def test_silu_gradient_at_plus_infinity_is_its_saturated_derivative_not_nan():
    """silu'(x) = sigmoid(x) * (1 + x * (1 - sigmoid(x))) is 1.0 for every large x in float64;
    at +inf the formula meets inf * 0."""
    case = _case("aten::silu", "float32", values=(1.0, 3.0, INF, -2.0))
    r = _run("aten::silu", case)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert "for an input inf" in r.message and "derivative 1.0 (times grad_output)" in r.message
    assert _replayed("aten::silu", case, r).startswith("verdict: grad_mismatch")
    for healthy in ("aten::tanh", "aten::softplus", "aten::exp", "aten::sigmoid"):
        r = _run(healthy, _case(healthy, "float32", values=(1.0, 3.0, INF, -INF)))
        assert r.outcome is Outcome.PASS, (healthy, r.message)


def test_a_limit_beyond_the_dtypes_range_is_its_overflow():
    from conform.judge import limits

    x = torch.tensor([-INF, 1.0])
    assert not limits.off_at_infinity(x, torch.tensor([-INF, 0.5]), {-INF: -6.2e57}, torch.float32).any()
    assert limits.off_at_infinity(x, torch.tensor([float("nan"), 0.5]), {-INF: -6.2e57}, torch.float32).any()


# -- any op, element by element ------------------------------------------------------------------


def _softmax_case(qualname, values=(INF, 1.0, 2.0, 0.5)):
    return Case(qualname, (TensorSpec((len(values),), "float32", data=tuple(values)), 0, False), {}, seed=1)


@pytest.mark.parametrize("qualname", ["aten::_softmax", "aten::_log_softmax"])
def test_softmax_at_one_plus_infinity_is_its_value_there_not_nan(qualname):
    """softmax([inf, 1, 2, 0.5]) is [1, 0, 0, 0] whatever rate the inf grows at; the CPU's
    exp(x - max) meets inf - inf, and float64 golden runs the same kernel (pytorch's softmax of
    +inf)."""
    case = _softmax_case(qualname)
    r = _run(qualname, case)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert r.message.startswith("result: NaN mismatch at (0,)") and "a drawn e for each" in r.message
    assert _replayed(qualname, case, r).startswith("verdict: mismatch")


def _pair(qualname, a, b):
    return Case(
        qualname, (TensorSpec((len(a),), "float32", data=a), TensorSpec((len(b),), "float32", data=b)), {}, seed=1
    )


@pytest.mark.parametrize(
    "case",
    [
        _softmax_case("aten::_softmax", (-INF, 1.0, 2.0, 0.5)),  # right: 0 at -inf
        _pair("aten::sub.Tensor", (INF, 1.0), (INF, 2.0)),  # inf - inf: the limit depends on the rates
        _pair("aten::div.Tensor", (INF, 1.0), (-INF, 2.0)),
        _pair("aten::mul.Tensor", (INF, 1.0), (0.0, 2.0)),  # x * 0: 0 at every finite x, IEEE's NaN at inf
        Case(
            "aten::lerp.Scalar",
            (TensorSpec((2,), "float32", data=(1.0, 1.0)), TensorSpec((2,), "float32", data=(INF, 2.0)), 0.0),
            {},
            seed=1,
        ),
    ],
    ids=lambda c: c.op,
)
def test_no_opinion_where_the_value_at_infinity_depends_on_the_rates_or_on_nothing(case):
    r = _run(case.op, case)
    assert r.outcome is Outcome.PASS, r.message


def test_hardswish_at_minus_infinity_is_its_value_there_as_silus():
    """hardswish(x) = x * relu6(x + 3) / 6 is -0.0 for every x below -3; at -inf the CPU's formula
    meets -inf * 0, the class of silu's. (An activation, not tagged pointwise: judged element by
    element.)"""
    case = _case("aten::hardswish", "float32", values=(1.0, 3.0, INF, -INF))
    r = _run("aten::hardswish", case)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert r.message.startswith("result: NaN mismatch at (3,)") and "gives -0.0" in r.message
    assert _replayed("aten::hardswish", case, r).startswith("verdict: mismatch")


def test_softmax_on_a_device_right_at_infinity_passes_and_the_cpu_is_found_wrong():
    from tests.cpu_kernels import CPUKernels

    case = _softmax_case("aten::_softmax")
    shared = _run("aten::_softmax", case, CPUKernels())
    assert shared.outcome is Outcome.PASS, shared.message  # parity: the device shares the CPU's NaN
    assert shared.finding and shared.finding["kind"] == "reference" and "NaN mismatch" in shared.finding["message"]

    class RightSoftmax(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is aten._softmax.default:
                x = args[0]
                top = x == INF
                out = torch.where(
                    top.any(args[1], keepdim=True), top.to(out.dtype) / top.sum(args[1], keepdim=True), out
                )
            return out

    class Right(CPUBackend):
        name = "right-softmax"

        def device_context(self):
            return RightSoftmax()

    right = _run("aten::_softmax", case, Right())
    assert right.outcome is Outcome.PASS, right.message  # golden sides with the CPU's NaN
    assert right.finding and right.finding["kind"] == "cpu_wrong", right.finding


class _CdistBackwardAtHuge(TorchDispatchMode):
    """_cdist_backward computed in float64 with every infinite input at +-2**200, cast back: a
    backward kernel right at infinity, where the value there is a limit."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is not aten._cdist_backward.default:
            return func(*args, **(kwargs or {}))
        huge = torch.tensor(2.0**200, dtype=torch.float64)
        wide = [
            torch.where(torch.isinf(t), torch.copysign(huge, t.double()), t.double())
            if isinstance(t, torch.Tensor) and t.is_floating_point()
            else t
            for t in args
        ]
        return func(*wide, **(kwargs or {})).to(args[1].dtype)


class CdistBackwardAtHuge(CPUBackend):
    name = "cdist-backward-at-huge"

    def device_context(self):
        return _CdistBackwardAtHuge()


def test_a_gradient_at_infinity_is_float64s_there_for_the_cases_grad_output():
    """d ||x1 - x2|| / dx1 is (x1 - x2) / ||x1 - x2||: 1 where x1 is inf (0 in the other
    coordinates); the CPU's kernel divides inf by inf. The forward, inf, is right."""
    q = "aten::_cdist_forward"
    x1 = TensorSpec((2, 2), "float32", data=(INF, 1.0, 0.0, 1.0))
    case = Case(q, (x1, TensorSpec((1, 2), "float32", data=(1.0, 2.0)), 2.0, None), {}, seed=1)
    r = _run(q, case)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert r.message.startswith("grad[x1]: NaN mismatch at (0, 0)") and "for the case's grad_output" in r.message
    assert _replayed(q, case, r).startswith("verdict: grad_mismatch")
    right = _run(q, case, CdistBackwardAtHuge())
    assert right.outcome is Outcome.PASS, right.message  # golden shares the CPU's NaN
    assert right.finding and right.finding["kind"] == "cpu_wrong" and "grad[x1]" in right.finding["message"]


def test_the_probes_keep_finite_values_and_spread_the_infinite_ones():
    from conform.judge import limits

    x = torch.tensor([INF, 1.0, -INF, INF] * 8, dtype=torch.float64)
    beyond = 2.0**16  # above float16's largest, 65504
    assert limits.at_probe(x, 0, 0, torch.float16)[:4].tolist() == [beyond, 1.0, -beyond, beyond]
    spread = limits.at_probe(x, 0, 2, torch.float16)
    assert (spread[1::4] == 1.0).all() and (spread[2::4] <= -beyond).all()
    assert len(set(spread[0::4].tolist())) > 1  # another power of two for each infinite element
    assert not torch.equal(limits.at_probe(x, 1, 2, torch.float16), spread)  # another tensor, others
    assert limits.at_probe(x, 0, limits.SPREAD, torch.float16)[:4].tolist() == [0.5, 1.0, -0.5, 0.5]


def test_a_sparse_gradient_is_read_densely_at_infinity():
    # embedding_bag with sparse=True returns its weight's gradient as a sparse tensor; the check
    # of the gradient at infinity or'ed its NaN mask with it and stopped the cell as an internal error
    spec = {"dtype": "float32", "layout": "contiguous", "values": "real", "requires_grad": False}
    case = Case.from_json(
        {
            "op": "aten::_embedding_bag",
            "args": [
                {"__tensor__": {**spec, "shape": [3, 3], "seed": 97321, "magnitude": "apart_even", "edges": 0}},
                {
                    "__tensor__": {
                        **spec,
                        "shape": [3],
                        "dtype": "int64",
                        "values": "index",
                        "seed": 3244,
                        "low": 0,
                        "high": 3,
                    }
                },
                {
                    "__tensor__": {
                        **spec,
                        "shape": [1],
                        "dtype": "int64",
                        "values": "index",
                        "seed": 5,
                        "low": 0,
                        "high": 1,
                    }
                },
            ],
            "kwargs": {
                "mode": 0,
                "sparse": True,
                "per_sample_weights": {"__tensor__": {**spec, "shape": [3], "seed": 119644, "edges": 1}},
                "include_last_offset": False,
            },
            "seed": 152746,
        }
    )
    op = opdb.lookup("aten::_embedding_bag")
    args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    assert bool(torch.isinf(args[0]).any()) and kwargs["sparse"]
    r = execute.run_case(op, case, CPUBackend(), grad=True, relations=True)
    assert r.outcome is Outcome.PASS, r.message

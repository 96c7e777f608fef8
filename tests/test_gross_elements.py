"""Each element of an elementwise op's result and gradient held against float64
(conform.judge.gradients.gross_elements): the scale-relative comparison passes a float32 value of
0 where float64 gives 4e-8 once the largest element is near 1."""

from __future__ import annotations

import re

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import gradients, references
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run import execute
from generators import op_ranges
from generators.case import Case, TensorSpec
from script_runner import run_script
from tests.cpu_kernels import CPUKernels

aten = torch.ops.aten


def _case(qualname, data, dtype="float32"):
    return Case(qualname, (TensorSpec((len(data),), dtype, data=tuple(data)),), {}, seed=5)


def _run(qualname, case, backend=None):
    return execute.run_case(opdb.lookup(qualname), case, backend or CPUBackend(), grad=True)


def test_a_saturated_result_formula_is_found_on_the_cpu():
    # sigmoid's y (1 - y) is 0 once y rounds to 1 in float32 (x > 17); float64 gives exp(-x)
    r = _run("aten::sigmoid", _case("aten::sigmoid", (25.0, 1.0, -2.0, 0.5)))
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert re.search(r"grad\[self\] at index \(0,\) is -?0.0 where float64 gives", r.message)
    assert r.relation["relation"] == "elementwise" and r.relation["dtype"] == "float32"


def test_a_cancelling_formula_is_found_in_the_forward():
    # ndtr's (1 + erf(x / sqrt 2)) / 2 is 0 at -6 in float32, where float64 gives 9.9e-10
    r = _run("aten::special_ndtr", _case("aten::special_ndtr", (-6.0, -1.0, 0.5, 2.0)))
    assert r.outcome is Outcome.MISMATCH and r.phase == "forward", r.message
    assert re.search(r"result at index \(0,\) is -?0.0 where float64 gives 9.8", r.message)
    ok = _run("aten::special_ndtr", _case("aten::special_ndtr", (-3.0, -1.0, 0.5, 2.0)))
    assert ok.outcome is Outcome.PASS, ok.message


def test_moderate_inputs_raise_no_alarm():
    for qualname, data in [
        ("aten::sigmoid", (3.0, 1.0, -2.0, 0.5, 12.0)),
        ("aten::tanh", (3.0, -1.0, 0.25, 5.0)),  # 1 - y**2 loses digits here, never a factor of 4
        ("aten::silu", (-1.2784645, 0.0, -30.0, 2.0)),  # a root of the derivative: ill-conditioned
        ("aten::abs", (0.0, -1.0, 2.0)),  # a kink: float64's gradient moves across it
        ("aten::sinc", (1e21, 3e22, 0.5, 2.0)),  # integers, where sinc is 0 and float64 gives noise
    ]:
        r = _run(qualname, _case(qualname, data))
        assert r.outcome is Outcome.PASS, (qualname, r.message)


class _FlushTinyGradients(TorchDispatchMode):
    """A device whose sigmoid backward flushes results below 1e-5 to zero (float32's are normal
    down to 1.2e-38): within the scale-relative tolerance of a gradient whose largest is 0.25."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is aten.sigmoid_backward.default:
            out = torch.where(out.abs() < 1e-5, torch.zeros_like(out), out)
        return out


class FlushTinyGradients(CPUBackend):
    name = "flush-tiny-gradients"

    def device_context(self):
        return _FlushTinyGradients()


def test_a_device_that_flushes_a_tiny_gradient_is_failed_where_the_cpu_is_right():
    # x = 14: the CPU's y (1 - y) is 8.3e-7 within 7%; the device's is 0
    case = _case("aten::sigmoid", (14.0, 1.0, -2.0, 0.5))
    assert _run("aten::sigmoid", case).outcome is Outcome.PASS
    r = _run("aten::sigmoid", case, FlushTinyGradients())
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert re.search("is -?0.0 where float64 gives", r.message)


def test_a_device_that_shares_the_cpus_formula_passes_by_parity_with_a_finding():
    r = _run("aten::sigmoid", _case("aten::sigmoid", (25.0, 1.0, -2.0, 0.5)), CPUKernels())
    assert r.outcome is Outcome.PASS, r.message
    assert r.finding and "where float64 gives" in r.finding["message"]


def test_a_case_whose_kernel_sees_other_inputs_than_golden_is_not_judged():
    def case(*specs_and_scalars):
        return Case("aten::x", specs_and_scalars, {}, seed=5)

    bf16 = TensorSpec((2,), "bfloat16", data=(1.0, 2.5))
    assert execute._one_exact_dtype(case(bf16, 2.0)) == torch.bfloat16
    assert execute._one_exact_dtype(case(bf16, 0.3)) is None  # 0.3 is not a bfloat16
    half, single = TensorSpec((2,), "float16", data=(1.0, 2.0)), TensorSpec((), "float32", data=(1e5,))
    assert execute._one_exact_dtype(case(half, single)) is None  # the kernel casts 1e5 to float16
    r = _run(
        "aten::fmod.Scalar", Case("aten::fmod.Scalar", (TensorSpec((3,), "bfloat16", data=(1.0, 2.5, 3.3)), 0.3), {})
    )
    assert r.outcome is Outcome.PASS, r.message


class _Golden:
    def __init__(self, golden):
        self.golden = golden


def test_a_broadcast_inputs_gradient_is_a_sum_and_not_judged_by_element():
    # grad[other] of mul([4], [1]) sums four products: it may cancel to nearly 0 legitimately
    op = opdb.lookup("aten::mul.Tensor")
    a, b = TensorSpec((4,), "float32", data=(1.0, 1.0, 1.0, 1.0)), TensorSpec((1,), "float32", data=(3.0,))
    case = Case("aten::mul.Tensor", (a, b), {}, seed=5)
    golden = {"self": torch.full((4,), 3.0, dtype=torch.float64), "other": torch.tensor([1e-6], dtype=torch.float64)}
    stable = lambda c, dt: (golden, {})  # noqa: E731 - golden with the inputs moved: unchanged
    judge = execute._elementwise_judge(op, case, _Golden((golden, {})), stable, "grad[{name}]", shape=(4,))
    assert judge({"self": torch.full((4,), 3.0), "other": torch.tensor([0.0])}) == ""
    assert "grad[self] at index (0,) is 0.0" in judge({"self": torch.zeros(4), "other": torch.tensor([1e-6])})


def test_gross_elements_judges_normal_well_conditioned_elements_only():
    tiny, huge = gradients.normal_range(torch.float32)
    want = torch.tensor([4e-8, 4e-8, 1e-36, 0.5, 2.0, 3e38], dtype=torch.float64)
    got = torch.tensor([0.0, 0.0, 0.0, -0.5, 2.5, float("inf")])
    moved = want.clone()
    moved[1] = 1e-7  # ill-conditioned there: one unit of the input moves float64's gradient 150%
    mask = gradients.gross_elements(got, want, moved, want, tiny, huge)
    # zero (normal, conditioned), not: ill-conditioned, below float32's flush margin; other sign;
    # within the factor; beyond half the largest value
    assert mask.tolist() == [True, False, False, True, False, False]


@pytest.mark.parametrize(
    "qualname, data, outcome",
    [("aten::sigmoid", (25.0, 1.0, -2.0, 0.5), "grad_mismatch"), ("aten::special_ndtr", (-6.0, 1.0), "mismatch")],
)
def test_the_stored_script_reproduces_the_verdict(tmp_path, qualname, data, outcome):
    op = opdb.lookup(qualname)
    case = _case(qualname, data)
    r = execute.run_case(op, case, CPUBackend(), grad=True)
    assert r.outcome.value == outcome
    path = tmp_path / "repro.py"
    path.write_text(repro_script(op, case, "cpu", result=r))
    done = run_script(path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert re.findall(r"^verdict: (\S+)", done.stdout, re.M)[-1] == outcome, done.stdout[-2000:]
    assert re.search(r"(grad|result)\[0\] at \(0,\): -?0.0 on the device", done.stdout)


def test_op_ranges_draw_where_a_result_saturates_or_cancels_in_the_dtype_but_not_in_float64():
    sigmoid = op_ranges.parse(op_ranges.computed(opdb.lookup("aten::sigmoid"), "float32"))
    lo, hi = sigmoid[0]  # y rounds to 1 in float32 past 17, in float64 past 37
    assert 17 <= lo < hi <= 37
    tanh = op_ranges.parse(op_ranges.computed(opdb.lookup("aten::tanh"), "bfloat16"))
    assert tanh[0] == tanh[1] and 3 <= tanh[0][0] < tanh[0][1] <= 19
    # exp never saturates: its overflow band alone for positive x; for negative x its underflow
    # band grows down to its tail (results below a quarter of float32's unit, far from underflow)
    exp = op_ranges.parse(op_ranges.computed(opdb.lookup("aten::exp"), "float32"))
    assert 80 < exp[0][0] < exp[0][1] < 89
    assert 17 < exp[1][0] < 20 and 87 < exp[1][1] < 91
    # ndtr's lower tail, where (1 + erf(x / sqrt 2)) / 2 cancels: from -5.5 on in float32
    # (as a cell reads it: SciPy's ndtr, since the float64 kernel cancels too)
    ndtr = op_ranges.parse(
        op_ranges.computed(opdb.lookup("aten::special_ndtr"), "float32", references.float64_function)
    )
    assert 5 < ndtr[1][0] < 6 and ndtr[1][1] > 12

"""Metamorphic relations and finite-difference gradients find what golden shares.

A fault installed around the whole of run_case (a dispatch mode active for the reference, golden
and the device alike) is a bug of the CPU kernel itself: golden float64 runs it too, so the
verdict rule as such cannot see it. The relations must, and must keep quiet on a kernel whose
vector and scalar paths differ by an ulp.
"""

from __future__ import annotations

import contextlib
import io
import sys

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


class _Kernel(TorchDispatchMode):
    """Every call of `target` goes to `bug(func, args, kwargs)`."""

    def __init__(self, target, bug):
        super().__init__()
        self.target, self.bug = target, bug

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        return self.bug(func, args, kwargs) if func is self.target else func(*args, **kwargs)


def _nan_from_16(func, args, kwargs):
    """A vector path that overflows: NaN at positions >= 16 of a contiguous row."""
    out = func(*args, **kwargs)
    x = args[0]
    if x.is_contiguous() and x.dim() and x.shape[-1] > 16:
        out = out.clone()
        out[..., 16:] = float("nan")
    return out


def _one_ulp_from_16(func, args, kwargs):
    """A correct kernel: its vector body (positions >= 16 of a contiguous row) rounds the other way."""
    out = func(*args, **kwargs)
    x = args[0]
    if x.is_contiguous() and x.dim() and x.shape[-1] > 16:
        out = out.clone()
        out[..., 16:] = torch.nextafter(out[..., 16:], torch.full_like(out[..., 16:], float("inf")))
    return out


def _raises_transposed(func, args, kwargs):
    if any(isinstance(a, torch.Tensor) and a.dim() >= 2 and not a.is_contiguous() for a in args):
        raise RuntimeError("failed to encode the kernel: 2 buffers bound where 1 was expected")
    return func(*args, **kwargs)


def _sign_flipped(func, args, kwargs):
    return -func(*args, **kwargs)


def _case(op, *specs, seed=5):
    return Case(op, tuple(specs), {}, seed=seed)


def _run(qualname, case, bug=None, target=None, *, relations, grad=False):
    op = opdb.lookup(qualname)
    mode = _Kernel(target, bug) if bug is not None else contextlib.nullcontext()
    with mode:
        return op, execute.run_case(op, case, CPUBackend(), grad=grad, relations=relations)


def _replayed(op, case, result, bug, target) -> str:
    """The repro script run in this process, with the CPU kernel's bug installed."""
    script = repro_script(op, case, "cpu", result=result, golden_is_expectation=True)
    out = io.StringIO()
    with _Kernel(target, bug), contextlib.redirect_stdout(out):
        exec(compile(script, "repro.py", "exec"), {"__name__": "__main__"})
    return out.getvalue().strip().splitlines()[-1]


def test_position_dependent_nan_shared_with_golden_is_found_by_the_position_relation():
    case = _case("aten::exp", TensorSpec((3, 10), "float32", seed=1))
    _, plain = _run("aten::exp", case, _nan_from_16, aten.exp.default, relations=False)
    assert plain.outcome is Outcome.PASS  # golden runs the same kernel: no other opinion sees it
    op, r = _run("aten::exp", case, _nan_from_16, aten.exp.default, relations=True)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[position relation]" in r.message and "NaN" in r.message
    assert _replayed(op, case, r, _nan_from_16, aten.exp.default).startswith("verdict: mismatch")


def test_one_ulp_between_vector_and_scalar_paths_is_no_alarm():
    for shape in ((3, 10), (2, 40)):
        case = _case("aten::exp", TensorSpec(shape, "float32", seed=1))
        _, r = _run("aten::exp", case, _one_ulp_from_16, aten.exp.default, relations=True)
        assert r.outcome is Outcome.PASS, r.message


def test_an_error_only_a_transposed_operand_raises_is_found_both_ways():
    contiguous = _case("aten::mul.Tensor", TensorSpec((4, 5), "float32", seed=1), TensorSpec((4, 5), "float32", seed=2))
    _, plain = _run("aten::mul.Tensor", contiguous, _raises_transposed, aten.mul.Tensor, relations=False)
    assert plain.outcome is Outcome.PASS
    op, r = _run("aten::mul.Tensor", contiguous, _raises_transposed, aten.mul.Tensor, relations=True)
    assert r.outcome is Outcome.DEVICE_ERROR, r.message
    assert "raises only with self transposed" in r.message
    assert _replayed(op, contiguous, r, _raises_transposed, aten.mul.Tensor).startswith("verdict: device_error")
    # drawn transposed: the CPU reference raises too, which made the case merely invalid
    strided = _case(
        "aten::mul.Tensor", TensorSpec((4, 5), "float32", seed=1, layout="transposed"), TensorSpec((4, 5), "float32")
    )
    _, plain = _run("aten::mul.Tensor", strided, _raises_transposed, aten.mul.Tensor, relations=False)
    assert plain.invalid
    _, r = _run("aten::mul.Tensor", strided, _raises_transposed, aten.mul.Tensor, relations=True)
    assert r.outcome is Outcome.DEVICE_ERROR and "raises only in the drawn layout" in r.message, r.message


def _states_it(func, args, kwargs):
    if any(isinstance(a, torch.Tensor) and a.dim() >= 2 and not a.is_contiguous() for a in args):
        raise RuntimeError("Expected X.is_contiguous(memory_format) to be true, but got false.")
    return func(*args, **kwargs)


def test_an_error_that_states_a_layout_requirement_is_found_unless_it_is_the_ops_precondition():
    """PyTorch's OpInfo tests expect non-contiguous samples to run: a kernel that says why it
    raises on a transposed input still raises where the same values contiguous run."""
    case = _case("aten::mul.Tensor", TensorSpec((4, 5), "float32", seed=1), TensorSpec((4, 5), "float32", seed=2))
    _, r = _run("aten::mul.Tensor", case, _states_it, aten.mul.Tensor, relations=True)
    assert r.outcome is Outcome.DEVICE_ERROR and "raises only with self transposed" in r.message, r.message
    # _pdist_forward's "requires contiguous input" is its precondition (pdist makes it contiguous)
    pdist = _case("aten::_pdist_forward", TensorSpec((5, 4), "float32", seed=1), 2.0)
    _, r = _run("aten::_pdist_forward", pdist, relations=True)
    assert r.outcome is Outcome.PASS, r.message


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_native_group_norm_raising_on_a_strided_input_is_found(layout):
    """The real kernel (an expected failure of PyTorch's test_noncontiguous_samples): it raises
    "Expected X.is_contiguous(memory_format)" on a transposed input whose contiguous copy runs."""
    x = TensorSpec((4, 6, 5), "float64", seed=1, layout=layout)
    case = _case("aten::native_group_norm", x, None, None, 4, 6, 5, 2, 1e-5)
    _, r = _run("aten::native_group_norm", case, relations=True)
    assert r.outcome is Outcome.DEVICE_ERROR and "[layout relation]" in r.message, r.message
    assert "is_contiguous" in r.message


@pytest.mark.parametrize("shape, hw", [((1, 4, 3, 1), 3), ((1, 4), 1)])
def test_a_strided_copy_is_tried_where_the_named_layouts_leave_the_input_contiguous(shape, hw):
    """A leading dim of 1 and an innermost one of 1 (the draws a cell's first examples hold):
    transposing the last two dims or slicing the first changes no stride that matters, so
    explicit strides (two dims swapped in memory, or every other element) make the copy."""
    x = TensorSpec(shape, "float32", seed=1)
    case = _case("aten::native_group_norm", x, None, None, 1, 4, hw, 2, 1e-5)
    op, r = _run("aten::native_group_norm", case, relations=True)
    assert r.outcome is Outcome.DEVICE_ERROR and "[layout relation]" in r.message, r.message
    assert "input strided" in r.message and "is_contiguous" in r.message
    # the repro script replays the strided copy, and so the error
    verdict = _replayed(op, case, r, lambda f, a, k: f(*a, **k), aten.native_group_norm.default)
    assert verdict.startswith("verdict: device_error"), verdict
    # and a kernel that accepts any strides keeps the relation quiet on the same draws
    _, ok = _run(
        "aten::native_layer_norm", _case("aten::native_layer_norm", x, [shape[-1]], None, None, 1e-5), relations=True
    )
    assert ok.outcome is Outcome.PASS, ok.message


def test_a_backward_formula_wrong_by_a_sign_is_found_by_finite_differences():
    case = _case("aten::sigmoid", TensorSpec((4, 6), "float32", seed=1))
    _, plain = _run("aten::sigmoid", case, _sign_flipped, aten.sigmoid_backward.default, relations=False, grad=True)
    assert plain.outcome is Outcome.PASS  # golden's backward runs the same formula
    op, r = _run("aten::sigmoid", case, _sign_flipped, aten.sigmoid_backward.default, relations=True, grad=True)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert "float64 finite differences disagree with autograd's formula" in r.message
    verdict = _replayed(op, case, r, _sign_flipped, aten.sigmoid_backward.default)
    assert verdict.startswith("verdict: grad_mismatch"), verdict


def _unconjugated(func, args, kwargs):
    """sigmoid's backward without the conjugate autograd's complex convention takes: right for
    real inputs, wrong for complex ones (grad * conj(y (1 - y)) is the right product)."""
    grad, y = args
    return grad * (y * (1 - y))


def test_a_complex_backward_missing_its_conjugate_is_found_by_finite_differences():
    case = _case("aten::sigmoid", TensorSpec((4, 6), "complex64", seed=1))
    _, plain = _run("aten::sigmoid", case, _unconjugated, aten.sigmoid_backward.default, relations=False, grad=True)
    assert plain.outcome is Outcome.PASS  # golden's backward runs the same formula
    op, r = _run("aten::sigmoid", case, _unconjugated, aten.sigmoid_backward.default, relations=True, grad=True)
    assert r.outcome is Outcome.GRAD_MISMATCH, r.message
    assert "float64 finite differences disagree with autograd's formula" in r.message
    verdict = _replayed(op, case, r, _unconjugated, aten.sigmoid_backward.default)
    assert verdict.startswith("verdict: grad_mismatch"), verdict
    real = _case("aten::sigmoid", TensorSpec((4, 6), "float32", seed=1))
    _, fine = _run("aten::sigmoid", real, _unconjugated, aten.sigmoid_backward.default, relations=True, grad=True)
    assert fine.outcome is Outcome.PASS, fine.message


@pytest.mark.parametrize(
    "qualname, specs",
    [
        ("aten::sigmoid", [TensorSpec((5, 37), "float32", seed=3)]),
        ("aten::sigmoid", [TensorSpec((5, 7), "complex64", seed=3)]),
        ("aten::abs", [TensorSpec((5, 7), "complex64", seed=3)]),  # not holomorphic
        ("aten::mm", [TensorSpec((5, 7), "complex64", seed=3), TensorSpec((7, 3), "complex64", seed=4)]),
        # (not maximum: this torch's maximum(+0, -0) takes another sign in the scalar tail, a bug)
        ("aten::atan2", [TensorSpec((3, 40), "float32", edges=0), TensorSpec((3, 40), "float32", seed=4, edges=1)]),
        ("aten::abs", [TensorSpec((50,), "float32", seed=3, edges=0)]),
        ("aten::mm", [TensorSpec((5, 7), "float32", seed=3), TensorSpec((7, 3), "float32", seed=4)]),
        ("aten::sum", [TensorSpec((50, 7), "bfloat16", seed=3, magnitude="moderate")]),
        ("aten::mul.Tensor", [TensorSpec((9, 20), "bfloat16", edges=0), TensorSpec((20,), "bfloat16", edges=1)]),
    ],
)
def test_correct_kernels_keep_every_relation(qualname, specs):
    _, r = _run(qualname, _case(qualname, *specs), relations=True, grad=True)
    assert r.outcome is Outcome.PASS, r.message


def _alpha_doubled(func, args, kwargs):
    """An in-place kernel that scales `other` twice (its functional is right)."""
    return func(args[0], args[1], alpha=2 * kwargs.get("alpha", 1))


def test_an_in_place_overload_that_disagrees_with_its_functional_is_found():
    case = _case("aten::add_.Tensor", TensorSpec((4, 5), "float32", seed=1), TensorSpec((4, 5), "float32", seed=2))
    _, plain = _run("aten::add_.Tensor", case, _alpha_doubled, aten.add_.Tensor, relations=False)
    # golden runs the same in-place kernel: without relations only the independent reference sees it
    assert plain.outcome is Outcome.PASS or "independent reference" in plain.message, plain.message
    op, r = _run("aten::add_.Tensor", case, _alpha_doubled, aten.add_.Tensor, relations=True)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[forms relation]" in r.message or "independent reference" in r.message, r.message
    assert _replayed(op, case, r, _alpha_doubled, aten.add_.Tensor).startswith("verdict: mismatch")


class _RightSigmoidBackward(TorchDispatchMode):
    """An accelerator whose sigmoid backward is right where the CPU's formula is not."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.sigmoid_backward.default:
            grad, y = args
            return grad * (y * (1 - y))
        return func(*args, **(kwargs or {}))


class RightSigmoidBackward(CPUBackend):
    name = "right-sigmoid-backward"

    def device_context(self):
        return _RightSigmoidBackward()


def test_an_accelerator_that_matches_finite_differences_is_not_failed_for_the_cpus_formula():
    op = opdb.lookup("aten::sigmoid")
    case = _case("aten::sigmoid", TensorSpec((4, 6), "float32", seed=1))
    with _Kernel(aten.sigmoid_backward.default, _sign_flipped):
        blamed = execute.run_case(op, case, RightSigmoidBackward(), grad=True, relations=False)
        judged = execute.run_case(op, case, RightSigmoidBackward(), grad=True, relations=True)
    assert blamed.outcome is Outcome.GRAD_MISMATCH  # golden shares the CPU's formula
    assert judged.outcome is Outcome.PASS, judged.message
    assert judged.finding and "finite differences disagree with autograd's formula" in judged.finding["message"]


# -- random ops, re-seeded identically before each run ------------------------------------------


def test_randn_into_a_permuted_out_under_a_fixed_seed_is_found():
    """The real kernel (an expected failure of PyTorch's test_out for randn on the CPU): it draws
    in the out's memory order, so a transposed out holds other values than a contiguous one."""
    op = opdb.lookup("aten::randn.out")
    case = Case("aten::randn.out", ([4, 5],), {"out": TensorSpec((0,), "float32")}, seed=3)
    checked, r = execute.run_out_variants(op, case, CPUBackend(), relations=True)
    assert checked and r is not None and r.outcome is Outcome.MISMATCH, r and r.message
    assert "[out_layout relation]" in r.message
    assert not r.variant_case.kwargs["out"].layout == "contiguous"


@pytest.mark.parametrize("qualname", ["aten::uniform.out", "aten::exponential.out"])
def test_a_random_op_that_draws_in_logical_order_keeps_the_out_layout_relation(qualname):
    op = opdb.lookup(qualname)
    case = Case(qualname, (TensorSpec((4, 5), "float32", seed=1),), {"out": TensorSpec((0,), "float32")}, seed=3)
    checked, r = execute.run_out_variants(op, case, CPUBackend(), relations=True)
    assert checked and r is None, r and r.message


def _one_draw_more(func, args, kwargs):
    """An in-place random fill that consumes one draw of the generator before its own."""
    torch.empty(1).uniform_()
    return func(*args, **kwargs)


def test_a_random_in_place_fill_that_draws_otherwise_than_its_functional_is_found():
    case = _case("aten::exponential_", TensorSpec((4, 5), "float32", seed=1), seed=3)
    _, healthy = _run("aten::exponential_", case, relations=True)
    assert healthy.outcome is Outcome.PASS, healthy.message
    _, r = _run("aten::exponential_", case, _one_draw_more, aten.exponential_.default, relations=True)
    assert r.outcome is Outcome.MISMATCH and "[forms relation]" in r.message, r.message


# -- parity first: a relation the CPU's kernel breaks too ----------------------------------------


class _Bugged(CPUBackend):
    """An accelerator with `bug` on `target` in its own kernels only."""

    name = "bugged"

    def __init__(self, target, bug):
        super().__init__()
        self.target, self.bug = target, bug

    def device_context(self):
        return _Kernel(self.target, self.bug)


def _stale_for_strided(func, args, kwargs):
    """A kernel that reads memory it never wrote for a non-contiguous input: steady in one
    process's allocation state (the CPU's reruns agree), another stale value in the device's
    (here: under the device's own dispatch mode)."""
    from tests.cpu_kernels import _PassThrough as device_mode

    out = func(*args, **kwargs)
    if args[0].is_contiguous():
        return out
    frame, on_device = sys._getframe(), False
    while frame is not None:
        on_device = on_device or isinstance(frame.f_locals.get("self"), device_mode)
        frame = frame.f_back
    out = out.contiguous().clone()
    out.view(-1)[0] = 7e3 if on_device else 3e3
    return out


@pytest.mark.parametrize(
    "bug, said, relation",
    [
        # the device gives what the CPU gives on every case the relation ran
        (_nan_from_16, "the CPU's kernel too: ", "[position relation]"),
        # the device breaks it with values of its own where the CPU's kernel breaks it with others
        (_stale_for_strided, "the CPU's kernel too, with other values: ", "[layout relation]"),
    ],
    ids=["same_values", "other_values"],
)
def test_a_relation_the_cpus_kernel_breaks_too_is_a_finding_on_an_accelerator(bug, said, relation):
    """The CPU's kernel breaks the relation on the same case as well: a finding about the CPU (no
    expectation for the device there), not the device's failure. The same bug in the device's
    kernels alone, under a right CPU, stays the device's failure."""
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::exp")
    case = _case("aten::exp", TensorSpec((3, 10), "float32", seed=1))
    with _Kernel(aten.exp.default, bug):
        shared = execute.run_case(op, case, CPUKernels(), relations=True)
    assert shared.outcome is Outcome.PASS, shared.message
    assert shared.finding and said + relation in shared.finding["message"]
    own = execute.run_case(op, case, _Bugged(aten.exp.default, bug), relations=True)
    assert own.outcome is Outcome.MISMATCH and relation in own.message, own.message


def test_an_error_only_one_layout_raises_on_the_cpu_too_is_a_finding_on_an_accelerator():
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::mul.Tensor")
    for layout, says in (
        ("contiguous", "raises only with self transposed"),
        ("transposed", "raises only in the drawn layout"),
    ):
        case = _case(
            "aten::mul.Tensor",
            TensorSpec((4, 5), "float32", seed=1, layout=layout),
            TensorSpec((4, 5), "float32", seed=2),
        )
        with _Kernel(aten.mul.Tensor, _raises_transposed):
            shared = execute.run_case(op, case, CPUKernels(), relations=True)
        assert shared.outcome is Outcome.PASS, shared.message
        assert shared.finding and says in shared.finding["message"], shared.finding
        # the device's own: drawn contiguous, its relation; drawn transposed, parity with the CPU
        own = execute.run_case(op, case, _Bugged(aten.mul.Tensor, _raises_transposed), relations=True)
        assert own.outcome is Outcome.DEVICE_ERROR, own.message
        assert layout == "transposed" or says in own.message, own.message


def test_a_strided_out_the_cpus_kernel_fills_wrongly_too_is_a_finding_on_an_accelerator():
    """randn.out's CPU kernel draws in the out's memory order (see above); a device that draws
    as the CPU does shares it."""
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::randn.out")
    case = Case("aten::randn.out", ([4, 5],), {"out": TensorSpec((0,), "float32")}, seed=3)
    checked, r = execute.run_out_variants(op, case, CPUKernels(), relations=True)
    assert checked and r is not None and r.outcome is Outcome.PASS, r and r.message
    assert r.finding and "the CPU's kernel too: [out_layout relation]" in r.finding["message"]


_CALLS = iter(range(1, 1 << 30))


def _garbage_at_0(func, args, kwargs):
    """A kernel that leaves its first element unwritten: another value on every call (not from
    torch's generator, which each run re-seeds)."""
    out = func(*args, **kwargs).clone()
    out.view(-1)[0] = 1e3 * next(_CALLS)
    return out


def _garbage_by_call_path(func, args, kwargs):
    """A kernel that reads stack memory it never wrote: the same value on every plain call, another
    when the call comes through more Python frames (a dispatch mode's)."""
    out = func(*args, **kwargs).clone()
    depth, frame = 0, sys._getframe()
    while frame is not None:
        depth, frame = depth + (frame.f_code.co_name == "__torch_dispatch__"), frame.f_back
    out.view(-1)[0] = 1e3 * depth
    return out


@pytest.mark.parametrize("bug", [_garbage_at_0, _garbage_by_call_path], ids=["every_call", "call_path"])
def test_a_cpu_reference_that_changes_from_run_to_run_is_no_expectation_on_an_accelerator(bug):
    """Self-consistent first: where the CPU's kernel gives another result when the same case runs
    again (on every call, or only through another call path, as a kernel reading its stack's
    garbage does), the device cannot be held to it (the case is redrawn, the CPU's inconsistency
    kept as a finding); a device whose own kernel does it still fails against a steady CPU."""
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::exp")
    case = _case("aten::exp", TensorSpec((3, 10), "float32", seed=1))
    with _Kernel(aten.exp.default, bug):
        shared = execute.run_case(op, case, CPUKernels())
    assert shared.outcome is Outcome.PASS and shared.invalid, shared.message
    assert shared.finding and "another result when the same case runs again" in shared.finding["message"]
    own = execute.run_case(op, case, _Bugged(aten.exp.default, bug))
    assert own.outcome is Outcome.MISMATCH, own.message


def test_an_opaque_packed_handle_is_compared_by_shape_not_bytes():
    """fbgemm's packed weight is a uint8 tensor holding a C++ object's address: another call, in
    any layout, gives other bytes (opdb/rules/nondeterminism.toml)."""
    op = opdb.lookup("aten::fbgemm_pack_quantized_matrix")
    case = _case(op.qualname, TensorSpec((1, 2), "int8", seed=1))
    r = execute.run_case(op, case, CPUBackend(), relations=True)
    assert r.outcome is Outcome.PASS, r.message


def test_relations_first_run_on_a_case_with_a_tensor_to_relay(monkeypatch):
    # hypothesis draws a 0-d case first, where no layout or position differs: the relations'
    # first run goes to the first case with a tensor of two elements or more
    from conform.config import CellSettings
    from conform.run import cell

    runs, differenced = [], []
    real = execute.run_case

    def record(op, case, backend, **kw):
        if kw.get("relations"):
            runs.append(max((s.numel for s in case.tensor_specs()), default=0))
        if kw.get("finite_differences"):
            differenced.append(all(s.edges is None and s.values != "special" for s in case.tensor_specs()))
        return real(op, case, backend, **kw)

    monkeypatch.setattr(cell.execute, "run_case", record)
    for seed in (1, 2):
        runs.clear()
        differenced.clear()
        r = cell.run_cell(
            opdb.lookup("aten::sum.dim_IntList"), "float32", CPUBackend(), CellSettings(seed=seed, hypothesis_db=None)
        )
        assert r.outcome == Outcome.PASS.value and runs and runs[0] >= 2, (seed, runs)
        # finite differences once, on the first case of finite values (a 0-d one does: a wrong
        # formula shows there as well)
        assert differenced == [True], (seed, differenced)


def test_an_lu_saved_for_the_backward_may_factor_the_transpose():
    # _linalg_slogdet of A stored transposed returns the LU of A.T (LAPACK's cheaper memory
    # order): its sign and logabsdet agree, its saved factors differ by layout by design
    import opdb
    from conform.backends import CPUBackend
    from conform.outcomes import Outcome
    from conform.run import execute
    from generators import Case, TensorSpec

    op = opdb.lookup("aten::_linalg_slogdet")
    a = TensorSpec((3, 3), "float32", layout="transposed", values="invertible", seed=5)
    assert (
        execute.run_case(op, Case(op.qualname, (a,)), CPUBackend(), grad=False, relations=True).outcome is Outcome.PASS
    )


def test_the_wide_finite_difference_run_waits_for_a_factor_of_moderate_entries():
    # a Cholesky factor is another op's result, given as values: one of entries near 3e10 does not
    # take the wide run, which then reaches a factor where the forward-mode formula's error shows
    from conform.run import cell

    op = "aten::cholesky_inverse"
    huge = Case(op, (TensorSpec((3, 3), "float32", data=(2.9e10, 0.0, 0.0) * 3),), {})
    near_one = Case(op, (TensorSpec((3, 3), "float32", data=(2.0, 0.4, -0.4) * 3),), {})
    assert not cell._moderate(huge) and cell._moderate(near_one)


def test_a_documented_gradient_is_not_held_to_finite_differences():
    # embedding's padding_idx row "does not contribute to the gradient" though the forward reads it
    from conform.judge import gradients

    op = opdb.lookup("aten::embedding")
    weight, indices = TensorSpec((2, 3), "float32", seed=1), TensorSpec((2,), "int64", data=(0, 1))
    padded, plain = (
        Case(op.qualname, (weight, indices, 0), {}, seed=3),
        Case(op.qualname, (weight, indices, -1), {}, seed=3),
    )
    assert gradients._documented_gradient(op, padded) and not gradients._documented_gradient(op, plain)
    assert gradients.check(op, padded) is None and gradients.check(op, plain) is not None
    r = execute.run_case(op, padded, CPUBackend(), grad=True, finite_differences=True)
    assert r.outcome is Outcome.PASS, r.message


@pytest.mark.parametrize("qualname, dtype", [("aten::where", "float32"), ("aten::slice_inverse", "int64")])
def test_a_result_of_positions_or_of_a_storage_view_is_no_relation_failure(qualname, dtype):
    # where(condition) returns the true elements' positions; slice_inverse views self's storage
    # with src's strides: both move with the layout or position by definition (seed-11 sweep alarms)
    from conform.config import CellSettings
    from conform.run import cell

    r = cell.run_cell(opdb.lookup(qualname), dtype, CPUBackend(), CellSettings(seed=11, hypothesis_db=None))
    assert r.outcome == Outcome.PASS.value, r.message

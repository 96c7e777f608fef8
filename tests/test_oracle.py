"""The verdict rule (conform/judge/verdict.py): parity with the CPU first, golden to judge, the case's
conditioning and the kernel's self-consistency."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import opdb
from conform.backends import CPUBackend
from conform.judge import verdict as oracle
from conform.judge.compare import Record, compare
from conform.outcomes import Outcome as O
from conform.results import CellResult
from conform.run.execute import run_case
from generators.case import Case
from generators.case import TensorSpec as T
from tests.cpu_kernels import CPUKernels
from tests.faulty import FaultyBackend, _FaultMode, aten

INF = math.inf
# sinh's vectorised float32 path overflows where the result fits: sinh(89) is 2.24e38, below
# float32's largest value, but the vector loop forms exp(89) first and gives inf, while the scalar
# tail and float64 give 2.24e38: a CPU bug that depends on the element's position (AVX2 and
# AVX-512 alike; gelu's NaN for inf, used before, shows on AVX-512 only)
SINH_BIG = Case("aten::sinh", (T((36,), "float32", data=(89.0, 1.0, -89.0) * 12),))
# gelu's float32 vector loop gives NaN for +-inf on AVX-512 builds (its erf polynomial meets
# inf * 0) while the scalar tail and float64 give inf / 0. Not every CPU shows it, so the plain
# CPU's tests install that bug exactly: NaN for inf in the full 8-element blocks, float32 only
GELU_INF = Case("aten::gelu", (T((36,), "float32", data=(INF, -INF, 1.0) * 12),))


def _gelu_vector_nan(func, args, kwargs):
    out = func(*args, **kwargs)
    x = args[0]
    if x.dtype != torch.float32 or x.numel() < 8:
        return out
    flat = x.reshape(-1)
    blocks = flat.numel() - flat.numel() % 8
    hit = torch.zeros(flat.shape, dtype=torch.bool)
    hit[:blocks] = flat[:blocks].isinf()
    return torch.where(hit.reshape(out.shape), torch.full_like(out, float("nan")), out)


def _cpu_with_gelu_vector_nan():
    """The plain CPU (golden against it), with gelu's vector-path bug whatever this CPU's ISA."""
    return _FaultMode(frozenset({aten.gelu.default}), _gelu_vector_nan)


def _backend(name, targets, bug):
    return type(name, (FaultyBackend,), {"name": name, "targets": frozenset(targets), "bug": staticmethod(bug)})()


def test_device_agreeing_with_the_cpu_passes_and_the_cpu_deviation_is_a_reference_finding():
    r = run_case(opdb.lookup("aten::sinh"), SINH_BIG, CPUKernels())
    assert r.outcome == O.PASS, r.message
    assert r.finding["kind"] == oracle.REFERENCE and r.finding["phase"] == "forward"
    assert "infinity mismatch" in r.finding["message"] and r.finding["ref_golden_err"] == INF


def test_the_cpu_under_test_is_still_held_against_golden_and_position_dependence_is_named():
    with _cpu_with_gelu_vector_nan():
        r = run_case(opdb.lookup("aten::gelu"), GELU_INF, CPUBackend())
    assert r.outcome == O.MISMATCH
    assert "computed alone" in r.message and "depends on its position" in r.message


def test_device_right_where_the_cpu_is_wrong_passes_with_a_cpu_wrong_finding():
    in_double = _backend("sinh-f64", {aten.sinh.default}, lambda f, a, k: f(a[0].double(), *a[1:], **k).to(a[0].dtype))
    r = run_case(opdb.lookup("aten::sinh"), SINH_BIG, in_double)
    assert r.outcome == O.PASS, r.message
    assert r.finding["kind"] == oracle.CPU_WRONG and "CPU reference is wrong here" in r.message


def test_device_far_from_both_fails_with_both_errors_against_golden():
    off = _backend("gelu-off", {aten.gelu.default}, lambda f, a, k: f(*a, **k) + 0.5)
    r = run_case(opdb.lookup("aten::gelu"), Case("aten::gelu", (T((4, 9), "float32", seed=1),)), off)
    assert r.outcome == O.MISMATCH and "(golden float64)" in r.message and r.device_golden_err > 0.4


def test_error_within_the_cases_conditioning_is_a_precision_edge_not_a_mismatch():
    # acos near 1: one float32 unit of the input moves acos by ~1e-4 relative; a correct
    # float32 kernel is that far from golden computed on the exact input
    near_one = Case("aten::acos", (T((5,), "float32", data=(0.9995, 0.99951, -0.9996, 0.9999, 0.99999)),))
    r = run_case(opdb.lookup("aten::acos"), near_one, CPUBackend())
    assert r.outcome == O.PASS, r.message
    assert r.finding["kind"] == oracle.PRECISION_EDGE
    # the conditioning excuses the case's precision, not a wrong kernel
    off = _backend("acos-off", {aten.acos.default}, lambda f, a, k: f(*a, **k) * 1.01)
    assert run_case(opdb.lookup("aten::acos"), near_one, off).outcome == O.MISMATCH


def test_a_kernel_that_reads_uninitialised_memory_is_not_self_consistent():
    calls = iter(range(1, 100))

    def rerun(case, tx=None, scribble=False):
        return (torch.full((4,), float(next(calls))), {})

    phase = oracle.Phase(
        "forward",
        None,
        None,
        None,
        lambda a, e: compare(a[0], e[0]),
        run_cpu=lambda c, d, tx=None: None,
        expect=lambda raw: raw,
    )
    actual = (torch.zeros(4), {})
    why = oracle.self_consistency(phase, actual, rerun, [Record("output", "values", index=(0,))])
    assert "uninitialised memory" in why


def test_a_cell_without_a_cpu_kernel_for_its_dtype_is_told_apart_from_no_valid_case():
    from conform.outcomes import NO_KERNEL, NO_VALID_CASE
    from conform.run.cell import CellSettings, run_cell

    settings = CellSettings(examples=2, hypothesis_db=None)
    no_kernel = run_cell(opdb.lookup("aten::addmm"), "bool", CPUBackend(), settings)
    assert (no_kernel.outcome, no_kernel.skip_reason) == ("skipped", NO_KERNEL)
    assert no_kernel.message.startswith("no CPU kernel for bool")
    # every input invalid for another reason: the generator found no valid case
    bad_cases = run_cell(
        opdb.lookup("aten::cholesky"),
        "float32",
        CPUBackend(),
        dataclasses.replace(settings, examples=1, cell_budget_s=0.5),
    )
    if bad_cases.outcome == "skipped":
        assert bad_cases.skip_reason == NO_VALID_CASE


def test_findings_reach_the_cell_and_the_report(tmp_path):
    from conform.report import summary as report
    from conform.run.cell import CellSettings, run_cell
    from conform.store import Store

    cell = run_cell(
        opdb.lookup("aten::gelu"), "float32", CPUKernels(), CellSettings(examples=20, hypothesis_db=None, grad=False)
    )
    assert cell.outcome == "pass"
    store = Store(tmp_path / "c.db")
    run = store.start_run(
        {"fingerprint": "k" * 32, "torch_version": "x", "backend": "cpu-kernels"},
        options={},
        seed=0,
        ops_total=1,
        cells_planned=1,
    )
    store.record_catalog(run, [opdb.lookup("aten::gelu")])
    store.record_result(
        run,
        dataclasses.replace(
            cell,
            findings=[
                {
                    "kind": "reference",
                    "phase": "forward",
                    "message": "the CPU reference deviates from float64: NaN mismatch",
                    "ref_golden_err": INF,
                }
            ],
        ),
    )
    text = report.render(report.summaries(store), "table")
    assert "1 reference findings" in text and "aten::gelu float32 (forward): the CPU reference deviates" in text


def test_output_strides_are_compared_with_the_reference_unless_the_backend_chooses_them():
    # a transpose that copies: the values are right, the strides are not a view's
    copies = _backend("t-copies", {aten.t.default}, lambda f, a, k: f(*a, **k).contiguous())
    r = run_case(opdb.lookup("aten::t"), Case("aten::t", (T((3, 5), "float32", seed=1),)), copies)
    assert r.outcome == O.META_MISMATCH and "strides [3, 1] (contiguous) vs [1, 5] (strided) expected" in r.message
    assert (
        run_case(opdb.lookup("aten::t"), Case("aten::t", (T((3, 5), "float32", seed=1),)), CPUKernels()).outcome
        == O.PASS
    )
    # size-1 dimensions have no significant stride
    assert run_case(opdb.lookup("aten::t"), Case("aten::t", (T((1, 5), "float32", seed=1),)), copies).outcome == O.PASS
    # a convolution's memory format is the backend's choice (opdb/rules/strides.toml)
    conv = Case("aten::conv2d", (T((1, 2, 5, 5), "float32", seed=1), T((3, 2, 3, 3), "float32", seed=2)))
    channels_last = _backend(
        "conv-cl", {aten.convolution.default}, lambda f, a, k: f(*a, **k).contiguous(memory_format=torch.channels_last)
    )
    assert run_case(opdb.lookup("aten::conv2d"), conv, channels_last).outcome == O.PASS


def test_reference_findings_have_their_own_list_on_the_site(tmp_path):
    from conform.store import Store
    from conform.website.build import build_site
    from sitedata import EVIL, OPS_213, env

    store = Store(tmp_path / "c.db")
    run = store.start_run(env("2.13.0", backend="mps"), options={}, seed=1, ops_total=len(OPS_213), cells_planned=2)
    store.record_catalog(run, OPS_213)
    finding = {
        "kind": "reference",
        "phase": "forward",
        "message": f"the CPU reference deviates from float64 (the device agrees with it): NaN mismatch {EVIL}",
        "ref_golden_err": INF,
        "device_golden_err": INF,
    }
    store.record_result(
        run,
        CellResult(
            op="aten::relu", dtype="float32", outcome="pass", examples_run=3, examples_passed=3, findings=[finding]
        ),
    )
    store.record_result(
        run,
        CellResult(
            op="aten::add.Tensor",
            dtype="bool",
            outcome="skipped",
            skip_reason="no_kernel",
            message="no CPU kernel for bool",
        ),
    )
    build_site(store, tmp_path / "out")
    page = (tmp_path / "out" / "findings.html").read_text()
    assert "aten::relu" in page and "reference finding" in page and "NaN mismatch" in page
    assert "<script>window.__pwned" not in page  # database strings are escaped
    op_data = (tmp_path / "out" / "data" / "op" / "relu.js").read_text()
    assert '"reference", "forward"' in op_data or '["reference","forward"' in op_data
    assert "no_kernel" in (tmp_path / "out" / "data" / "op" / "add.Tensor.js").read_text()


def _topk_last_tie(f, a, k):
    """topk that picks the last of tied values (flip, topk, map the indices back): the same
    values and a valid choice of indices, and so of where the gradient lands."""
    x, rest = a[0], a[1:]
    dim = (list(rest)[1] if len(rest) > 1 else k.get("dim", -1)) % x.dim()
    values, idx = f(x.flip(dim), *rest, **k)
    return values, x.shape[dim] - 1 - idx


def test_a_gradient_over_tied_values_is_judged_by_what_the_tie_group_receives():
    tied = Case("aten::topk", (T((2, 9), "float32", data=(1.0, 3.0, 3.0, 0.5, 3.0, 2.0, 2.0, 1.0, 0.0) * 2),), {"k": 2})
    last_tie = _backend("topk-last-tie", {aten.topk.default}, _topk_last_tie)
    # the forward's indices select the same values, and the gradient lands on another of the tied
    # elements: as right as the CPU's choice
    r = run_case(opdb.lookup("aten::topk"), tied, last_tie)
    assert r.outcome == O.PASS, r.message

    # a gradient that reaches the wrong values is still a grad_mismatch
    def shifted(f, a, k):
        values, idx = f(*a, **k)
        return values, (idx + 1) % a[0].shape[-1]

    wrong = _backend("topk-wrong-grad", {aten.topk.default}, shifted)
    assert run_case(opdb.lookup("aten::topk"), tied, wrong).outcome in (O.MISMATCH, O.GRAD_MISMATCH)


def test_non_finite_inputs_that_meet_only_a_zero_factor_leave_nan_or_the_skipped_term_both_right():
    # padding: float64 golden's convolution multiplies the inf weight by the implicit zeros
    # (NaN), float32's skips them (finite); the element does not depend on the inf entry at all
    case = Case(
        "aten::conv2d",
        (
            T((2, 1, 2, 2), "float32", seed=0),
            T((1, 1, 2, 2), "float32", data=(2.8203, 1.2469, 2.9387e-39, -INF)),
            T((1,), "float32", seed=0),
            [1, 1],
            [0, 1],
            [1, 1],
            1,
        ),
    )
    ref = run_case(opdb.lookup("aten::conv2d"), case, CPUBackend())
    assert ref.outcome == O.PASS, ref.message
    # an element that depends on the non-finite input keeps its expectation: sigmoid(inf) is 1
    sig = Case("aten::sigmoid", (T((3,), "float32", data=(INF, -INF, 0.5)),))
    nan_for_inf = _backend(
        "sigmoid-nan", {aten.sigmoid.default}, lambda f, a, k: torch.where(a[0].isinf(), math.nan, f(*a, **k))
    )
    assert run_case(opdb.lookup("aten::sigmoid"), sig, nan_for_inf).outcome == O.MISMATCH


def test_strides_of_a_composite_that_takes_its_subclass_path_under_a_dispatch_mode_are_not_the_devices_fault():
    # under any Python dispatch mode masked_select_backward is zeros_like(input).masked_scatter(...)
    # (ATen/TensorSubclassLikeUtils.h): a device built as a dispatch mode gets that layout
    case = Case(
        "aten::masked_select_backward",
        (
            T((24,), "float16", seed=1),
            T((2, 3, 2, 2), "float16", seed=2, layout="channels_last"),
            T((2, 3, 2, 2), "bool", seed=3),
        ),
    )
    assert run_case(opdb.lookup("aten::masked_select_backward"), case, CPUKernels()).outcome == O.PASS
    # a device whose own kernel lays the result out differently is still a meta_mismatch
    # (the composite reaches a device's dispatch mode as masked_scatter)
    dense = _backend(
        "msb-transposed",
        {aten.masked_scatter.default},
        lambda f, a, k: f(*a, **k).transpose(0, 1).contiguous().transpose(0, 1),
    )
    assert run_case(opdb.lookup("aten::masked_select_backward"), case, dense).outcome == O.META_MISMATCH


def test_a_result_beyond_the_dtypes_range_may_come_back_as_any_non_finite_value():
    # the exact dot products are ~2.7e41: float32 cannot hold them; the CPU's blocked sum meets
    # inf - inf and gives NaN where golden rounded to float32 is inf
    x = torch.full((57,), 1e20)
    x[::2] *= -1
    x[1::4] *= 3
    case = Case(
        "aten::addmv",
        (
            T((2,), "float32", data=(0.0, 0.0)),
            T((2, 57), "float32", data=(1e20,) * 114),
            T((57,), "float32", data=tuple(x.tolist())),
        ),
    )
    assert run_case(opdb.lookup("aten::addmv"), case, CPUBackend()).outcome == O.PASS
    # a representable result returned as infinity stays an alarm
    inf_for_big = _backend(
        "addmv-inf", {aten.addmv.default}, lambda f, a, k: torch.where(f(*a, **k).abs() > 10, INF, f(*a, **k))
    )
    small = Case(
        "aten::addmv",
        (
            T((2,), "float32", data=(0.0, 0.0)),
            T((2, 3), "float32", data=(10.0,) * 6),
            T((3,), "float32", data=(1.0, 2.0, 3.0)),
        ),
    )
    assert run_case(opdb.lookup("aten::addmv"), small, inf_for_big).outcome == O.MISMATCH


def test_a_normalised_output_of_huge_inputs_is_judged_by_its_own_scale():
    # pytorch#162489: float32 batch norm squares inputs near 1e21 in float32, the variance
    # overflows and the output is 0 where +-1 is expected; the saved mean (about 1e20, float32
    # rounding error of ~1e13) is right
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0)) * 1e21
    case = Case(
        "aten::native_batch_norm",
        (T((4, 16), "float32", data=tuple(x.reshape(-1).tolist())),) + (None,) * 4 + (True, 0.1, 1e-5),
    )
    r = run_case(opdb.lookup("aten::native_batch_norm"), case, CPUBackend())
    assert r.outcome == O.MISMATCH and "[output[0]]" in r.message and "[output[1]]" not in r.message, r.message


def test_half_precision_products_beyond_the_range_are_a_precision_edge_on_the_cpu_only():
    # 300 * 250 leaves float16's range inside the CPU's cross product; the result (15000) fits:
    # on the plain CPU the case sits on the dtype's range edge and is a precision edge
    a, b = (300.0, 200.0, 100.0), (300.0, 250.0, 10.0)
    cross = Case("aten::linalg_cross", (T((3,), "float16", data=a), T((3,), "float16", data=b)))
    r = run_case(opdb.lookup("aten::linalg_cross"), cross, CPUBackend())
    assert r.outcome == O.PASS, r.message
    assert r.finding["kind"] == oracle.PRECISION_EDGE and "range" in r.finding["message"]
    # a device that overflows where the CPU does not is not excused
    overflow = _backend(
        "cross-inf",
        {aten.linalg_cross.default},
        lambda f, a, k: f(*a, **k) * torch.tensor([1.0, 1.0, INF], dtype=torch.float16),
    )
    small = Case(
        "aten::linalg_cross", (T((3,), "float16", data=(3.0, 2.0, 1.0)), T((3,), "float16", data=(3.0, 2.5, 0.1)))
    )
    assert run_case(opdb.lookup("aten::linalg_cross"), small, overflow).outcome == O.MISMATCH
    # small inputs whose result overflows inside the kernel stay an alarm on the CPU:
    # ldexp computes 2**20 in float16 (pytorch#133265) though 2**-10 * 2**20 = 1024 fits
    ldexp = Case("aten::ldexp.Tensor", (T((1,), "float16", data=(2.0**-10,)), T((1,), "float16", data=(20.0,))))
    assert run_case(opdb.lookup("aten::ldexp.Tensor"), ldexp, CPUBackend()).outcome == O.MISMATCH


def test_a_float32_result_at_the_top_of_the_range_is_a_precision_edge_but_one_well_inside_stays_an_alarm():
    # pow(x, 3)'s gradient 3 x**2 * grad at x near 1e20: x**2 overflows float32, and the gradient
    # is representable (2e38) only where grad is a few hundredths: the range's top
    edge = Case(
        "aten::pow.Tensor_Scalar",
        (T((3, 57), "float32", layout="transposed", magnitude="beyond_sqrt"), 3),
        seed=167,
    )
    r = run_case(opdb.lookup("aten::pow.Tensor_Scalar"), edge, CPUBackend())
    assert r.outcome == O.PASS and r.finding["kind"] == oracle.PRECISION_EDGE, r.message
    assert r.finding["phase"] == "backward"
    # a 2-norm of 3e20s is 8.5e20, far inside float32's range: the CPU's squares overflowing is
    # the kernel's, and stays an alarm
    norm = Case("aten::linalg_vector_norm", (T((8,), "float32", data=(3e20,) * 8),))
    r = run_case(opdb.lookup("aten::linalg_vector_norm"), norm, CPUBackend())
    assert r.outcome == O.MISMATCH and "inf vs 8.48" in r.message, r.message


_UNIT_AT_1000 = float(torch.finfo(torch.float32).eps) * 512  # one float32 unit at 1000


def _sub_within_conditioning(a, b, off) -> bool:
    """Is sub(a, b) + off float32 units at 1000 within the case's conditioning, where a strict
    tolerance alone fails it?"""
    from conform.judge.compare import failures

    def run(case, dt, tx=None):
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"), dtype=dt)
        return torch.ops.aten.sub.Tensor(*args, **kwargs), {}

    def strict(x, y):
        return compare(x[0], y[0], tolerance=(1.3e-6, 1e-5))

    case = Case("aten::sub.Tensor", (a, b))
    reference = run(case, None)
    dtype = reference[0].dtype
    phase = oracle.Phase(
        "forward",
        opdb.lookup("aten::sub.Tensor"),
        case,
        reference,
        strict,
        run_cpu=run,
        expect=lambda raw: (raw[0].to(dtype), {}),
    )
    actual = (reference[0] + off * _UNIT_AT_1000, {})
    assert failures(strict(actual, phase.expect(phase.golden)))  # off golden before any excuse
    patched, _ = oracle._conditioning_excused(phase, actual, phase.expect(phase.golden), phase.golden)
    return patched is not None and not failures(strict(actual, patched))


def test_conditioning_moves_inputs_apart_so_cancellation_counts():
    # a - b of float32 inputs near 1000: moving both the same way leaves the difference as it
    # is, moving them apart changes it by two units of 1000 (1.2e-4). A result a few units of
    # the inputs off is within the case's conditioning; ten units off is not.
    a = T((8,), "float32", data=tuple(1000.0 + i / 8 for i in range(8)))
    b = T((8,), "float32", data=tuple(1000.0 - i / 16 for i in range(8)))
    assert _sub_within_conditioning(a, b, 1.0) and _sub_within_conditioning(a, b, 2.0)
    assert not _sub_within_conditioning(a, b, 10.0)


def test_conditioning_holds_complex_results_part_by_part():
    # the same cancellation in complex64: real and imaginary parts near 1000 each move by one
    # float32 unit; a result a few units off in either part is the case's precision, ten is not
    a = T((8,), "complex64", data=tuple(complex(1000.0 + i / 8, -1000.0 + i / 4) for i in range(8)))
    b = T((8,), "complex64", data=tuple(complex(1000.0 - i / 16, -1000.0 - i / 8) for i in range(8)))
    assert _sub_within_conditioning(a, b, 2.0) and _sub_within_conditioning(a, b, 2.0j)
    assert not _sub_within_conditioning(a, b, 10.0) and not _sub_within_conditioning(a, b, 10.0j)


def test_which_infinity_an_overflowing_sum_ends_in_may_follow_the_layout():
    # bfloat16 products of values beyond sqrt(max): the exact result is beyond the dtype's
    # range, and the sign of the infinity the CPU's blocked sum ends in follows the path a
    # transposed operand takes: not a layout bug (rule (d) frees the element, and the layout
    # check must not take it back)
    def huge(shape, layout):
        return T(shape, "bfloat16", layout, magnitude="beyond_sqrt", seed=0)

    case = Case("aten::mm", (huge((4, 4), "transposed"), huge((4, 1), "offset")))
    r = run_case(opdb.lookup("aten::mm"), case, CPUBackend())
    assert r.outcome == O.PASS, r.message


def test_a_reduction_along_a_dim_is_not_blamed_for_position():
    # softmax's backward: grad * (y - sum(grad * y)) along the dim. In float16 beyond sqrt(max)
    # the CPU overflows where golden does not (rule (e): the dtype's range edge); the element
    # check once recomputed one element alone, got another value (its row is gone) and called
    # the kernel position-dependent. Golden float64 of the element alone differs from golden
    # inside the case too: the op is not elementwise here, and no position is blamed.
    big = dict(magnitude="beyond_sqrt", layout="transposed")
    case = Case(
        "aten::_masked_softmax_backward",
        (T((3, 57), "float16", seed=0, **big), T((3, 57), "float16", seed=1, **big), T((3, 57), "bool", "transposed")),
    )
    r = run_case(opdb.lookup("aten::_masked_softmax_backward"), case, CPUBackend())
    assert "depends on its position" not in r.message
    assert r.outcome == O.PASS, r.message
    # an elementwise kernel's position bug is still named (gelu's vector-path NaN for inf)
    with _cpu_with_gelu_vector_nan():
        r = run_case(opdb.lookup("aten::gelu"), GELU_INF, CPUBackend())
    assert r.outcome == O.MISMATCH and "depends on its position" in r.message


def test_nan_from_a_zero_scalar_factor_meeting_inf_is_the_algorithms():
    # addmv_ with alpha=0 and an inf in vec: float64 golden (BLAS) skips the product and gives
    # self; the float16 loop computes 0 * inf = NaN. Golden with alpha=1e-30 is non-finite there:
    # the element meets the inf through the zero factor, and IEEE's NaN is as right
    case = Case(
        "aten::addmv_",
        (T((1,), "float16", data=(2.8203125,)), T((1, 1), "float16", data=(1.5,)), T((1,), "float16", data=(INF,))),
        {"alpha": 0},
    )
    r = run_case(opdb.lookup("aten::addmv_"), case, CPUBackend())
    assert r.outcome == O.PASS, r.message
    # a NaN in an element that meets the NaN through no zero scalar stays an alarm: slow_conv3d's
    # bfloat16 backward gives NaN for an input element no window reads (float32/64 give 0)
    conv = Case(
        "aten::slow_conv3d_forward",
        (
            T((1, 1, 3, 1, 3), "bfloat16", edges=0, seed=0),
            T((2, 1, 3, 1, 2), "bfloat16", edges=1, seed=0),
            [3, 1, 2],
            T((2,), "bfloat16", edges=2, seed=0),
            [1, 1, 2],
            [0, 0, 0],
        ),
    )
    r = run_case(opdb.lookup("aten::slow_conv3d_forward"), conv, CPUBackend())
    if _slow_conv3d_bf16_backward_nan(conv):
        assert r.outcome == O.GRAD_MISMATCH and "NaN mismatch" in r.message, r.message
    else:  # a CPU whose bfloat16 kernel does not show the bug: nothing to excuse, nothing to blame
        assert r.outcome == O.PASS, r.message


def _slow_conv3d_bf16_backward_nan(case) -> bool:
    """Whether this CPU's bfloat16 slow_conv3d backward gives NaN for the case's input where float32
    gives a number (an element no window reads; whether it shows depends on the machine: the
    kernel reads memory it never wrote)."""
    args, _ = case.materialize(lambda t: t, torch.device("cpu"))
    grads = []
    for dtype in (torch.bfloat16, torch.float32):
        x = args[0].detach().to(dtype).requires_grad_(True)
        rest = [a.to(dtype) if isinstance(a, torch.Tensor) else a for a in args[1:]]
        y = torch.ops.aten.slow_conv3d_forward(x, *rest)
        (g,) = torch.autograd.grad(y, x, torch.ones_like(y))
        grads.append(g)
    return bool((grads[0].isnan() & ~grads[1].float().isnan()).any())


def test_grid_sampler_half_coordinates_are_its_precision_but_a_half_pixel_shift_is_not():
    # grid_sampler unnormalises the grid in float16 ((x + 1) / 2 * (size - 1)): x + 1 rounds a
    # small coordinate to float16's unit at 1, whatever its own unit (a sweep's alarm, seed 17)
    case = Case(
        "aten::grid_sampler_2d",
        (T((1, 1, 3, 4), "float16", seed=1), T((1, 3, 4, 2), "float16", values="unit"), 0, 0, False),
    )
    op = opdb.lookup("aten::grid_sampler_2d")
    r = run_case(op, case, CPUBackend(), grad=False)
    assert r.outcome == O.PASS and r.finding["kind"] == oracle.PRECISION_EDGE, r.message
    # a kernel half a pixel off (align_corners taken the other way) is far beyond that unit
    shifted = _backend(
        "grid-shift",
        {aten.grid_sampler_2d.default},
        lambda f, a, k: f(a[0], a[1] + torch.tensor([1 / 4, 1 / 3], dtype=a[1].dtype), *a[2:], **k),
    )
    r = run_case(op, case, shifted, grad=False)
    assert r.outcome == O.MISMATCH, r.message


def test_a_cpu_kernel_reading_a_local_it_never_set_is_no_expectation():
    # laguerre_polynomial_l at a NaN x never enters its loop and returns the loop's variable
    # unset: what the run before at the same call depth left there. Run right after the op ran on
    # other values, the CPU reference gives that run's result: it is no expectation for the device
    from conform.run.execute import _cpu_copy, _cpu_unsteady, _observed, _primed, _run_side

    op = opdb.lookup("aten::special_laguerre_polynomial_l.n_scalar")
    case = Case(op.qualname, (T((), "float32", data=(math.nan,)), 2))
    cpu = torch.device("cpu")
    first = _observed(_run_side(op, case, to_device=_cpu_copy, device=cpu))
    if torch.isnan(first[0]):
        pytest.skip("this torch's kernel gives NaN at a NaN x")

    def same(again, want):
        return compare(again[0], want[0], tolerance=(0.0, 0.0))

    assert _cpu_unsteady(op, case, first, same)
    # the primed run is what makes it show at any call depth: L_2 at 0.375 is 0.3203
    _run_side(op, case, to_device=_primed, device=cpu)
    assert abs(float(_observed(_run_side(op, case, to_device=_cpu_copy, device=cpu))[0]) - 0.3203) < 1e-4
    steady = Case(op.qualname, (T((), "float32", data=(1.5,)), 2))
    assert _cpu_unsteady(op, steady, _observed(_run_side(op, steady, to_device=_cpu_copy, device=cpu)), same) == ""


def test_a_gradient_on_the_wrong_side_of_an_exact_breakpoint_is_no_precision_edge():
    # hardsigmoid's derivative steps from 1/6 to 0 at +-3, which the input holds exactly: a device
    # passing the gradient there (<= for <) is on the wrong side of PyTorch's convention, not
    # within the case's conditioning, though moving the input by a unit crosses the step
    from tests.faulty_third import THIRD

    op = opdb.lookup("aten::hardsigmoid")
    for data in ((3.0, -3.0, 1.0, 0.5) * 4, (-3.0,)):
        case = Case(op.qualname, (T((len(data),), "float32", data=data),))
        r = run_case(op, case, THIRD["hardsigmoid_backward_boundary"](), grad=True)
        assert r.outcome is O.GRAD_MISMATCH and r.phase == "backward", r.message
        assert run_case(op, case, CPUKernels(), grad=True).outcome is O.PASS
    # off the breakpoints the faulty kernel is right
    case = Case(op.qualname, (T((4,), "float32", data=(2.5, -2.5, 1.0, 0.5)),))
    assert run_case(op, case, THIRD["hardsigmoid_backward_boundary"](), grad=True).outcome is O.PASS

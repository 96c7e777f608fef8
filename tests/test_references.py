"""Independent references: the table, and the verdict when golden shares a kernel's bug."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.judge import references
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run.execute import run_case
from generators.case import Case, TensorSpec
from script_runner import run_script

aten = torch.ops.aten


def _ref(qualname):
    return references.reference_for(opdb.lookup(qualname))


def test_table_names_library_functions():
    assert _ref("aten::atan2").origin == "numpy.arctan2"
    assert _ref("aten::atan2").sign_of_zero
    assert _ref("aten::lgamma").origin == "scipy.special.gammaln"
    assert _ref("aten::cumsum").origin == "numpy.cumsum"
    assert _ref("aten::special_i1e").origin == "scipy.special.i1e"
    assert _ref("aten::mse_loss").origin == "torch._decomp"


def test_discovery_by_name_and_its_exclusions():
    exp = _ref("aten::exp")
    assert exp.discovered and exp.expression == "numpy.exp(self)"
    assert _ref("aten::lt.Tensor").origin == "numpy.less"
    # same name, another meaning: never discovered
    assert _ref("aten::nextafter") is None
    assert _ref("aten::equal") is None
    # documented differences are entries with their reason, citing the documentation
    abs_ = _ref("aten::abs")
    assert abs_.ignore and "neither library defines it" in abs_.why


def test_every_table_expression_names_a_real_function():
    ns = references.namespace()
    for op in opdb.catalog():
        hints = op.rules.hints or {}
        expr = hints.get("reference")
        if not expr or expr == references.DECOMPOSITION:
            continue
        origin = references._origin(expr)
        obj = ns[origin.split(".")[0]]
        for part in origin.split(".")[1:]:
            obj = getattr(obj, part)  # raises on a misspelt function
        assert callable(obj), (op.qualname, origin)


def test_decompositions_that_call_the_op_itself_are_refused():
    op = opdb.lookup("aten::mse_loss")
    case = Case(op.qualname, (TensorSpec((3,), "float32", seed=1), TensorSpec((3,), "float32", seed=2)), {}, seed=1)
    assert references.opinion(op, case) is not None
    assert references._INDEPENDENT["aten::mse_loss"] is True


def _atan2_case():
    y = TensorSpec((4,), "float32", data=(0.0, -0.0, 0.0, 1.0))
    x = TensorSpec((4,), "float32", data=(-0.0, -1.0, 2.0, 1.0))
    return Case("aten::atan2", (y, x), {}, seed=1)


class _ZeroQuadrantLost(TorchDispatchMode):
    """atan2 that loses the quadrant of a zero numerator: atan2(+-0, x < 0) gives 0, not +-pi."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is aten.atan2.default:
            out = torch.where(args[0] == 0, torch.zeros_like(out), out)
        return out


class _RightAtan2(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.atan2.default:
            y, x = args
            return torch.from_numpy(np.arctan2(y.double().numpy(), x.double().numpy())).to(y.dtype)
        return func(*args, **(kwargs or {}))


class _RightDevice(CPUBackend):
    name = "right-atan2"

    def device_context(self):
        return _RightAtan2()


def test_a_bug_golden_shares_is_found_on_the_cpu():
    op = opdb.lookup("aten::atan2")
    assert run_case(op, _atan2_case(), CPUBackend()).outcome is Outcome.PASS
    with _ZeroQuadrantLost():  # the CPU wrong in every dtype: golden float64 too
        r = run_case(op, _atan2_case(), CPUBackend())
    assert r.outcome is Outcome.MISMATCH
    assert "independent reference (numpy.arctan2) disagrees with the CPU kernel" in r.message


def test_a_right_device_is_not_failed_where_the_cpu_is_wrong():
    op = opdb.lookup("aten::atan2")
    with _ZeroQuadrantLost():
        r = run_case(op, _atan2_case(), _RightDevice())
    assert r.outcome is Outcome.PASS
    assert r.finding["kind"] == "cpu_wrong" and "numpy.arctan2" in r.finding["message"]


def test_a_wrong_device_still_fails_where_the_cpu_is_right():
    class WrongDevice(CPUBackend):
        name = "wrong-atan2"

        def device_context(self):
            return _ZeroQuadrantLost()

    r = run_case(opdb.lookup("aten::atan2"), _atan2_case(), WrongDevice())
    assert r.outcome is Outcome.MISMATCH


@pytest.mark.parametrize(
    "qualname, args",
    [
        ("aten::sign", (TensorSpec((3,), "float32", data=(1.5, -0.0, -2.0)),)),
        ("aten::sin", (TensorSpec((3,), "int32", data=(2147483631, -7, 0)),)),
        (
            "aten::remainder.Tensor",
            (TensorSpec((2,), "int32", data=(1, 5)), TensorSpec((), "int64", data=(-2147483634,))),
        ),
    ],
)
def test_documented_differences_raise_no_alarm(qualname, args):
    op = opdb.lookup(qualname)
    r = run_case(op, Case(qualname, args, {}, seed=1), CPUBackend())
    assert r.outcome is Outcome.PASS, r.message


def test_the_angle_of_negative_zero_is_the_cpu_kernels_own_bug():
    # pytorch#78413: the real kernel gives 0 where atan2(0, -0.0) is pi; golden shares it
    op = opdb.lookup("aten::angle")
    r = run_case(
        op, Case("aten::angle", (TensorSpec((3,), "float32", data=(-0.0, -1.0, 2.0)),), {}, seed=1), CPUBackend()
    )
    assert r.outcome is Outcome.MISMATCH and "independent reference" in r.message, r.message


def test_zeta_at_an_infinite_q_is_the_limit_zero():
    # pytorch#187294: the kernel gives NaN at q = +inf, golden shares it; at q = -inf and NaN the
    # libraries agree, so the reference speaks at every non-finite q
    op = opdb.lookup("aten::special_zeta")
    inf, nan = float("inf"), float("nan")
    s = TensorSpec((4,), "float32", data=(2.0, 3.0, 0.5, 1.0))
    r = run_case(op, Case(op.qualname, (s, TensorSpec((4,), "float32", data=(inf, 2.0, 1.0, 2.0))), {}), CPUBackend())
    assert r.outcome is Outcome.MISMATCH and "independent reference" in r.message, r.message
    r = run_case(op, Case(op.qualname, (s, TensorSpec((4,), "float32", data=(-inf, nan, -inf, 2.0))), {}), CPUBackend())
    assert r.outcome is Outcome.PASS, r.message


def test_the_repro_script_recomputes_the_reference(tmp_path):
    op = opdb.lookup("aten::atan2")
    with _ZeroQuadrantLost():
        r = run_case(op, _atan2_case(), CPUBackend())
    script = repro_script(op, _atan2_case(), "cpu", result=r)
    assert "REFERENCE = 'numpy.arctan2(self, other)'" in script
    # the script runs in a fresh process with the same fault: its own torch must be wrong too
    body = (
        "        out = func(*args, **(kwargs or {}))\n"
        "        if func is torch.ops.aten.atan2.default:\n"
        "            out = torch.where(args[0] == 0, torch.zeros_like(out), out)\n"
        "        return out\n"
    )
    out = _script_with_fault(script, body, tmp_path)
    assert "verdict: mismatch" in out, out[-800:]


def _script_with_fault(script: str, dispatch_body: str, tmp_path) -> str:
    """The repro script's output, run in a fresh process under a dispatch mode whose
    __torch_dispatch__ body is `dispatch_body` (the same fault as the test's)."""
    fault = (
        "import torch\n"
        "from torch.utils._python_dispatch import TorchDispatchMode\n"
        "class M(TorchDispatchMode):\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n" + dispatch_body + "M().__enter__()\n"
    )
    path = tmp_path / "repro.py"
    path.write_text(
        script.replace("from __future__ import annotations\n", "from __future__ import annotations\n" + fault, 1)
    )
    return run_script(path, timeout=120).stdout


class _IndicesPastTheInput(TorchDispatchMode):
    """max_pool2d_with_indices whose indices count the padded plane: past the input's last element."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is aten.max_pool2d_with_indices.default:
            values, indices = out
            return values, indices + args[0].shape[-1] * args[0].shape[-2]
        return out


def test_a_sparse_result_that_breaks_its_layouts_invariants_fails():
    """The real kernel: _spdiags places a diagonal past the rows of a (1, 4) result, whose COO
    indices then name row 2 of 1 (golden's too: the same kernel); its dense values read out of
    bounds."""
    op = opdb.lookup("aten::_spdiags")
    offsets = TensorSpec((2,), "int64", data=(0, 1))
    case = Case(op.qualname, (TensorSpec((2, 4), "float32", seed=3), offsets, [1, 4], None))
    r = run_case(op, case, CPUBackend(), grad=False)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "sparse result breaks its layout's invariants" in r.message and "found index" in r.message
    # within the size: nothing to say
    fits = Case(op.qualname, (TensorSpec((2, 4), "float32", seed=3), offsets, [4, 4], None))
    assert run_case(op, fits, CPUBackend(), grad=False).outcome is Outcome.PASS


def test_the_sparse_invariants_leave_a_result_the_caller_vouches_for():
    from conform.judge import invariants

    i = torch.tensor([[0, 0]])
    flagged = torch.sparse_coo_tensor(i, torch.ones(2), (2,))._coalesced_(True)  # says coalesced: it is not
    assert "uncoalesced" in invariants.broken_layout(flagged)
    assert invariants.sparse_records(opdb.lookup("aten::coalesce"), (), flagged)
    # _coalesced_ sets the flag the caller gives; an input already broken makes the result the caller's
    assert not invariants.sparse_records(opdb.lookup("aten::_coalesced_"), (), flagged)
    assert not invariants.sparse_records(opdb.lookup("aten::_gather_sparse_backward"), (), flagged)
    assert not invariants.sparse_records(opdb.lookup("aten::coalesce"), ((flagged,), {}), flagged)
    coalesced = torch.sparse_coo_tensor(i, torch.ones(2), (2,)).coalesce()
    assert coalesced.is_coalesced() and not invariants.sparse_records(opdb.lookup("aten::coalesce"), (), coalesced)


def test_indices_outside_the_input_fail_even_where_golden_shares_them():
    op = opdb.lookup("aten::max_pool2d_with_indices")
    case = Case(op.qualname, (TensorSpec((1, 4, 4), "float32", seed=3), [2, 2]), {}, seed=1)
    assert run_case(op, case, CPUBackend(), grad=False).outcome is Outcome.PASS
    with _IndicesPastTheInput():
        r = run_case(op, case, CPUBackend(), grad=False)
    assert r.outcome is Outcome.MISMATCH and "index lies outside the input" in r.message


def test_exp_like_ops_draw_values_near_their_own_overflow():
    import warnings

    from hypothesis import HealthCheck, given, settings

    import generators

    warnings.simplefilter("ignore")
    op = opdb.lookup("aten::exp")
    drawn = []

    @settings(max_examples=30, database=None, suppress_health_check=list(HealthCheck), deadline=None, derandomize=True)
    @given(generators.from_schema(op, "float16"))
    def draw(case):
        drawn.append(case)

    draw()
    near = 0
    for case in drawn:
        (x,), _ = case.materialize(lambda t: t, torch.device("cpu"))
        finite = x[torch.isfinite(x)].double().abs()
        near += bool(((finite >= 8) & (finite <= 11.1)).any())
    assert near >= len(drawn) // 3, f"{near} of {len(drawn)} cases reach exp's float16 overflow band"


# -- values at the op's own edges: NaN where the documentation defines none, infinite logits, ---
# -- scales that overflow a naive formula, results just below overflow ----------------------

INF, NAN = float("inf"), float("nan")


def _run(qualname, args, kwargs=None, backend=None, **kw):
    op = opdb.lookup(qualname)
    return run_case(op, Case(qualname, args, kwargs or {}, seed=1), backend or CPUBackend(), **kw)


def _t(*values, dtype="float32"):
    return TensorSpec((len(values),), dtype, data=values)


@pytest.mark.parametrize(
    "qualname, args, kwargs",
    [
        ("aten::sign", (_t(NAN, -0.0, 2.0),), {}),
        ("aten::heaviside", (_t(NAN, -0.0, 2.0), _t(1.0, 1.0, 1.0)), {}),
        # the documented formula costs +inf; the kernel's naive one gives NaN
        ("aten::binary_cross_entropy_with_logits", (_t(-INF, 0.5), _t(0.9, 0.5)), {"reduction": 0}),
        # beta x = 5e29 stays under the threshold: log1p(exp(beta x)) / beta is x, not inf
        ("aten::softplus", (_t(0.5, -1.0, 2.0),), {"beta": 1e30, "threshold": 1e30}),
        # I0(711) = 2.7e307 fits float64: the kernel overflows exp(x) first
        ("aten::i0", (_t(711.0, 1.0, dtype="float64"),), {}),
        ("aten::special_i1", (_t(711.0, 1.0, dtype="float64"),), {}),
    ],
)
def test_a_kernel_golden_shares_fails_at_the_ops_edges(qualname, args, kwargs):
    r = _run(qualname, args, kwargs, grad=False)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference" in r.message and "disagrees with the CPU kernel" in r.message


@pytest.mark.parametrize(
    "qualname, args, kwargs",
    [
        ("aten::sign", (_t(1.5, -0.0, -2.0, INF),), {}),
        ("aten::binary_cross_entropy_with_logits", (_t(INF, -2.0, 0.3), _t(0.9, 0.1, 0.4)), {}),
        ("aten::binary_cross_entropy", (_t(0.0, 1.0, 0.3), _t(1.0, 0.0, 0.4)), {"reduction": 0}),
        ("aten::soft_margin_loss", (_t(-INF, 3.0, 0.3), _t(-1.0, 1.0, -1.0)), {"reduction": 2}),
        ("aten::huber_loss", (_t(1e30, 3.0, 0.3), _t(-1.0, 1.0, -1.0)), {"delta": 0.5}),
        ("aten::smooth_l1_loss", (_t(1e30, 3.0, 0.3), _t(-1.0, 1.0, -1.0)), {"beta": 0.0}),
        ("aten::kl_div", (_t(-INF, -1.0, -0.3), _t(0.0, 0.5, 0.2)), {"reduction": 0}),
        ("aten::kl_div", (_t(2.82, 1.25, -0.24), _t(2.82, 1.25, -0.24)), {}),  # a negative target: NaN
        ("aten::softplus", (_t(0.5, -1.0, INF, -INF),), {"beta": 2.0, "threshold": 20}),
        ("aten::i0", (_t(89.0, -3.0, INF, dtype="float64"),), {}),
    ],
)
def test_formula_references_raise_no_alarm_where_the_kernel_is_right(qualname, args, kwargs):
    r = _run(qualname, args, kwargs, grad=False)
    assert r.outcome is Outcome.PASS, r.message


@pytest.mark.parametrize(
    "qualname, args",
    [
        ("aten::binary_cross_entropy_with_logits", (_t(-INF, INF, 0.3), _t(0.0, 1.0, 0.4))),
        ("aten::poisson_nll_loss", (_t(-INF, 3.0, 0.3), _t(0.0, 2.0, 4.0), True, True, 1e-8)),
    ],
)
def test_a_target_of_zero_at_an_infinite_input_is_left_open_by_the_formula_not_by_the_limit(qualname, args):
    """The documented formula meets 0 * inf there (the reference has no opinion), yet with the
    target fixed the loss is one value at every large input: 0 (log(1 + e**x) at x = -inf; a
    rate of e**-inf and a count of 0). The kernel's NaN is off its value at infinity."""
    r = _run(qualname, args, {"reduction": 0}, grad=False)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "where float64 gives 0.0" in r.message and "a drawn e for each" in r.message


class _NaNSign(TorchDispatchMode):
    """sign that propagates NaN, as NumPy does."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is aten.sign.default:
            out = torch.where(torch.isnan(args[0]), args[0], out)
        return out


class _NaNSignDevice(CPUBackend):
    name = "nan-sign"

    def device_context(self):
        return _NaNSign()


def test_a_device_that_matches_the_reference_is_not_failed_where_the_cpu_gives_nan_zero():
    r = _run("aten::sign", (_t(NAN, -0.0, 2.0),), backend=_NaNSignDevice(), grad=False)
    assert r.outcome is Outcome.PASS, r.message
    assert r.finding["kind"] == "cpu_wrong" and "numpy.sign" in r.finding["message"]


def test_a_formula_reference_is_recomputed_by_the_repro_script(tmp_path):
    op = opdb.lookup("aten::softplus")
    case = Case(op.qualname, (_t(0.5, 2.0),), {"beta": 1e30, "threshold": 1e30}, seed=1)
    r = run_case(op, case, CPUBackend(), grad=False)
    script = repro_script(op, case, "cpu", result=r)
    assert "FORMULAS = " in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    out = run_script(path, timeout=120).stdout
    assert "the independent reference" in out and "verdict: mismatch" in out, out[-800:]


I32_MIN, I64_MIN = -(2**31), -(2**63)


@pytest.mark.parametrize(
    "qualname, args, kwargs",
    [
        # int64 self minus int32 INT_MIN: alpha * other is formed in int64 (NumPy's int32 product wraps)
        ("aten::add_.Tensor", (_t(I64_MIN, 5, dtype="int64"), _t(I32_MIN, 7, dtype="int32")), {"alpha": -1}),
        # an int32 result beyond its range wraps, as the in-place int32 result must
        ("aten::add_.Tensor", (_t(2**31 - 1, 3, dtype="int32"), _t(2**40, 1, dtype="int64")), {}),
        ("aten::add.Scalar", (_t(I32_MIN, 3, dtype="int32"), 1, -1), {}),
        ("aten::clamp_max_.Tensor", (_t(15, -17, dtype="int32"), _t(I64_MIN + 15, 4, dtype="int64")), {}),
        ("aten::cumsum_", (_t(2**31 - 1, 1, -1, dtype="int32"), 0), {}),
    ],
)
def test_an_integer_result_is_judged_as_the_kernel_promotes_and_stores_it(qualname, args, kwargs):
    r = _run(qualname, args, kwargs, grad=False)
    assert r.outcome is Outcome.PASS, r.message


class _AddOffByOne(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is aten.add_.Tensor:
            out.add_(1)  # golden computes integers in their own dtype: it shares the bug
        return out


def test_a_wrong_integer_result_is_still_found_by_the_reference():
    with _AddOffByOne():
        r = _run("aten::add_.Tensor", (_t(3, 5, dtype="int32"), _t(2**40, 1, dtype="int64")), {}, grad=False)
    assert r.outcome is Outcome.MISMATCH and "numpy.add" in r.message, r.message


def test_the_repro_script_judges_an_integer_result_as_stored(tmp_path):
    # the script recomputes the reference as conform does: in the promoted integer dtype, wrapped
    # into the result's; run on a right kernel (no fault in its process) it passes
    case = Case("aten::add_.Tensor", (_t(2**31 - 1, 3, dtype="int32"), _t(2**40, 1, dtype="int64")), {}, seed=1)
    op = opdb.lookup("aten::add_.Tensor")
    with _AddOffByOne():
        r = run_case(op, case, CPUBackend(), grad=False)
    assert "numpy.add" in r.message, r.message
    path = tmp_path / "repro.py"
    path.write_text(repro_script(op, case, "cpu", result=r))
    out = run_script(path, timeout=120).stdout
    assert "verdict: pass" in out, out[-800:]


class _HardtanhOff(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 0.5 if func is aten.hardtanh.default else out


def test_the_repro_script_recomputes_a_decomposition_reference(tmp_path):
    # the script evaluated REFERENCE as an expression: 'decomposition' raised NameError, and the
    # native_batch_norm / native_group_norm cells of the seed-23 sweep did not reproduce
    op = opdb.lookup("aten::hardtanh")
    case = Case("aten::hardtanh", (_t(0.25, -3.0, 2.0),), {}, seed=1)
    with _HardtanhOff():
        r = run_case(op, case, CPUBackend(), grad=False)
    assert "torch._decomp" in r.message, r.message
    fault = (
        "import torch\n"
        "from torch.utils._python_dispatch import TorchDispatchMode\n"
        "class M(TorchDispatchMode):\n"
        "    def __torch_dispatch__(self, func, types, args=(), kwargs=None):\n"
        "        out = func(*args, **(kwargs or {}))\n"
        "        return out + 0.5 if func is torch.ops.aten.hardtanh.default else out\n"
        "M().__enter__()\n"
    )
    path = tmp_path / "repro.py"
    script = repro_script(op, case, "cpu", result=r)
    path.write_text(
        script.replace("from __future__ import annotations\n", "from __future__ import annotations\n" + fault, 1)
    )
    out = run_script(path, timeout=120).stdout
    assert "verdict: mismatch" in out, out[-800:]


class _OwnIndicesPastTheInput(CPUBackend):
    """An accelerator whose max_pool2d_with_indices alone counts the padded plane."""

    name = "own-indices-past-the-input"

    def device_context(self):
        return _IndicesPastTheInput()


def test_indices_outside_the_input_that_the_cpu_gives_too_are_a_finding_on_an_accelerator():
    """Parity first: a device that gives the CPU's out-of-range indices shares the CPU kernel's
    bug (a finding about the CPU); a device whose own indices are out of range fails."""
    from tests.cpu_kernels import CPUKernels

    op = opdb.lookup("aten::max_pool2d_with_indices")
    case = Case(op.qualname, (TensorSpec((1, 4, 4), "float32", seed=3), [2, 2]), {}, seed=1)
    with _IndicesPastTheInput():
        shared = run_case(op, case, CPUKernels(), grad=False)
    assert shared.outcome is Outcome.PASS, shared.message
    assert shared.finding and "the CPU's kernel too" in shared.finding["message"]
    own = run_case(op, case, _OwnIndicesPastTheInput(), grad=False)
    assert own.outcome is Outcome.MISMATCH and "index lies outside the input" in own.message


def test_an_op_with_no_reference_gets_its_decomposition_found():
    """soft_margin_loss_backward's kernel is exp(-y x) / (1 + exp(-y x)): NaN at a large margin,
    in golden float64 too; its decomposition (a sigmoid) gives the finite gradient. A found
    decomposition never stands for random ops nor for views of storage."""
    ref = _ref("aten::soft_margin_loss_backward")
    assert ref is not None and ref.expression == references.DECOMPOSITION and ref.discovered
    assert _ref("aten::as_strided_copy") is None and _ref("aten::bernoulli.p") is None
    grad = TensorSpec((), "float32", data=(1.0,))
    r = _run("aten::soft_margin_loss_backward", (grad, _t(-3e4, 0.5, 2.0), _t(1.0, -1.0, 1.0), 1), grad=False)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (torch._decomp) disagrees with the CPU kernel" in r.message


def test_a_found_decomposition_says_nothing_at_non_finite_inputs():
    """Where NaN and infinities land is each formula's own: the kernel's NaN at -3e4 is not
    judged in a case that holds an infinity too."""
    grad = TensorSpec((), "float32", data=(1.0,))
    r = _run("aten::soft_margin_loss_backward", (grad, _t(-3e4, INF, 2.0), _t(1.0, -1.0, 1.0), 1), grad=False)
    assert r.outcome is Outcome.PASS, r.message
    assert not (r.finding and "torch._decomp" in r.finding.get("message", "")), r.finding


_INF, _NAN = float("inf"), float("nan")


class _PartwiseAdd(TorchDispatchMode):
    """Complex add computed part by part, as C99 and NumPy define it (torch's kernel forms
    alpha * other first, so an infinite part meets alpha's zero imaginary part: NaN)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is aten.add.Tensor and args[0].is_complex():
            a, b = args[0], args[1]
            return torch.complex(a.real + b.real, a.imag + b.imag)
        return func(*args, **(kwargs or {}))


class _InfinityAsNaN(TorchDispatchMode):
    """A kernel that gives nan+nanj wherever the number should be an infinity."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is self.fn and out.is_complex():
            out = torch.where(out.isinf(), torch.full_like(out, complex(_NAN, _NAN)), out)
        return out


def _complex_case(qualname, *columns):
    specs = tuple(TensorSpec((len(c),), "complex64", data=tuple(c)) for c in columns)
    return Case(qualname, specs, {}, seed=1)


def test_a_complex_infinity_is_told_from_a_nan_by_an_elementwise_reference():
    """C99 (Annex G.3): a number with an infinite part is an infinity, even beside a NaN part;
    (nan+infj) + (1+0j) is one. A kernel giving nan+nanj there is wrong, and golden shares it."""
    op = opdb.lookup("aten::add.Tensor")
    case = _complex_case(op.qualname, (complex(_NAN, _INF), 1 + 1j), (1 + 0j, 2 - 1j))
    with _PartwiseAdd():
        assert run_case(op, case, CPUBackend()).outcome is Outcome.PASS
    with _PartwiseAdd(), _InfinityAsNaN(aten.add.Tensor):
        r = run_case(op, case, CPUBackend())
    assert r.outcome is Outcome.MISMATCH and "(nan+nanj) vs (nan+infj)" in r.message, r.message


def test_a_product_of_many_complex_numbers_is_not_classed_by_c99():
    """prod of complex infinities is a NaN or an infinity by the order of its products (naive
    complex multiplication, in NumPy as in torch): no alarm where only the class differs."""
    op = opdb.lookup("aten::prod")
    case = _complex_case(op.qualname, (complex(_INF, 0),))  # NumPy: inf+0j, an infinity
    with _InfinityAsNaN(aten.prod.default):
        assert run_case(op, case, CPUBackend(), grad=False).outcome is Outcome.PASS


@pytest.mark.parametrize(
    "qualname, columns",
    [
        # NumPy: 1 / 0 is nan+nanj; C99 makes it an infinity, as torch's inf+nanj is
        ("aten::reciprocal", ((0j, 1 + 1j),)),
        # cpow's special values are the implementation's; 0 ** -2 is an infinity, NumPy's NaN
        ("aten::pow.Tensor_Tensor", ((complex(_INF, 0), 0j, 2j), (complex(0, _NAN), -2 + 0j, 1 + 0j))),
    ],
)
def test_complex_special_values_numpy_gives_otherwise_raise_no_alarm(qualname, columns):
    op = opdb.lookup(qualname)
    r = run_case(op, _complex_case(qualname, *columns), CPUBackend())
    assert r.outcome is Outcome.PASS, r.message


def test_complex_zero_to_the_zero_is_one():
    op = opdb.lookup("aten::pow.Tensor_Tensor")
    case = _complex_case(op.qualname, (0j, 2 + 1j), (0j, 1 - 1j))
    r = run_case(op, case, CPUBackend())
    got = torch.pow(torch.zeros(1, dtype=torch.complex64), torch.zeros(1, dtype=torch.complex64))
    if bool(got.isnan().any()):  # torch 2.13's CPU kernel gives nan+nanj (a published bug)
        assert r.outcome is Outcome.MISMATCH and "(nan+nanj) vs (1+0j)" in r.message, r.message
    else:
        assert r.outcome is Outcome.PASS, r.message


def test_the_repro_script_tells_a_complex_infinity_from_a_nan(tmp_path):
    op = opdb.lookup("aten::add.Tensor")
    case = _complex_case(op.qualname, (complex(_NAN, _INF), 1 + 1j), (1 + 0j, 2 - 1j))
    with _PartwiseAdd(), _InfinityAsNaN(aten.add.Tensor):
        r = run_case(op, case, CPUBackend())
    script = repro_script(op, case, "cpu", result=r)
    assert "REFERENCE_C99 = True" in script
    # the same faulty kernel in the script's fresh process: part by part, then NaN for an infinity
    body = (
        "        if func is torch.ops.aten.add.Tensor and args[0].is_complex():\n"
        "            a, b = args[0], args[1]\n"
        "            out = torch.complex(a.real + b.real, a.imag + b.imag)\n"
        "            return torch.where(out.isinf(), torch.full_like(out, complex('nan+nanj')), out)\n"
        "        return func(*args, **(kwargs or {}))\n"
    )
    out = _script_with_fault(script, body, tmp_path)
    assert "verdict: mismatch" in out, out[-800:]

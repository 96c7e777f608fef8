"""run_case: each outcome from a backend that earns it, and no false alarms on a healthy CPU."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend, MetaBackend
from conform.outcomes import Outcome
from conform.report.repro import _expr
from conform.run.execute import CaseResult, run_case
from generators.case import Case
from generators.case import TensorSpec as T
from tests.faulty import BACKENDS, FaultyBackend

O = Outcome


def f32(*shape, **kw):
    return T(tuple(shape), kw.pop("dtype", "float32"), seed=kw.pop("seed", len(shape) + sum(shape)), **kw)


# ~30 ops x dtypes x layouts a correct CPU must pass against float64 golden, forward and backward
CLEAN = [
    ("aten::add.Tensor", (f32(3, 4, seed=1), f32(4, seed=2)), {"alpha": 2}),
    ("aten::add.Tensor", (f32(3, 4, dtype="float16", seed=1), f32(3, 4, dtype="float16", seed=2)), {}),
    (
        "aten::add.Tensor",
        (f32(3, 4, dtype="bfloat16", seed=1, layout="transposed"), f32(3, 4, dtype="bfloat16", seed=2)),
        {},
    ),
    ("aten::add.Tensor", (f32(3, 4, dtype="int32", seed=1), f32(3, 4, dtype="int64", seed=2)), {}),
    ("aten::sub.Tensor", (f32(5, 2, seed=3, layout="sliced"), f32(5, 2, seed=4)), {}),
    ("aten::mul.Tensor", (f32(3, 4, dtype="complex64", seed=1), f32(3, 4, dtype="complex64", seed=2)), {}),
    ("aten::div.Tensor", (f32(6, seed=1), f32(6, seed=2, values="nonzero")), {}),
    (
        "aten::div.Tensor_mode",
        (f32(8, dtype="int32", seed=2), f32(8, dtype="int32", seed=3, values="positive")),
        {"rounding_mode": "floor"},
    ),
    ("aten::exp", (f32(4, 5, seed=5, values="special"),), {}),
    ("aten::log", (f32(4, 5, seed=6, values="positive"),), {}),
    ("aten::sqrt", (f32(4, 5, dtype="float16", seed=7, values="nonnegative"),), {}),
    ("aten::sin", (f32(2, 3, 4, seed=8, layout="offset"),), {}),
    ("aten::tanh", (f32(2, 3, 4, dtype="bfloat16", seed=9),), {}),
    ("aten::sigmoid", (f32(7, seed=10),), {}),
    ("aten::relu", (f32(7, seed=11),), {}),
    ("aten::neg", (f32(4, 4, seed=5, values="special"),), {}),
    ("aten::abs", (f32(4, 4, dtype="int16", seed=12),), {}),
    ("aten::maximum", (f32(4, 6, seed=8, values="special"), f32(4, 6, seed=4)), {}),
    ("aten::where.self", (f32(3, 3, dtype="bool", seed=1), f32(3, 3, seed=2), f32(3, 3, seed=3)), {}),
    ("aten::sum", (f32(40, 40, seed=1),), {}),
    ("aten::sum.dim_IntList", (f32(3, 5, dtype="float16", seed=1), [1], True), {}),
    ("aten::sum", (f32(0, 3),), {}),
    ("aten::mean.dim", (f32(6, 7, seed=2), [0]), {}),
    ("aten::var.correction", (f32(6, 7, seed=3), [1]), {"correction": 1}),
    ("aten::prod", (f32(6, seed=4, values="small"),), {}),
    ("aten::amax", (f32(4, 5, seed=5), [1]), {}),
    ("aten::argmax", (f32(5, 6, seed=1), 1), {}),
    ("aten::max.dim", (f32(5, 6, dtype="int32", seed=1), 1), {}),
    ("aten::sort", (f32(5, 6, seed=1),), {}),
    ("aten::topk", (f32(5, 6, dtype="int64", seed=2), 3), {}),
    ("aten::cumsum", (f32(5, 6, dtype="float16", seed=1), 1), {}),
    ("aten::mm", (f32(30, 40, seed=1), f32(40, 5, seed=2)), {}),
    ("aten::mm", (f32(30, 40, dtype="bfloat16", seed=1), f32(40, 5, dtype="bfloat16", seed=2)), {}),
    ("aten::bmm", (f32(2, 3, 4, seed=1), f32(2, 4, 5, seed=2, layout="transposed")), {}),
    ("aten::_softmax", (f32(5, 6, seed=1), 1, False), {}),
    ("aten::_log_softmax", (f32(5, 6, seed=2), 0, False), {}),
    ("aten::linalg_vector_norm", (f32(64, dtype="float16", low=-300, high=300, seed=1),), {}),
    ("aten::index_select", (f32(5, 3, seed=1), 0, T((4,), "int64", values="index", high=5, seed=2)), {}),
    ("aten::gather", (f32(4, 5, seed=1), 1, T((4, 2), "int64", values="index", high=5, seed=2)), {}),
    ("aten::cat", ([f32(2, 3, seed=1), f32(1, 3, seed=2)],), {}),
    ("aten::permute", (f32(2, 3, 4, seed=1), [2, 0, 1]), {}),
    ("aten::clamp", (f32(3, 4, seed=1),), {"min": -1.0, "max": 1.0}),
    ("aten::bitwise_and.Tensor", (f32(5, 6, dtype="int32", seed=1), f32(5, 6, dtype="int32", seed=2)), {}),
    ("aten::eq.Tensor", (f32(5, 6, dtype="int8", seed=1), f32(5, 6, dtype="int8", seed=2)), {}),
    ("aten::lt.Tensor", (f32(5, 6, dtype="float16", seed=1), f32(5, 6, dtype="float16", seed=2)), {}),
    ("aten::add_.Tensor", (f32(3, 4, seed=1, layout="sliced"), f32(3, 4, seed=2)), {}),
    ("aten::mul_.Tensor", (f32(3, 4, seed=1, layout="transposed"), f32(4, seed=2)), {}),
    ("aten::add.out", (f32(3, 4, seed=1), f32(3, 4, seed=2)), {"out": T((0,), "float32")}),
    ("aten::sort.values", (f32(4, 5, seed=3),), {"values": T((4, 5), "float32"), "indices": T((4, 5), "int64")}),
    ("aten::rand_like", (f32(32, 32),), {}),
    ("aten::empty_like", (f32(3, 4),), {}),
]


@pytest.mark.parametrize("op_name,args,kwargs", CLEAN, ids=[f"{i}-{c[0].split('::')[1]}" for i, c in enumerate(CLEAN)])
def test_healthy_cpu_against_golden_raises_no_false_alarm(op_name, args, kwargs):
    case = Case(op_name, args, kwargs, seed=3)
    result = run_case(opdb.lookup(op_name), case, CPUBackend())
    assert result.outcome == O.PASS, (
        f"{case.describe()}: {result.outcome} ({result.phase}) {result.message}\n{result.traceback}"
    )
    assert not result.invalid


def test_clean_set_covers_about_thirty_distinct_ops():
    assert len({c[0] for c in CLEAN}) >= 30


def _run(bug: str, op_name: str, case: Case) -> CaseResult:
    return run_case(opdb.lookup(op_name), case, BACKENDS[bug]())


def test_wrong_value_is_a_mismatch_with_measured_errors_and_golden_attribution():
    r = _run(
        "alpha_ignored",
        "aten::add.Tensor",
        Case("aten::add.Tensor", (f32(3, 4, seed=1), f32(3, 4, seed=2)), {"alpha": 2}),
    )
    assert r.outcome == O.MISMATCH and r.phase == "forward"
    assert r.message.startswith("Mismatched elements: ")
    assert "allowed" in r.message and "[output]" in r.message
    assert r.max_abs_err > 0.1 and r.max_rel_err > 0 and r.max_ulp_err > 1
    assert (r.rtol, r.atol) == (1.3e-6, 1e-5)
    assert r.device_golden_err > 0.1 and r.ref_golden_err < 1e-5
    assert "golden float64" in r.message


def test_wrong_dtype_is_a_meta_mismatch():
    r = _run("wrong_dtype_promotion", "aten::add.Tensor", Case("aten::add.Tensor", (f32(3, dtype="int32"), f32(3))))
    assert r.outcome == O.META_MISMATCH
    assert "dtype int32 vs float32 expected" in r.message


def test_not_implemented_error_is_not_implemented():
    r = _run("no_kernel", "aten::erfinv", Case("aten::erfinv", (f32(3, values="open_unit"),)))
    assert r.outcome == O.NOT_IMPLEMENTED and r.phase == "forward"
    assert "NotImplementedError" in r.message and "NotImplementedError" in r.traceback


def test_device_that_fails_to_raise_is_missing_error():
    case = Case("aten::index_select", (f32(5, 3), 0, T((4,), "int64", values="index", low=3, high=9, seed=2)))
    r = _run("missing_bounds_check", "aten::index_select", case)
    assert r.outcome == O.MISSING_ERROR
    assert "IndexError" in r.message


def test_both_sides_rejecting_the_input_is_an_invalid_case_not_a_finding():
    case = Case("aten::index_select", (f32(5, 3), 0, T((4,), "int64", values="index", low=3, high=9, seed=2)))
    r = run_case(opdb.lookup("aten::index_select"), case, CPUBackend())
    assert r.invalid and r.outcome == O.PASS


def test_float64_rejection_is_unsupported_dtype():
    r = _run(
        "float64_rejected",
        "aten::add.Tensor",
        Case("aten::add.Tensor", (f32(3, dtype="float64"), f32(3, dtype="float64"))),
    )
    assert r.outcome == O.UNSUPPORTED_DTYPE
    assert "float64" in r.message


def test_wrong_gradient_is_grad_mismatch_and_names_the_input():
    r = _run("grad_wrong", "aten::sigmoid", Case("aten::sigmoid", (f32(3, 4),)))
    assert r.outcome == O.GRAD_MISMATCH and r.phase == "backward"
    assert "grad[self]" in r.message


def test_gradient_is_not_checked_when_grad_is_off():
    r = run_case(
        opdb.lookup("aten::sigmoid"), Case("aten::sigmoid", (f32(3, 4),)), BACKENDS["grad_wrong"](), grad=False
    )
    assert r.outcome == O.PASS


def test_missing_backward_kernel_is_not_implemented_in_backward():
    r = _run("backward_not_implemented", "aten::tanh", Case("aten::tanh", (f32(3, 4),)))
    assert (r.outcome, r.phase) == (O.NOT_IMPLEMENTED, "backward")


def test_other_device_exception_is_device_error_with_its_first_line():
    case = Case("aten::cat", ([f32(2, 3), f32(1, 3), f32(2, 3)],))
    r = _run("device_error", "aten::cat", case)
    assert r.outcome == O.DEVICE_ERROR
    assert r.message == "RuntimeError: MPSGraph: failed to encode kernel: too many input tensors (3 > 2)"


def test_argmax_ties_are_compared_exactly_since_the_first_occurrence_is_documented():
    ties = Case("aten::argmax", (T((4, 6), "float32", low=0, high=0.0), 1))  # all zeros: every index is a tie
    r = run_case(opdb.lookup("aten::argmax"), ties, BACKENDS["ties_last_index"]())
    assert r.outcome == O.MISMATCH and "exact comparison" in r.message
    assert (
        run_case(opdb.lookup("aten::argmax"), ties, BACKENDS["argmax_wrong"]()).outcome == O.PASS
    )  # argmin of zeros: the first too
    distinct = Case("aten::argmax", (f32(4, 6), 1))
    assert run_case(opdb.lookup("aten::argmax"), distinct, BACKENDS["argmax_wrong"]()).outcome == O.MISMATCH


def test_topk_ties_accept_any_tied_index():
    op = opdb.lookup("aten::topk")
    ties = Case("aten::topk", (T((4, 6), "float32", low=1, high=1.0), 3))  # all ones: every index is a tie
    # forward only: the gradient lands on the chosen indices, which is the oracle's business
    assert run_case(op, ties, BACKENDS["topk_last_tie"](), grad=False).outcome == O.PASS
    distinct = Case("aten::topk", (f32(4, 6, seed=3), 3))
    assert run_case(op, distinct, BACKENDS["topk_last_tie"]()).outcome == O.PASS


class _LastIndexInOuts(TorchDispatchMode):
    """median.dim_values that writes each row's last index into its indices out: right where the
    whole row ties (the documentation does not promise the first), wrong elsewhere."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func is torch.ops.aten.median.dim_values:
            kwargs["indices"].fill_(args[0].shape[args[1]] - 1)
        return result


def test_median_out_ties_accept_any_tied_index_in_the_outs_too():
    class LastTie(CPUBackend):
        name = "median-last-tie"

        def device_context(self):
            return _LastIndexInOuts()

    op = opdb.lookup("aten::median.dim_values")
    outs = {"values": T((0,), "float32", seed=0), "indices": T((0,), "int64", seed=0)}
    ties = Case(op.qualname, (T((4, 6), "float32", low=1, high=1.0), 1, False), dict(outs))
    assert run_case(op, ties, LastTie(), grad=False).outcome == O.PASS
    # an index that selects another value is still wrong
    wrong = Case(op.qualname, (f32(4, 6, seed=3), 1, False), dict(outs))
    r = run_case(op, wrong, LastTie(), grad=False)
    assert r.outcome == O.MISMATCH and "out[1] (selected values)" in r.message, r.message


def test_sign_of_zero_is_checked_only_when_the_op_asks():
    case = Case("aten::neg", (f32(4, 4, seed=5, values="special"),))
    op = opdb.lookup("aten::neg")
    assert op.rules.hints.get("sign_of_zero") is True  # opdb/rules/signs.toml asks for it
    lax = dataclasses.replace(op, rules=dataclasses.replace(op.rules, hints={}))
    assert run_case(lax, case, BACKENDS["sign_of_zero"]()).outcome == O.PASS
    strict = dataclasses.replace(op, rules=dataclasses.replace(op.rules, hints={"sign_of_zero": True}))
    r = run_case(strict, case, BACKENDS["sign_of_zero"]())
    assert r.outcome == O.MISMATCH and "sign of zero" in r.message


def test_seeded_random_ops_compare_statistics_not_values():
    op = opdb.lookup("aten::rand_like")
    case = Case("aten::rand_like", (f32(32, 32),), seed=7)

    # another device's generator: the same distribution from a different random stream
    assert run_case(op, case, BACKENDS["other_random_stream"]()).outcome == O.PASS
    r = run_case(op, case, BACKENDS["none"]())
    assert r.outcome == O.PASS
    assert run_case(op, case, BACKENDS["wrong_distribution"]()).outcome == O.MISMATCH


def test_meta_backend_compares_metadata_only():
    """Shape and dtype are compared on meta; values never (a meta tensor has none to compare)."""
    from tests.faulty import _FaultMode

    op, case = opdb.lookup("aten::mm"), Case("aten::mm", (f32(3, 4), f32(4, 5)))
    r = run_case(op, case, MetaBackend())
    assert r.outcome == O.PASS, r.message

    class NaNValues(MetaBackend):  # every value read back is NaN: compared, it would fail
        def to_cpu(self, t):
            return super().to_cpu(t).fill_(float("nan"))

    class Transposed(MetaBackend):  # mm's result has its dimensions the wrong way round
        def device_context(self):
            return _FaultMode({torch.ops.aten.mm.default}, lambda func, args, kwargs: func(*args, **kwargs).t())

    class Widened(MetaBackend):  # mm computes in float64 and forgets to cast back
        def device_context(self):
            return _FaultMode({torch.ops.aten.mm.default}, lambda func, args, kwargs: func(*args, **kwargs).double())

    r = run_case(op, case, NaNValues())
    assert r.outcome == O.PASS, r.message
    r = run_case(op, case, Transposed())
    assert r.outcome == O.META_MISMATCH and "shape [5, 3] vs [3, 5]" in r.message, r.message
    r = run_case(op, case, Widened())
    assert r.outcome == O.META_MISMATCH and "dtype float64 vs float32" in r.message, r.message


def test_run_case_never_raises_on_a_broken_backend():
    class Broken(CPUBackend):
        name = "broken"

        def to_cpu(self, t):
            raise MemoryError("out of device memory while copying back")

    r = run_case(opdb.lookup("aten::add.Tensor"), Case("aten::add.Tensor", (f32(3), f32(3))), Broken())
    assert r.outcome == O.DEVICE_ERROR
    assert "MemoryError" in r.message


def test_kernel_gap_on_the_cpu_reference_falls_back_to_golden_on_other_devices():
    # a device (not the CPU) that has a kernel the CPU lacks is compared with golden float64
    class PretendGPU(CPUBackend):
        name = "pretend"
        device = torch.device("meta")  # not "cpu": the CPU is then only the reference

        def to_device(self, t):
            return t.clone()

    from conform.run import execute

    r = execute.run_case(opdb.lookup("aten::add.Tensor"), Case("aten::add.Tensor", (f32(3), f32(3))), PretendGPU())
    assert r.outcome == O.PASS, r.message


# -- reproduction scripts ------------------------------------------------------------------


def test_repro_script_rebuilds_exactly_the_case_tensors_with_torch_only():
    from conform.report.repro import repro_script

    specs = [
        T((3, 4), "float32", "transposed", values="special", seed=5),
        T((2, 3), "float16", "sliced", seed=1),
        T((2, 3, 4), "complex64", "offset", seed=2),
        T((1, 4), "int32", "expanded", values="positive", seed=3),
        T((5,), "int64", values="index", low=2, high=7, seed=4),
        T((2, 3, 4, 5), "bfloat16", "channels_last", seed=6),
        T((3,), "bool", seed=7),
        T((4,), "int16", values="nonzero", seed=8),  # both signs, no zero
        T((2, 3, 3), "float64", "transposed", values="spd", seed=9),  # the logical matrices are SPD
        T((3, 3), "complex128", values="invertible", seed=10),
        T((2, 4), "quint8", scale=0.05, zero_point=3, seed=11),
        T((3, 2, 2, 2), "qint8", "channels_last", scale=0.1, axis=0, seed=12),
        T((2, 2), "float32", "transposed", data=(1.0, float("nan"), -float("inf"), -0.0)),
        T((3, 3), "float32", "sparse_coo", seed=13),
    ]
    case = Case("aten::cat", (specs[:2],), {"dim": 0}, seed=1)
    script = repro_script(opdb.lookup("aten::cat"), case, "mps")
    assert "import generators" not in script and "import conform" not in script
    namespace: dict = {}
    exec(compile(script.split("\ntry:\n", 1)[0], "<repro>", "exec"), namespace)  # definitions only
    for spec in specs:
        # the script's own call text for this spec, evaluated in the script's namespace
        built = eval(_expr(spec, device_var="'cpu'"), namespace)
        want = spec.materialize(lambda t: t.clone())
        assert built.shape == want.shape and built.dtype == want.dtype and built.layout == want.layout, spec
        if want.layout == torch.strided:
            assert built.stride() == want.stride(), spec
        if want.is_quantized:
            assert torch.equal(built.int_repr(), want.int_repr()), spec
            assert torch.equal(built.dequantize(), want.dequantize()), spec
        else:
            assert torch.equal(built.to_dense().nan_to_num(), want.to_dense().nan_to_num()), spec
            assert torch.equal(built.to_dense().isnan(), want.to_dense().isnan()), spec


def test_repro_script_rebuilds_dict_and_non_finite_arguments():
    arg = {"dict": [["a", float("nan")], [2, complex(float("inf"), 1.0)], ["t", T((2,), "float32", seed=1)]]}
    built = eval(_expr(arg, device_var="'cpu'"), {"make": lambda *a, **k: ("make", a, k), "torch": torch})
    assert set(built) == {"a", 2, "t"}
    assert built["a"] != built["a"] and built[2] == complex(float("inf"), 1.0)
    assert built["t"][0] == "make" and built["t"][2]["seed"] == 1


def test_repro_script_of_a_quantized_case_runs(tmp_path):
    from conform.report.repro import repro_script
    from script_runner import run_script

    case = Case("aten::int_repr", (T((3, 4), "qint8", "transposed", scale=0.05, zero_point=2, seed=3),))
    path = tmp_path / "repro.py"
    path.write_text(repro_script(opdb.lookup("aten::int_repr"), case, "cpu"))
    done = run_script(path, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "torch.int8 [3, 4]" in done.stdout and "output: 0 / 12 elements differ" in done.stdout


def test_repro_script_runs_and_reports_both_sides(tmp_path):
    from conform.report.repro import repro_script
    from script_runner import run_script

    case = Case("aten::add.Tensor", (f32(3, 4, seed=1), f32(4, seed=2)), {"alpha": 2})
    path = tmp_path / "repro.py"
    path.write_text(repro_script(opdb.lookup("aten::add.Tensor"), case, "cpu"))
    done = run_script(path, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "output: 0 / 12 elements differ" in done.stdout


# -- the CPU against golden float64: what golden can and cannot be the expectation of -------


@pytest.mark.parametrize(
    "op_name,args",
    [
        ("aten::element_size", (f32(3, dtype="float16"),)),
        ("aten::promote_types", ({"dtype": "float16"}, {"dtype": "int32"})),
        ("aten::result_type.Tensor", (f32(3, dtype="bfloat16"), f32(3, dtype="int32"))),
        ("aten::result_type.Scalar", (f32(3, dtype="float32"), 2.5)),
        ("aten::str", (T((), "float32", seed=1),)),
    ],
)
def test_metadata_outputs_are_compared_with_the_reference_not_golden(op_name, args):
    # element sizes, ScalarTypes and strings are what the float64 rewrite changes by construction
    r = run_case(opdb.lookup(op_name), Case(op_name, args), CPUBackend())
    assert r.outcome == O.PASS and not r.invalid, r.message


def test_scalar_rounded_to_the_tensor_dtype_conforms():
    # TensorIterator casts a wrapped Python number to the tensor's dtype: bfloat16(1.562) = 1.5625
    ones = T((40,), "bfloat16", low=1.5625, high=1.5625)
    r = run_case(opdb.lookup("aten::ne.Scalar"), Case("aten::ne.Scalar", (ones, 1.562)), CPUBackend())
    assert r.outcome == O.PASS, r.message
    # softshrink reads lambda in float32: golden with lambda as given is its expectation
    x = T((40,), "bfloat16", low=1.5625, high=1.5625)
    r = run_case(opdb.lookup("aten::softshrink"), Case("aten::softshrink", (x, 1.562)), CPUBackend())
    assert r.outcome == O.PASS, r.message


def _flipped_ne():
    from tests.faulty import FaultyBackend, aten

    body = {
        "name": "faulty-ne-flipped",
        "targets": frozenset({aten.ne.Scalar}),
        "bug": staticmethod(lambda f, a, k: ~f(*a, **k)),
    }
    return type("NeFlipped", (FaultyBackend,), body)()


def test_bool_output_mismatch_is_attributed_against_golden():
    x = T((40,), "bfloat16", seed=3)
    r = run_case(opdb.lookup("aten::ne.Scalar"), Case("aten::ne.Scalar", (x, 1.562)), _flipped_ne())
    assert r.outcome == O.MISMATCH
    assert (r.device_golden_err, r.ref_golden_err) == (1.0, 0.0)
    assert r.message.endswith("; device error 1 vs CPU 0 (golden float64)"), r.message


def test_nan_position_mismatch_is_attributed_as_an_infinite_error():
    case = Case("aten::maximum", (T((4, 6), "float32", values="special", seed=8), T((4, 6), "float32", seed=4)))
    r = run_case(opdb.lookup("aten::maximum"), case, BACKENDS["nan_not_propagated"]())
    assert r.outcome == O.MISMATCH and "NaN mismatch" in r.message
    assert r.device_golden_err == float("inf") and r.ref_golden_err == 0.0
    assert "device error inf vs CPU 0 (golden float64)" in r.message


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "complex64"])
def test_dtype_extremes_are_expected_in_the_case_dtype(dtype):
    # nan_to_num's default replacement for inf is the dtype's largest value: float64's in golden
    case = Case("aten::nan_to_num", (T((4, 6), dtype, values="special", seed=8),))
    r = run_case(opdb.lookup("aten::nan_to_num"), case, CPUBackend())
    assert r.outcome == O.PASS, r.message
    # and a kernel that saturates a real overflow is still wrong (exp(90) is inf in float32)
    over = Case("aten::exp", (T((8,), "float32", low=80, high=100, seed=1),))
    assert run_case(opdb.lookup("aten::exp"), over, BACKENDS["inf_clamped"]()).outcome == O.MISMATCH


def test_gradient_of_a_higher_precision_operand_has_the_outputs_precision():
    # float16[512] * float32 0-d tensor is float16; the 0-d operand's gradient is a float16 sum
    # of 512 products cast to float32: as precise as float16, whatever its dtype says
    case = Case("aten::mul.Tensor", (T((512,), "float16", seed=0), T((), "float32", seed=100)), {}, seed=0)
    r = run_case(opdb.lookup("aten::mul.Tensor"), case, CPUBackend())
    assert r.outcome == O.PASS, r.message


def test_grad_mismatch_is_attributed_against_golden():
    r = _run("grad_wrong", "aten::sigmoid", Case("aten::sigmoid", (f32(3, 4),)))
    assert r.outcome == O.GRAD_MISMATCH
    assert r.device_golden_err > 1e-3 and r.ref_golden_err < 1e-5
    assert "(golden float64)" in r.message


@pytest.mark.parametrize(
    "op_name,args",
    [
        # every output sums all 1107 inputs: rounding grows with n, as for a reduction
        ("aten::fft_rfft", (T((1107,), "float32", seed=3),)),
        ("aten::fft_fftn", (T((24, 26), "complex64", seed=4),)),
        # a NaN among the inputs: ifft2 gives (nan+nanj) in float32 and (nan+0j) in float64
        ("aten::fft_ifft2", (T((1, 17), "float32", values="special", seed=0),)),
    ],
)
def test_fft_with_many_terms_or_special_inputs_is_no_false_alarm(op_name, args):
    r = run_case(opdb.lookup(op_name), Case(op_name, args), CPUBackend())
    assert r.outcome == O.PASS, r.message


def test_wrong_fft_is_still_a_mismatch():
    from tests.faulty import FaultyBackend, aten

    def conj_twiddles(func, args, kwargs):  # a sign error: the inverse transform's twiddles
        return func(*args, **kwargs).conj()

    body = {"name": "faulty-fft", "targets": frozenset({aten._fft_r2c.default}), "bug": staticmethod(conj_twiddles)}
    backend = type("FftConj", (FaultyBackend,), body)()
    r = run_case(opdb.lookup("aten::fft_rfft"), Case("aten::fft_rfft", (T((1107,), "float32", seed=3),)), backend)
    assert r.outcome == O.MISMATCH and "(golden float64)" in r.message


# cases the CPU-vs-golden sweep flagged, where the CPU kernel is correct but by its algorithm
# less precise than the per-dtype table: opdb/rules/tolerances.toml (with reasons), the complex
# modulus rule of compare, and mixed-precision inputs
SWEEP_CASES = [
    ("aten::hamming_window", (2,), {"dtype": {"dtype": "bfloat16"}}),
    ("aten::blackman_window.periodic", (3, True), {"dtype": {"dtype": "float16"}}),
    ("aten::_euclidean_dist", (T((1, 1), "bfloat16", seed=0), T((1, 1), "bfloat16", seed=0)), {}),
    ("aten::ldexp.Tensor", (T((), "float32", seed=0), T((), "float16", seed=0)), {}),
    ("aten::pow.Tensor_Tensor", (T((35,), "complex64", seed=0), T((35,), "complex64", seed=1)), {}),
    ("aten::sinc", (T((29,), "complex64", seed=0),), {}),
]


@pytest.mark.parametrize("op_name,args,kwargs", SWEEP_CASES, ids=[c[0].split("::")[1] for c in SWEEP_CASES])
def test_sweep_flagged_cases_of_less_precise_algorithms_pass(op_name, args, kwargs):
    r = run_case(opdb.lookup(op_name), Case(op_name, args, kwargs), CPUBackend())
    assert r.outcome == O.PASS, r.message


def test_the_vectorised_half_trunc_division_is_found():
    """Once passed by a one-unit bfloat16 tolerance: element 184 of this case is 22 from the
    vectorised kernel but 21 alone, in float32 and in float64 (-2.25 / -0.1025390625): the
    quotient is rounded to bfloat16 before truncation, pytorch#193754's class. Division with a
    rounding mode is exactly determined (opdb/rules/exactness.toml)."""
    case = Case(
        "aten::divide.Tensor_mode",
        (
            T((227,), "bfloat16", values="nonzero", seed=1),
            T((227,), "bfloat16", layout="sliced", values="nonzero", seed=0),
        ),
        {"rounding_mode": "trunc"},
        seed=10,
    )
    r = run_case(opdb.lookup("aten::divide.Tensor_mode"), case, CPUBackend())
    assert r.outcome == O.MISMATCH and "22 vs 21" in r.message, r.message


def test_tolerance_rules_say_why_and_stay_far_below_a_wrong_result():
    for name in (
        "aten::hamming_window",
        "aten::_euclidean_dist",
        "aten::pow.Tensor_Tensor",
    ):
        rules = opdb.lookup(name).rules
        assert rules.tolerances and len(rules.tolerance_reason) > 40
    # floor instead of trunc is off by one on every negative non-integer quotient: division with
    # a rounding mode is compared exactly, so this float32 case must be found
    from tests.faulty import FaultyBackend, aten

    def floor_for_trunc(func, args, kwargs):
        return func(*args, **{**kwargs, "rounding_mode": "floor"})

    body = {"name": "faulty-trunc", "targets": frozenset({aten.div.Tensor_mode}), "bug": staticmethod(floor_for_trunc)}
    backend = type("TruncFloors", (FaultyBackend,), body)()
    case = Case(
        "aten::div.Tensor_mode", (f32(20, seed=1), f32(20, seed=2, values="nonzero")), {"rounding_mode": "trunc"}
    )
    assert run_case(opdb.lookup("aten::div.Tensor_mode"), case, backend).outcome == O.MISMATCH


@pytest.mark.parametrize(
    "op_name,args",
    [
        ("aten::_no_grad_uniform_", (f32(64, seed=1), -1.0, 1.0)),
        ("aten::_no_grad_normal_", (f32(64, seed=1), 0.0, 1.0)),
    ],
)
def test_untagged_random_initialisers_compare_statistics(op_name, args):
    assert opdb.lookup(op_name).rules.nondeterminism == "seeded"
    r = run_case(opdb.lookup(op_name), Case(op_name, args), CPUBackend())
    assert r.outcome == O.PASS, r.message


def test_a_case_whose_output_explodes_is_declined_not_compared():
    # diagflat squares its input's size: the input cap alone let one case take a minute
    from conform.run.execute import MAX_OUTPUT_NUMEL

    op = opdb.lookup("aten::diagflat")
    small = run_case(op, Case("aten::diagflat", (T((8,), "float32", seed=1),)), CPUBackend())
    assert small.outcome == Outcome.PASS and not small.invalid
    n = int(MAX_OUTPUT_NUMEL**0.5) + 1
    big = run_case(op, Case("aten::diagflat", (T((n,), "float32", seed=1),)), CPUBackend())
    assert big.invalid and f"{n * n} elements" in big.message


def test_a_case_with_thousands_of_output_tensors_is_declined():
    from conform.run.execute import MAX_OUTPUT_TENSORS

    op = opdb.lookup("aten::unbind.int")
    big = run_case(op, Case("aten::unbind.int", (T((MAX_OUTPUT_TENSORS + 1, 2), "float32", seed=1), 0)), CPUBackend())
    assert big.invalid and f"{MAX_OUTPUT_TENSORS + 1} tensors" in big.message
    small = run_case(op, Case("aten::unbind.int", (T((4, 2), "float32", seed=1), 0)), CPUBackend())
    assert small.outcome == Outcome.PASS and not small.invalid


# -- out= of a dtype the result cannot be safely cast into -------------------------------------


def _float_add_out():
    return Case("aten::add.out", (f32(3, 4, seed=1), f32(3, 4, seed=2)), {"out": f32(3, 4, seed=3)})


def test_a_device_that_writes_an_unsafe_out_dtype_is_caught_by_the_out_variants():
    from conform.run.execute import run_out_variants

    op = opdb.lookup("aten::add.out")
    checked, failure = run_out_variants(op, _float_add_out(), BACKENDS["out_unsafe_cast"]())
    assert checked and failure is not None and failure.outcome == O.MISSING_ERROR, failure
    assert "[out= unsafe dtype]" in failure.message
    assert failure.variant_case.kwargs["out"].dtype == "int64"
    # the healthy device refuses it as the CPU does, and so does the plain CPU
    for healthy in (BACKENDS["none"](), CPUBackend()):
        assert run_out_variants(op, _float_add_out(), healthy)[1] is None


class _WritesUnsafeCasts(TorchDispatchMode):
    """add.out that writes a float result into an integer out, truncated (cumsum.out's way)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = kwargs.get("out")
        if func is torch.ops.aten.add.out and out is not None and not out.dtype.is_floating_point:
            return out.copy_(torch.ops.aten.add.Tensor(*args, **{k: v for k, v in kwargs.items() if k != "out"}))
        return func(*args, **kwargs)


def test_the_plain_cpu_writing_an_unsafe_out_cast_is_a_missing_error_its_script_shows():
    """On the plain CPU the out= contract judges alone, inside run_case (what a repro script calls)."""
    from conform.run.execute import run_out_variants

    op = opdb.lookup("aten::add.out")
    with _WritesUnsafeCasts():
        checked, failure = run_out_variants(op, _float_add_out(), CPUBackend())
        assert failure is not None and failure.outcome == O.MISSING_ERROR, failure
        assert "[out= unsafe dtype] the CPU wrote a float32 result into the int64 out=" in failure.message
        assert run_case(op, failure.variant_case, CPUBackend()).outcome == O.MISSING_ERROR
        # an integer out that the result's dtype allows (argmax's indices) is no such cast
        argmax = opdb.lookup("aten::argmax.out")
        case = Case(argmax.qualname, (f32(3, 4, seed=1), 1), {"out": T((3,), "int64", seed=2)})
        assert run_case(argmax, case, CPUBackend()).outcome == O.PASS


def test_a_device_stricter_than_the_cpus_unsafe_out_cast_passes_with_a_finding():
    # cumsum.out on the CPU truncates a float result into an int64 out (OpInfo's test_out expects
    # it to fail); a device that refuses it is right
    from torch.utils._python_dispatch import TorchDispatchMode

    from conform.run.execute import run_out_variants

    class Refuses(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = (kwargs or {}).get("out")
            if func is torch.ops.aten.cumsum.out and out is not None and out.dtype == torch.int64:
                raise RuntimeError("result type Float can't be cast to the desired output type Long")
            return func(*args, **(kwargs or {}))

    class Strict(CPUBackend):
        name = "strict-out"

        def device_context(self):
            return Refuses()

    op = opdb.lookup("aten::cumsum.out")
    case = Case("aten::cumsum.out", (f32(3, 4, seed=1), 1), {"out": f32(3, 4, seed=3)})
    checked, found = run_out_variants(op, case, Strict())
    assert found is not None and found.outcome == O.PASS and found.finding["kind"] == "cpu_wrong", found
    assert "the device refuses it" in found.message


# -- inputs of a wrong size ---------------------------------------------------------------------


def test_a_device_that_computes_with_a_wrongly_sized_input_is_a_missing_error():
    from conform.run.execute import run_wrong_sizes

    op = opdb.lookup("aten::dot")
    case = Case(op.qualname, (f32(5, seed=1), f32(5, seed=2)))
    found = run_wrong_sizes(op, case, BACKENDS["missing_size_check"]())
    assert found is not None and found.outcome == O.MISSING_ERROR, found
    assert found.message.startswith("[wrong size] argument 1 one longer in its last dim: the CPU reference raised")
    assert found.variant_case.args[0].shape == (6,)
    # the kernel that refuses it as the CPU does, and the plain CPU (no second kernel to ask)
    for healthy in (BACKENDS["none"](), CPUBackend()):
        assert run_wrong_sizes(op, case, healthy) is None


def _faulty(name: str, target, bug) -> type:
    """A FaultyBackend class whose kernel for `target` is `bug(func, args, kwargs)`."""
    return type(name, (FaultyBackend,), {"name": name, "targets": frozenset({target}), "bug": staticmethod(bug)})


def test_a_device_that_refuses_an_empty_batch_the_cpu_computes_on_is_a_device_error():
    from conform.run.execute import run_wrong_sizes

    def refuse_empty(func, args, kwargs):
        if args[0].numel() == 0:
            raise TypeError("cond must be a bool, but got <class 'int'>")
        return func(*args, **kwargs)

    refusing = _faulty("faulty-refuses-empty", torch.ops.aten.relu.default, refuse_empty)

    op = opdb.lookup("aten::relu")
    case = Case(op.qualname, (f32(3, 4, seed=1),))
    found = run_wrong_sizes(op, case, refusing())
    assert found is not None and found.outcome == O.DEVICE_ERROR, found
    assert found.message.startswith("[empty input] argument 1 empty in its first dim: TypeError: cond must be a bool")
    assert found.variant_case.args[0].shape == (0, 4)
    for healthy in (BACKENDS["none"](), CPUBackend()):
        assert run_wrong_sizes(op, case, healthy) is None


def _cummin_checks_its_dim_only_when_not_empty() -> bool:
    try:
        torch.cummin(torch.empty(0, 3), -46)
    except IndexError:
        return False
    return True


def test_a_dim_out_of_range_refused_as_drawn_and_computed_with_a_batch_of_none_is_a_missing_error():
    from conform.run.execute import run_dim_range

    cumsum = opdb.lookup("aten::cumsum")
    case = Case(cumsum.qualname, (f32(3, 4, seed=1), 1))
    # the plain CPU's cumsum checks its dim for any input; a device that returns early for an
    # empty one does not (its refusal is held to the CPU's)
    assert run_dim_range(cumsum, case, CPUBackend()) is None

    def skip_the_check_when_empty(func, args, kwargs):
        if args[0].numel() == 0:
            return torch.empty_like(args[0])
        return func(*args, **kwargs)

    early = _faulty("faulty-early-return", torch.ops.aten.cumsum.default, skip_the_check_when_empty)
    found = run_dim_range(cumsum, case, early())
    assert found is not None and found.outcome == O.MISSING_ERROR, found
    assert found.message.startswith("[dim out of range] argument 2 set to 42:")
    assert found.variant_case.args[0].shape == (0, 4) and found.variant_case.args[1] == 42
    assert run_dim_range(cumsum, case, BACKENDS["none"]()) is None
    # torch 2.13's own cummin returns early for an empty input before it wraps its dim
    # (pytorch#188224): on the plain CPU, the relation is the check
    if _cummin_checks_its_dim_only_when_not_empty():
        cummin = opdb.lookup("aten::cummin")
        found = run_dim_range(cummin, Case(cummin.qualname, (f32(3, 4, seed=1), 0)), CPUBackend())
        assert found is not None and found.outcome == O.MISSING_ERROR, found
        assert "IndexError: Dimension out of range" in found.message
        assert "argument 1 empty in its first dim" in found.message


def test_a_case_drawn_with_a_batch_of_none_is_held_against_a_batch_of_one():
    from generators.variants import out_of_range_dims

    cumsum = opdb.lookup("aten::cumsum")
    ((what, full, where, empty),) = out_of_range_dims(cumsum, Case(cumsum.qualname, (f32(0, 4, seed=1), -1)))
    assert (what, where) == ("argument 2 set to 42", "0")
    assert full.args[0].shape == (1, 4) and empty.args[0].shape == (0, 4)
    assert full.args[1] == empty.args[1] == 42
    # a 0-d input has no batch to empty; a dim list changes in its last element
    assert out_of_range_dims(cumsum, Case(cumsum.qualname, (f32(seed=1), 0))) == []
    total = opdb.lookup("aten::sum.dim_IntList")
    ((_, drawn, _, _),) = out_of_range_dims(total, Case(total.qualname, (f32(2, 3, seed=1), [0, 1])))
    assert drawn.args[1] == [0, 42]


def test_meta_is_not_asked_for_a_refusal_that_follows_the_values():
    # an index past the source: the CPU refuses its values, which meta does not hold
    op = opdb.lookup("aten::index_select")
    case = Case(op.qualname, (f32(5, 3, seed=1), 0, T((4,), "int64", values="index", low=3, high=9, seed=2)))
    r = run_case(op, case, MetaBackend())
    assert r.outcome == O.PASS and r.invalid and "does not hold" in r.message, r
    # a refusal about sizes still is asked of it
    dot = opdb.lookup("aten::dot")
    r = run_case(dot, Case(dot.qualname, (f32(5, seed=1), f32(6, seed=2))), MetaBackend())
    assert r.outcome in (O.PASS, O.MISSING_ERROR) and not (r.invalid and "does not hold" in r.message)


def test_meta_outs_of_two_layouts_are_held_to_their_metadata_not_to_values_meta_lacks():
    from conform.run.execute import run_out_variants

    op = opdb.lookup("aten::greater.Tensor_out")
    case = Case(op.qualname, (f32(3, 8, seed=1), f32(3, 8, seed=2)), {"out": T((3, 8), "bool", seed=3)})
    checked, failure = run_out_variants(op, case, MetaBackend(), relations=True)
    assert checked and (failure is None or "out_layout relation" not in failure.message), failure


class _AmaxWritesAnyOut(TorchDispatchMode):
    """amax.out that writes into a floating out of any dtype (the CPU's requires the input's)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.amax.out and kwargs["out"].is_floating_point():
            out = kwargs["out"]
            result = torch.ops.aten.amax.default(*args, **{k: v for k, v in kwargs.items() if k != "out"})
            return out.resize_(result.shape).copy_(result)
        return func(*args, **kwargs)


def test_a_device_that_writes_an_out_of_another_dtype_the_cpu_refuses_is_a_missing_error():
    from conform.run.execute import run_out_variants

    class Lenient(CPUBackend):
        name = "lenient-out"

        def device_context(self):
            return _AmaxWritesAnyOut()

    op = opdb.lookup("aten::amax.out")
    case = Case(op.qualname, (f32(3, 4, seed=1), [1]), {"out": f32(3, seed=2)})
    checked, found = run_out_variants(op, case, Lenient())
    assert found is not None and found.outcome == O.MISSING_ERROR, found
    assert found.message.startswith("[out= other dtype] an out of another dtype (out float64)")
    assert found.variant_case.kwargs["out"].dtype == "float64"
    # the CPU's own kernels on a device refuse it as the CPU does; the plain CPU has no second kernel
    for healthy in (BACKENDS["none"](), CPUBackend()):
        assert run_out_variants(op, case, healthy)[1] is None

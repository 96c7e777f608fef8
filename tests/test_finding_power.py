"""Finding power: each fault-injecting backend of tests/faulty.py must get its known outcome.

`BUGS` is the table (bug, backend factory, op, expected outcome). Today it is checked at the
execute level, with one hand-built case per bug (`EXAMPLES`) that exposes it. Once the runner
exists, the same table is meant to be driven through the real CLI (`conform run --device
tests.faulty:<Class> --ops <op>`), where hypothesis has to *find* a case like the example.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import opdb
from conform.outcomes import Outcome
from conform.run.execute import run_case
from generators.case import Case
from generators.case import TensorSpec as T
from tests.faulty import BACKENDS

O = Outcome

# (bug, backend factory, op, expected outcome)
BUGS = [
    ("ignores_strides", BACKENDS["ignores_strides"], "aten::add.Tensor", O.MISMATCH),
    ("wrong_above_size", BACKENDS["wrong_above_size"], "aten::sum", O.MISMATCH),
    ("nan_not_propagated", BACKENDS["nan_not_propagated"], "aten::maximum", O.MISMATCH),
    ("alpha_ignored", BACKENDS["alpha_ignored"], "aten::add.Tensor", O.MISMATCH),
    ("fp16_overflow", BACKENDS["fp16_overflow"], "aten::linalg_vector_norm", O.MISMATCH),
    ("wrong_on_broadcast", BACKENDS["wrong_on_broadcast"], "aten::mul.Tensor", O.MISMATCH),
    ("inplace_view_not_written_back", BACKENDS["inplace_view_not_written_back"], "aten::add_.Tensor", O.MISMATCH),
    ("reduction_off_by_one", BACKENDS["reduction_off_by_one"], "aten::sum.dim_IntList", O.MISMATCH),
    ("sign_of_zero", BACKENDS["sign_of_zero"], "aten::neg", O.MISMATCH),
    ("empty_reduction", BACKENDS["empty_reduction"], "aten::sum", O.MISMATCH),
    ("last_element_wrong", BACKENDS["last_element_wrong"], "aten::exp", O.MISMATCH),
    ("integer_only_wrong", BACKENDS["integer_only_wrong"], "aten::div.Tensor_mode", O.MISMATCH),
    ("complex_wrong", BACKENDS["complex_wrong"], "aten::mul.Tensor", O.MISMATCH),
    ("inf_clamped", BACKENDS["inf_clamped"], "aten::exp", O.MISMATCH),
    ("wrong_distribution", BACKENDS["wrong_distribution"], "aten::rand_like", O.MISMATCH),
    ("argmax_wrong", BACKENDS["argmax_wrong"], "aten::argmax", O.MISMATCH),
    ("wrong_dtype_promotion", BACKENDS["wrong_dtype_promotion"], "aten::add.Tensor", O.META_MISMATCH),
    ("sum_keeps_int32", BACKENDS["sum_keeps_int32"], "aten::sum", O.META_MISMATCH),
    ("keepdim_ignored", BACKENDS["keepdim_ignored"], "aten::sum.dim_IntList", O.META_MISMATCH),
    ("out_not_resized", BACKENDS["out_not_resized"], "aten::add.out", O.META_MISMATCH),
    ("out_unsafe_cast", BACKENDS["out_unsafe_cast"], "aten::add.out", O.MISSING_ERROR),
    ("grad_wrong", BACKENDS["grad_wrong"], "aten::sigmoid", O.GRAD_MISMATCH),
    ("missing_bounds_check", BACKENDS["missing_bounds_check"], "aten::index_select", O.MISSING_ERROR),
    ("missing_size_check", BACKENDS["missing_size_check"], "aten::dot", O.MISSING_ERROR),
    ("bfloat16_not_implemented", BACKENDS["bfloat16_not_implemented"], "aten::cos", O.NOT_IMPLEMENTED),
    ("no_kernel", BACKENDS["no_kernel"], "aten::erfinv", O.NOT_IMPLEMENTED),
    ("backward_not_implemented", BACKENDS["backward_not_implemented"], "aten::tanh", O.NOT_IMPLEMENTED),
    ("float64_rejected", BACKENDS["float64_rejected"], "aten::add.Tensor", O.UNSUPPORTED_DTYPE),
    ("device_error", BACKENDS["device_error"], "aten::cat", O.DEVICE_ERROR),
    ("fp16_intermediate_overflow", BACKENDS["fp16_intermediate_overflow"], "aten::hypot", O.MISMATCH),
    ("bf16_integer_off_by_one", BACKENDS["bf16_integer_off_by_one"], "aten::round", O.MISMATCH),
    ("vector_tail_nan", BACKENDS["vector_tail_nan"], "aten::relu", O.MISMATCH),
]

# op rules some bugs need (the rule an op owner would write)
RULES = {"sign_of_zero": {"hints": {"sign_of_zero": True}}}

# one case per bug that exposes it
EXAMPLES = {
    "ignores_strides": Case(
        "aten::add.Tensor", (T((3, 5), "float32", "transposed", seed=1), T((3, 5), "float32", seed=2))
    ),
    "wrong_above_size": Case("aten::sum", (T((40, 40), "float32", seed=1),)),
    "nan_not_propagated": Case(
        "aten::maximum", (T((4, 6), "float32", values="special", seed=8), T((4, 6), "float32", seed=4))
    ),
    "alpha_ignored": Case(
        "aten::add.Tensor", (T((3, 4), "float32", seed=1), T((3, 4), "float32", seed=2)), {"alpha": 2}
    ),
    "fp16_overflow": Case("aten::linalg_vector_norm", (T((64,), "float16", low=-300, high=300, seed=1),)),
    "wrong_on_broadcast": Case("aten::mul.Tensor", (T((3, 4), "float32", seed=1), T((4,), "float32", seed=2))),
    "inplace_view_not_written_back": Case(
        "aten::add_.Tensor", (T((3, 4), "float32", "sliced", seed=1), T((3, 4), "float32", seed=2))
    ),
    "reduction_off_by_one": Case("aten::sum.dim_IntList", (T((3, 5), "float32", seed=1), [1])),
    "sign_of_zero": Case("aten::neg", (T((4, 4), "float32", values="special", seed=5),)),
    "empty_reduction": Case("aten::sum", (T((0, 3), "float32"),)),
    "last_element_wrong": Case("aten::exp", (T((17,), "float32", seed=1),)),
    "integer_only_wrong": Case(
        "aten::div.Tensor_mode",
        (T((8,), "int32", seed=2), T((8,), "int32", values="positive", seed=3)),
        {"rounding_mode": "floor"},
    ),
    "complex_wrong": Case("aten::mul.Tensor", (T((3, 4), "complex64", seed=1), T((3, 4), "complex64", seed=2))),
    "inf_clamped": Case("aten::exp", (T((8,), "float32", low=80, high=100, seed=1),)),
    "wrong_distribution": Case("aten::rand_like", (T((32, 32), "float32"),), seed=7),
    "argmax_wrong": Case("aten::argmax", (T((5, 6), "float32", seed=1), 1)),
    "wrong_dtype_promotion": Case("aten::add.Tensor", (T((3, 4), "int32", seed=1), T((3, 4), "float32", seed=2))),
    "sum_keeps_int32": Case("aten::sum", (T((3, 4), "int32", seed=1),)),
    "keepdim_ignored": Case("aten::sum.dim_IntList", (T((3, 4), "float32", seed=1), [1], True)),
    "out_not_resized": Case(
        "aten::add.out", (T((3, 4), "float32", seed=1), T((3, 4), "float32", seed=2)), {"out": T((0,), "float32")}
    ),
    "out_unsafe_cast": Case(
        "aten::add.out", (T((3, 4), "float32", seed=1), T((3, 4), "float32", seed=2)), {"out": T((3, 4), "int64")}
    ),
    "grad_wrong": Case("aten::sigmoid", (T((3, 4), "float32", seed=1),)),
    "missing_bounds_check": Case(
        "aten::index_select", (T((5, 3), "float32", seed=1), 0, T((4,), "int64", values="index", low=3, high=9, seed=2))
    ),
    "missing_size_check": Case("aten::dot", (T((5,), "float32", seed=1), T((6,), "float32", seed=2))),
    "bfloat16_not_implemented": Case("aten::cos", (T((3, 4), "bfloat16", seed=1),)),
    "no_kernel": Case("aten::erfinv", (T((3, 4), "float32", values="open_unit", seed=1),)),
    "backward_not_implemented": Case("aten::tanh", (T((3, 4), "float32", seed=1),)),
    "float64_rejected": Case("aten::add.Tensor", (T((3, 4), "float64", seed=1), T((3, 4), "float64", seed=2))),
    "device_error": Case(
        "aten::cat", ([T((2, 3), "float32", seed=1), T((1, 3), "float32", seed=2), T((2, 3), "float32", seed=3)],)
    ),
    "fp16_intermediate_overflow": Case(
        "aten::hypot",
        (T((8,), "float16", seed=1, magnitude="sqrt_max"), T((8,), "float16", seed=2, magnitude="sqrt_max")),
    ),
    "bf16_integer_off_by_one": Case("aten::round", (T((64,), "bfloat16", seed=1, magnitude="moderate"),)),
    "vector_tail_nan": Case("aten::relu", (T((3, 17), "float32", values="special", seed=1),)),
}


def op_for(bug: str, op_name: str):
    op = opdb.lookup(op_name)
    extra = RULES.get(bug)
    if extra:
        op = dataclasses.replace(op, rules=dataclasses.replace(op.rules, **extra))
    return op


def test_every_bug_has_an_example_and_a_distinct_backend():
    assert {b[0] for b in BUGS} == set(EXAMPLES)
    assert len({b[1]().name for b in BUGS}) == len(BUGS)
    assert len(BUGS) >= 20


@pytest.mark.parametrize("bug,factory,op_name,expected", BUGS, ids=[b[0] for b in BUGS])
def test_bug_is_found_at_execute_level(bug, factory, op_name, expected):
    op = op_for(bug, op_name)
    case = EXAMPLES[bug]
    found = run_case(op, case, factory())
    assert found.outcome == expected, f"{bug}: {found.outcome} ({found.phase}) {found.message}\n{found.traceback}"
    assert not found.invalid
    assert found.message  # a person can act on it
    # the same case on a healthy CPU is clean: the outcome is the bug's, not the case's
    healthy = run_case(op, case, BACKENDS["none"]())
    assert healthy.outcome == O.PASS, f"{bug} on the healthy backend: {healthy.outcome} {healthy.message}"


@pytest.mark.parametrize(
    "args,kwargs",
    [((), {"dtype": "float16"}), ((3,), {}), ((2, [0]), {"keepdim": True})],
    ids=["explicit_half_dtype", "order_3", "dim"],
)
def test_half_norm_fault_takes_every_half_p_norm_path(args, kwargs):
    # a kernel that keeps |x|**p in half does so whatever the order and however dtype=float16 is
    # spelt: the fault once skipped both, which hid it from 2 cases in 3 of a default cell
    kwargs = {k: {"dtype": v} if k == "dtype" else v for k, v in kwargs.items()}
    case = Case("aten::linalg_vector_norm", (T((4, 8), "float16", low=-300, high=300, seed=1), *args), kwargs)
    op = opdb.lookup("aten::linalg_vector_norm")
    assert run_case(op, case, BACKENDS["fp16_overflow"]()).outcome == O.MISMATCH
    assert run_case(op, case, BACKENDS["none"]()).outcome == O.PASS


def test_a_fault_that_shows_once_is_still_found():
    # a kernel whose result is not a function of its inputs (a read of uninitialised memory:
    # median along an expanded dim) fails a case, then passes it when hypothesis replays it to
    # shrink: the cell is that failure, not "conform internal error: FlakyFailure"
    from conform.config import CellSettings
    from conform.run.cell import run_cell
    from tests.faulty import FaultyBackend

    calls = []

    def first_call_wrong(func, args, kwargs):
        calls.append(func)
        out = func(*args, **kwargs)
        return out + 1 if len(calls) == 1 else out

    body = {
        "name": "faulty-once",
        "targets": frozenset({torch.ops.aten.exp.default}),
        "bug": staticmethod(first_call_wrong),
    }
    backend = type("OnceWrong", (FaultyBackend,), body)()
    r = run_cell(opdb.lookup("aten::exp"), "float32", backend, CellSettings(seed=1, hypothesis_db=None))
    assert r.outcome == O.MISMATCH.value, r.message
    assert "did not fail the same way when replayed" in r.message and r.case is not None


def test_a_failure_shrinks_to_a_case_that_fails_the_same_way():
    # two faults in one kernel: NaN for large values (what the cell meets first) and a small
    # relative error on 1-d one-element tensors (simpler to the shrinker). Shrinking must not
    # slip from the first to the second: the minimal case shows the failure that was found
    # (native_group_norm's overflowing float32 variance once shrank to a one-element group's
    # rounding and the cell reported that instead)
    from conform.config import CellSettings
    from conform.run.cell import run_cell
    from tests.faulty import FaultyBackend

    def two_faults(func, args, kwargs):
        x, out = args[0], func(*args, **kwargs)
        if x.dim() == 1 and x.numel() == 1:
            return out * 1.01
        return torch.where(x.abs() > 100, torch.full_like(out, math.nan), out)

    body = {"name": "faulty-two", "targets": frozenset({torch.ops.aten.neg.default}), "bug": staticmethod(two_faults)}
    backend = type("TwoFaults", (FaultyBackend,), body)()
    for seed in (1, 2, 3):  # each slipped to the one-element error before
        r = run_cell(
            opdb.lookup("aten::neg"), "float32", backend, CellSettings(seed=seed, examples=10, hypothesis_db=None)
        )
        assert r.outcome == O.MISMATCH.value and "NaN mismatch" in r.message, (seed, r.message)


def test_grossly_wrong_values_do_not_shrink_to_a_rounding_at_the_tolerance():
    # wrong values 10 off for large inputs (a kernel reading the wrong memory) and, simpler to
    # the shrinker, a 1-d one-element tensor 5e-5 off (5x the atol): both are "values", but the
    # minimal case must stay grossly wrong (shrinking toward anything that fails reached the rounding)
    from conform.config import CellSettings
    from conform.run.cell import run_cell
    from tests.faulty import FaultyBackend

    def two_faults(func, args, kwargs):
        x, out = args[0], func(*args, **kwargs)
        if x.dim() == 1 and x.numel() == 1:
            return out + 5e-5
        return torch.where(x.abs() > 100, out + 10, out)

    body = {
        "name": "faulty-two-values",
        "targets": frozenset({torch.ops.aten.sin.default}),
        "bug": staticmethod(two_faults),
    }
    backend = type("TwoValueFaults", (FaultyBackend,), body)()
    r = run_cell(opdb.lookup("aten::sin"), "float32", backend, CellSettings(seed=3, examples=10, hypothesis_db=None))
    assert r.outcome == O.MISMATCH.value and "greatest absolute difference 10 " in r.message, r.message


def _two_kinds_of_neg():
    from tests.faulty import FaultyBackend

    def two_faults(func, args, kwargs):
        # NaN for large finite values; elsewhere 1% off on tensors of two or more elements
        x, out = args[0], func(*args, **kwargs)
        out = torch.where(torch.isfinite(x) & (x.abs() > 100), torch.full_like(out, math.nan), out)
        return out * 1.01 if x.numel() >= 2 else out

    body = {
        "name": "faulty-two-kinds",
        "targets": frozenset({torch.ops.aten.neg.default}),
        "bug": staticmethod(two_faults),
    }
    return type("TwoKinds", (FaultyBackend,), body)()


def test_a_cell_reports_a_second_kind_of_failure_after_its_first():
    # a kernel with two bugs: the cell's verdict is the one it met first, and the other is a
    # further failure with its own minimal case and script (each seed met both among its cases)
    from conform.config import CellSettings
    from conform.run.cell import run_cell

    backend = _two_kinds_of_neg()
    for seed in (1, 2, 3):
        r = run_cell(
            opdb.lookup("aten::neg"), "float32", backend, CellSettings(seed=seed, examples=10, hypothesis_db=None)
        )
        assert r.outcome == O.MISMATCH.value, (seed, r.message)
        messages = [r.message] + [f["message"] for f in r.further_failures]
        assert any("NaN mismatch" in m for m in messages), (seed, messages)
        assert any("greatest relative difference 0.01" in m for m in messages), (seed, messages)
        assert r.examples_run <= 10  # within the cell's own cases
        for f in r.further_failures:
            assert f["outcome"] == O.MISMATCH.value and f["case"]["op"] == "aten::neg" and "aten.neg" in f["repro"]


def test_no_further_failures_when_asked_for_none():
    from conform.config import CellSettings
    from conform.run.cell import run_cell

    r = run_cell(
        opdb.lookup("aten::neg"),
        "float32",
        _two_kinds_of_neg(),
        CellSettings(seed=1, examples=10, hypothesis_db=None, further_failures=0),
    )
    assert r.outcome == O.MISMATCH.value and r.further_failures == []

"""compare and tolerances: the rules a user relies on when a result says pass or mismatch."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import opdb
from conform.judge.compare import compare, compare_tensors, failures, summary
from conform.judge.tolerances import (
    DEFAULT_TOLERANCES,
    LeafTolerance,
    default_tolerance,
    growth,
    leaf_scale,
    tolerance_for,
)
from opdb.spec import Tolerance

NAN, INF = float("nan"), float("inf")


def one(actual, expected, **kw):
    records = compare(actual, expected, **kw)
    assert len(records) == 1
    return records[0]


def test_message_says_count_greatest_difference_index_allowance_and_path():
    e = torch.zeros(2, 5)
    a = e.clone()
    a[1, 2] = 0.25
    a[0, 0] = 1e-6  # within atol
    r = one((a,), (e,))
    assert r.kind == "values" and r.path == "output[0]"
    assert r.message.startswith(
        "Mismatched elements: 1 / 10 (10.0%); greatest absolute difference 0.25 at index (1, 2) (up to 1e-05 allowed)"
    )
    assert r.message.endswith("[output[0]]")
    assert r.index == (1, 2) and r.mismatched == 1 and r.total == 10


def test_pairs_nested_structures_with_paths_and_never_raises():
    a = (torch.ones(2), [3, None, torch.ones(1)])
    e = (torch.ones(2), [3, None, torch.zeros(1)])
    records = compare(a, e)
    assert [r.path for r in records] == ["output[0]", "output[1][0]", "output[1][1]", "output[1][2]"]
    assert [r.path for r in failures(records)] == ["output[1][2]"]
    assert one((1, 2), (1,)).kind == "structure"
    assert one(torch.ones(1), None).kind == "structure"
    structseq = torch.return_types.max((torch.ones(1), torch.zeros(1, dtype=torch.long)))
    assert [r.path for r in compare(structseq, (torch.ones(1), torch.ones(1, dtype=torch.long)))] == [
        "output[0]",
        "output[1]",
    ]
    assert [r.ok for r in compare(structseq, (torch.ones(1), torch.ones(1, dtype=torch.long)))] == [True, False]


def test_shape_and_dtype_are_metadata_findings():
    assert one(torch.zeros(2, 3), torch.zeros(3, 2)).kind == "shape"
    assert one(torch.zeros(2), torch.zeros(2, dtype=torch.float64)).kind == "dtype"
    assert one(torch.zeros(2), torch.ones(2), metadata_only=True).ok


def test_nan_equals_nan_but_positions_must_match():
    assert one(torch.tensor([NAN, 1.0]), torch.tensor([NAN, 1.0])).ok
    r = one(torch.tensor([1.0, 1.0]), torch.tensor([NAN, 1.0]))
    assert r.kind == "nan" and r.index == (0,)


def test_infinities_must_match_in_position_and_sign():
    assert one(torch.tensor([INF, -INF]), torch.tensor([INF, -INF])).ok
    assert one(torch.tensor([-INF]), torch.tensor([INF])).kind == "inf"
    assert one(torch.tensor([3.4e38]), torch.tensor([INF])).kind == "inf"


def test_signed_zero_is_equal_unless_asked():
    a, e = torch.tensor([0.0]), torch.tensor([-0.0])
    assert one(a, e).ok
    r = one(a, e, check_sign_of_zero=True)
    assert r.kind == "sign" and "sign of zero" in r.message


def test_integers_and_bools_are_exact():
    assert one(torch.tensor([5]), torch.tensor([5])).ok
    r = one(torch.tensor([5, 7]), torch.tensor([5, 6]))
    assert r.kind == "values" and r.max_abs == 1 and "exact" in r.message
    assert one(torch.tensor([True]), torch.tensor([False])).kind == "values"
    assert one(torch.tensor([10**15 + 1]), torch.tensor([10**15]), tolerance=(1.0, 1.0)).kind == "values"
    assert one(3, 4).kind == "values" and one(True, 1).kind == "dtype"


def test_complex_compared_on_real_and_imaginary_parts():
    e = torch.tensor([1 + 1j, 2 + 2j], dtype=torch.complex64)
    a = e.clone()
    a[1] = 2 + 2.5j
    r = one(a, e)
    assert r.kind == "values" and r.index == (1,) and "(imag)" in r.message
    assert one(e.conj(), e.conj().resolve_conj()).ok


def test_complex_nan_is_nan_whatever_its_other_part_holds():
    c = lambda re, im: torch.complex(torch.tensor([re, 1.0]), torch.tensor([im, 1.0]))  # noqa: E731
    assert one(c(NAN, NAN), c(NAN, 0.0)).ok  # ifft of a NaN: (nan+nanj) or (nan+0j)
    assert one(c(0.5, NAN), c(NAN, -3.0)).ok
    r = one(c(NAN, 0.0), c(2.0, 0.0))  # a NaN where a number is expected is still found
    assert r.kind == "nan" and r.index == (0,)
    assert one(c(2.0, NAN), c(2.0, 0.0)).kind == "nan"
    # (inf+nanj) and (nan+nanj): infinity recovery is the implementation's choice
    assert one(c(INF, NAN), c(NAN, NAN)).ok and one(c(NAN, NAN), c(-INF, 0.0)).ok
    assert one(c(INF, 0.0), c(-INF, 0.0)).kind == "inf"  # two infinities still agree in sign
    assert one(c(INF, NAN), c(3.0, 0.0)).kind == "nan"


def test_measured_errors_are_kept_for_passing_pairs_too():
    e = torch.tensor([1.0, 2.0, 4.0])
    a = torch.nextafter(e, torch.tensor(INF))
    r = one(a, e)
    assert r.ok and r.max_ulp == pytest.approx(1.0) and r.max_abs > 0
    assert (r.rtol, r.atol) == DEFAULT_TOLERANCES[torch.float32]
    s = summary([r])
    assert s["max_ulp_err"] == pytest.approx(1.0) and s["rtol"] == 1.3e-6


def test_ulp_is_measured_in_the_compared_dtype():
    e = torch.tensor([1.0], dtype=torch.float16)
    a = torch.tensor([1.0 + 2 * 2**-10], dtype=torch.float16)
    assert one(a, e, tolerance=(1.0, 1.0)).max_ulp == pytest.approx(2.0)


def test_empty_and_strided_tensors():
    assert one(torch.zeros(0, 3), torch.zeros(0, 3)).ok
    base = torch.arange(12.0).reshape(3, 4)
    assert one(base.t(), base.t().contiguous()).ok


def test_tolerance_table_is_torch_testings():
    assert default_tolerance(torch.float16) == (1e-3, 1e-5)
    assert default_tolerance(torch.bfloat16) == (1.6e-2, 1e-5)
    assert default_tolerance(torch.float32) == (1.3e-6, 1e-5)
    assert default_tolerance(torch.float64) == (1e-7, 1e-7)
    assert default_tolerance(torch.complex64) == default_tolerance(torch.float32)
    assert default_tolerance(torch.complex128) == default_tolerance(torch.float64)
    assert default_tolerance(torch.complex32) == default_tolerance(torch.float16)
    assert default_tolerance(torch.int32) == (0.0, 0.0) and default_tolerance(torch.bool) == (0.0, 0.0)
    for dt, tol in DEFAULT_TOLERANCES.items():
        if dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            from torch.testing._comparison import default_tolerances

            assert default_tolerances(torch.empty(0, dtype=dt)) == tol


def test_op_rules_override_by_dtype_then_star_and_integers_stay_exact():
    op = opdb.lookup("aten::add.Tensor")
    ruled = dataclasses.replace(
        op,
        rules=dataclasses.replace(op.rules, tolerances={"float16": Tolerance(1e-2, 1e-3), "*": Tolerance(1e-4, 1e-4)}),
    )
    assert tolerance_for(ruled, torch.float16) == (1e-2, 1e-3)
    assert tolerance_for(ruled, "float32") == (1e-4, 1e-4)
    assert tolerance_for(ruled, torch.float32, reduction_size=10_000) == (1e-4, 1e-4)  # taken as-is
    assert tolerance_for(ruled, torch.int64) == (0.0, 0.0)
    assert tolerance_for(None, torch.float32) == (1.3e-6, 1e-5)


def test_reductions_grow_tolerance_by_sqrt_of_terms():
    assert growth(1) == 1.0 and growth(100) == 10.0
    rtol, atol = tolerance_for(opdb.lookup("aten::sum"), torch.float32, reduction_size=400)
    assert rtol == pytest.approx(1.3e-6 * 20) and atol == pytest.approx(1e-5 * 20)


def test_the_input_scale_floor_is_bounded_by_each_outputs_own_scale():
    # a float32 batch norm of inputs near 1e21 (64 elements): the saved mean is of the inputs'
    # size and carries their rounding error; the normalised output is about +-1 whatever the
    # inputs, so zeros for it (pytorch#162489: the variance overflows float32) are off by its
    # own scale, not within rtol * sqrt(64) * 1e21
    op = opdb.lookup("aten::native_batch_norm")
    tol = LeafTolerance(lambda dt, out: tolerance_for(op, dt, reduction_size=64, input_scale=1e21, output_scale=out))
    y = torch.tensor([-1.2, 0.3, 1.0, -0.01])
    mean = torch.tensor([2.01218e18, -7.3e17])
    got = (torch.zeros(4), torch.tensor([2.01216e18, -7.3e17]))
    y_rec, mean_rec = compare(got, (y, mean), tolerance=tol)
    assert y_rec.kind == "values" and y_rec.mismatched == 4, y_rec
    assert mean_rec.ok, mean_rec.message
    # two inputs of one scale still cancel: 1.5 - 1.4921875 in bfloat16 off by one input ulp
    # (100% of the result) is within the floor of the second input's scale
    add = opdb.lookup("aten::add.Tensor")
    tol = LeafTolerance(lambda dt, out: tolerance_for(add, dt, input_scale=1.5, second_scale=1.5, output_scale=out))
    diff = torch.tensor([1.5 - 1.4921875], dtype=torch.bfloat16)
    [r] = compare(diff * 2, diff, tolerance=tol)
    assert r.ok, r.message


def test_comparison_of_unreadable_input_is_a_record_not_an_exception():
    class Weird:
        def __eq__(self, other):
            raise RuntimeError("boom")

    r = one(Weird(), Weird())
    assert r.kind == "error" and "boom" in r.message


def test_compare_tensors_with_fixed_tolerance():
    r = compare_tensors(torch.tensor([1.05]), torch.tensor([1.0]), tolerance=(0.1, 0.0))
    assert r.ok and math.isclose(r.max_rel, 0.05, rel_tol=1e-5)


def test_sparse_tensor_with_invalid_indices_is_compared_by_parts_not_densified():
    # crow_indices past nnz and column indices past the width: to_dense would read out of
    # bounds (the process dies); the *_unsafe constructors build such tensors by contract
    def bad(values):
        return torch.ops.aten._sparse_csr_tensor_unsafe(
            torch.tensor([29, 34]), torch.tensor([41, 41, 40, 40]), values, [1, 42]
        )

    v = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert one(bad(v), bad(v.clone())).ok
    r = one(bad(v + torch.tensor([0.0, 0.0, 0.5, 0.0])), bad(v))
    assert r.kind == "values" and r.path.endswith(".values")


def test_nested_tensors_are_compared_component_by_component():
    # a nested tensor has no single shape: reading it as one made every nested op "cannot compare"
    a = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    wrong = torch.nested.nested_tensor([torch.ones(2), torch.tensor([1.0, 2.0, 1.0])])
    shorter = torch.nested.nested_tensor([torch.ones(2)])
    assert all(r.ok for r in compare(a, a.clone()))
    bad = [r for r in compare(wrong, a) if not r.ok]
    assert [r.kind for r in bad] == ["values"] and "output[1]" in bad[0].message
    assert [r.kind for r in compare(shorter, a) if not r.ok] == ["structure"]
    assert [r.kind for r in compare(torch.ones(2), a) if not r.ok] == ["structure"]


def test_a_meta_tensor_is_compared_by_its_metadata_where_only_metadata_is_asked():
    key = torch.empty((2, 3), device="meta")
    assert compare_tensors(key, torch.zeros(2, 3), metadata_only=True).ok
    assert compare_tensors(key, torch.zeros(3, 2), metadata_only=True).kind == "shape"


def test_a_leafs_scale_is_its_largest_finite_magnitude():
    nan, inf = math.nan, math.inf
    assert leaf_scale(torch.tensor([1.5, -3.0, nan, -inf, inf])) == 3.0
    assert leaf_scale(torch.tensor([nan, inf], dtype=torch.float16)) == 0.0  # none finite
    assert leaf_scale(torch.tensor([[2.0, -5.0]]).t()) == 5.0  # a view: its own values only
    assert leaf_scale(torch.tensor([3 + 4j, complex(nan, 1)])) == 5.0
    assert leaf_scale(torch.empty(0)) == 0.0
    # a sparse tensor by its stored values, and one that stores none (the *_unsafe constructors)
    assert leaf_scale(torch.tensor([[0.0, -7.0], [nan, 0.0]]).to_sparse()) == 7.0
    empty = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 2))
    assert leaf_scale(empty) == 0.0
    assert leaf_scale(torch.tensor([1, 2])) == math.inf  # not floating: unbounded

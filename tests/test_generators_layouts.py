"""Sparse layouts: TensorSpecs built sparse on the device, and ops that need them drawing them."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from generators import TensorSpec, from_schema
from generators.coverage_probe import probe
from opdb import lookup


def test_sparse_specs_hold_the_dense_values():
    dense = TensorSpec((3, 4), "float32", seed=7)
    for layout, torch_layout in (
        ("sparse_coo", torch.sparse_coo),
        ("sparse_csr", torch.sparse_csr),
        ("sparse_csc", torch.sparse_csc),
    ):
        t = dataclasses.replace(dense, layout=layout).materialize(lambda x: x)
        assert t.layout == torch_layout
        assert torch.equal(t.to_dense(), dense.materialize(lambda x: x))


def test_ops_defined_on_sparse_tensors_get_them():
    op = lookup("aten::crow_indices")
    assert not op.rules.untestable and op.rules.hints["layout"] == "sparse_csr"

    @settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(op, "float32"))
    def check(case):
        (spec,) = case.args
        assert spec.layout == "sparse_csr" and len(spec.shape) == 2

    check()
    valid, reason = probe(lookup("aten::coalesce"), "float32", examples=5)
    assert valid, reason


def test_sparse_coo_inputs_are_sometimes_uncoalesced_with_the_same_values():
    op = lookup("aten::_sparse_sum.dim")
    layouts = set()

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(op, "float32"))
    def check(case):
        spec = case.args[0]
        layouts.add(spec.layout)
        if spec.layout == "sparse_coo_uncoalesced":
            t = spec.materialize(lambda x: x)
            assert not t.is_coalesced() or not t._nnz()  # (an empty tensor stores nothing twice)
            dense = dataclasses.replace(spec, layout="contiguous").materialize(lambda x: x)
            torch.testing.assert_close(t.to_dense(), dense, rtol=0, atol=0, equal_nan=True)

    check()
    assert {"sparse_coo", "sparse_coo_uncoalesced"} <= layouts


def test_sparse_constructors_get_indices_of_one_pattern():
    op = lookup("aten::sparse_compressed_tensor.comp_plain_value_size")

    @settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(from_schema(op, "float32"))
    def check(case):
        (compressed, plain, values, size), kwargs = case.materialize(lambda t: t, torch.device("cpu"))
        layout = kwargs["layout"]
        major = size[0] if layout in (torch.sparse_csr, torch.sparse_bsr) else size[1]
        assert compressed[0] == 0 and compressed[-1] == plain.numel() == values.shape[0]
        assert compressed.numel() == major + 1 and bool((compressed.diff() >= 0).all())
        torch.sparse_compressed_tensor(compressed, plain, values, size, layout=layout, check_invariants=True)

    check()
    for name in (
        "aten::sparse_coo_tensor.indices_size",
        "aten::_validate_compressed_sparse_indices",
        "aten::_validate_sparse_bsc_tensor_args",
        "aten::sparse_coo_tensor.size_out",
    ):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"


def test_explicit_values_fill_explicit_strides():
    """A spec holding given values in explicit strides (the layout relation's copy of a tensor
    that the named layouts leave contiguous) reads back those values through those strides, and
    strides that alias elements cannot hold them."""
    values = tuple(float(i) for i in range(12))
    spec = TensorSpec((1, 4, 3, 1), "float32", layout="strided", stride=(12, 1, 4, 1), data=values)
    t = spec.materialize(lambda x: x)
    assert t.stride() == (12, 1, 4, 1) and not t.is_contiguous()
    assert torch.equal(t, torch.tensor(values).reshape(1, 4, 3, 1))
    every_other = TensorSpec((1, 5), "float32", layout="strided", stride=(10, 2), data=values[:5])
    assert torch.equal(every_other.materialize(lambda x: x), torch.tensor(values[:5]).reshape(1, 5))
    with pytest.raises(ValueError, match="overlapping"):
        TensorSpec((2, 3), "float32", layout="strided", stride=(1, 1), data=values[:6])

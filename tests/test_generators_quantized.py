"""Quantized inputs: TensorSpecs that materialise as affine-quantized tensors, and the ops that
take or make them drawing valid scales, zero points and axes."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from generators import TensorSpec, Untestable, from_schema
from generators.case import Case
from generators.coverage_probe import probe
from generators.variants import out_variants
from opdb import lookup

_settings = settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def test_quantized_specs_are_quantized_with_their_parameters():
    for dtype, qdtype in (("quint8", torch.quint8), ("qint8", torch.qint8), ("qint32", torch.qint32)):
        spec = TensorSpec((2, 3), dtype, seed=3, scale=0.25, zero_point=5, layout="transposed")
        t = spec.materialize(lambda x: x)
        assert t.is_quantized and t.dtype == qdtype and t.qscheme() == torch.per_tensor_affine
        assert (t.q_scale(), t.q_zero_point()) == (0.25, 5)
        assert t.shape == (2, 3) and not t.is_contiguous()
        # the values are the float values quantized: within half a step where not saturated
        floats = dataclasses.replace(spec, dtype="float32", scale=None, zero_point=0).materialize(lambda x: x)
        info = torch.iinfo(t.int_repr().dtype)
        inside = (floats >= (info.min - 5) * 0.25) & (floats <= (info.max - 5) * 0.25)
        assert inside.any()
        assert (t.dequantize() - floats)[inside].abs().max() <= 0.125 + 1e-6
        assert torch.equal(t.int_repr(), spec.materialize(lambda x: x).int_repr()), "same spec, same tensor"


def test_per_channel_specs_have_one_scale_per_channel():
    t = TensorSpec((2, 3, 4), "qint8", scale=0.1, zero_point=-2, axis=1).materialize(lambda x: x)
    assert t.qscheme() == torch.per_channel_affine and t.q_per_channel_axis() == 1
    assert torch.allclose(t.q_per_channel_scales(), torch.tensor([0.1, 0.125, 0.15], dtype=torch.float64))
    assert t.q_per_channel_zero_points().tolist() == [-2, -1, -2]


def test_quantization_parameters_are_checked():
    with pytest.raises(ValueError, match="positive scale"):
        TensorSpec((2,), "quint8")
    with pytest.raises(ValueError, match="quantized dtypes"):
        TensorSpec((2,), "float32", scale=0.1)
    with pytest.raises(ValueError, match="per-channel"):
        TensorSpec((2, 3), "quint8", scale=0.1, axis=0, layout="sliced")


def test_quantized_specs_survive_json():
    case = Case(op="aten::int_repr", args=(TensorSpec((2, 3), "qint8", scale=0.5, zero_point=-3, axis=1),))
    assert Case.from_json(case.to_json()) == case


def test_ops_on_quantized_tensors_draw_them_in_the_storage_cells():
    op = lookup("aten::q_per_channel_scales")
    assert not op.rules.untestable

    @_settings
    @given(from_schema(op, "int8"))
    def check(case):
        (spec,) = case.args
        assert spec.dtype == "qint8" and spec.axis is not None and spec.scale > 0
        assert -128 <= spec.zero_point <= 127

    check()
    with pytest.raises(Untestable, match="quantized"):
        from_schema(op, "float32")
    for name in (
        "aten::int_repr",
        "aten::dequantize.tensors",
        "aten::quantized_max_pool2d",
        "aten::quantized_batch_norm",
        "aten::q_scale",
    ):
        valid, reason = probe(lookup(name), "uint8", examples=5)
        assert valid, f"{name}: {reason}"


def test_quantize_ops_get_valid_quantization_parameters():
    for name in (
        "aten::quantize_per_tensor",
        "aten::quantize_per_tensor.tensor_qparams",
        "aten::quantize_per_tensor.tensors",
        "aten::quantize_per_channel",
        "aten::quantize_per_channel.out",
        "aten::fake_quantize_per_channel_affine",
    ):
        valid, reason = probe(lookup(name), "float32", examples=5)
        assert valid, f"{name}: {reason}"


def test_per_channel_outs_keep_their_axis_in_every_out_variant():
    out = TensorSpec((2, 3), "quint8", scale=1.0, axis=1)
    case = Case(op="aten::quantize_per_channel.out", kwargs={"out": out})
    for variant in out_variants(case, {"out": (2, 3)}).values():
        spec = variant.kwargs["out"]
        assert spec.axis == 1 and spec.layout == "contiguous"
        spec.materialize(lambda x: x)


def test_integer_storage_is_made_quantized_with_its_own_dtype():
    op = lookup("aten::_make_per_channel_quantized_tensor")

    @_settings
    @given(from_schema(op, "uint8"))
    def check(case):
        (self, scale, zero_point, axis), _ = case.materialize(lambda t: t, torch.device("cpu"))
        q = torch.ops.aten._make_per_channel_quantized_tensor(self, scale, zero_point, axis)
        assert q.dtype == torch.quint8 and torch.equal(q.int_repr(), self)
        assert scale.shape == zero_point.shape == (self.shape[axis],) and bool((scale > 0).all())

    check()
    for name in ("aten::_make_per_tensor_quantized_tensor.out", "aten::_make_per_channel_quantized_tensor.out"):
        valid, reason = probe(lookup(name), "int8", examples=5)
        assert valid, f"{name}: {reason}"

"""Quantization and low-precision matmuls: quantization parameters, int8/fp8 operands."""

from __future__ import annotations

import dataclasses

from generators import memo
from generators.case import QUANTIZED_STORAGE, TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.families.tables import _MM, symbolic
from generators.strategies import draw_tensor

# -- quantization ----------------------------------------------------------------------------------

# the range of each quantized dtype's integer values, for zero points and quant_min / quant_max
QUANT_RANGES = {"quint8": (0, 255), "qint8": (-128, 127), "qint32": (-(2**31), 2**31 - 1)}
_qdtypes = memo.sampled_from(tuple(QUANT_RANGES))
_quant_scales = memo.sampled_from((0.1, 0.02, 0.5, 1.0))


def _qparams(ctx, n: int, *, scale_dtype: str, point_dtype: str, label: str, qdtype: str = "quint8"):
    """Per-channel scales (> 0) and zero points (within `qdtype`'s range) for `n` channels."""
    lo, hi = QUANT_RANGES[qdtype]
    scales = draw_tensor(
        ctx.draw,
        dtype=scale_dtype,
        shape=(n,),
        values="positive",
        low=0.01,
        high=1.0,
        layout="contiguous",
        label=f"{label} scales",
    )
    points = draw_tensor(
        ctx.draw,
        dtype=point_dtype,
        shape=(n,),
        values="index",
        low=max(lo, -100),
        high=min(hi, 100),
        layout="contiguous",
        label=f"{label} zero points",
    )
    return scales, points


@family("quantize_per_tensor", "quantize_per_channel", "empty_affine_quantized", "empty_per_channel_affine_quantized")
def quantize(ctx):
    """A float tensor quantized to a drawn quantized dtype, with valid scales and zero points
    (per tensor: a float and an int, or 0-d tensors; per channel: one of each per channel)."""
    names = _arg_names(ctx)
    qdtype = ctx.draw(_qdtypes, label="quantized dtype")
    ctx.fixed["dtype"] = {"dtype": qdtype}
    lo, hi = QUANT_RANGES[qdtype]
    if "size" in names:  # the empty_* factories
        ctx.shape = tuple(
            ctx.draw(memo.integers(1, 4), label=f"size[{i}]")
            for i in range(ctx.draw(memo.integers(1, 3), label="rank"))
        )
        ctx.fixed["size"] = list(ctx.shape)
    elif "tensors" in names:
        ctx.fixed["tensors"] = [_tensor(ctx, s, label=f"tensors[{i}]") for i, s in enumerate(ctx.list_shapes)]
        ctx.fixed["scales"], ctx.fixed["zero_points"] = _qparams(
            ctx, len(ctx.list_shapes), scale_dtype="float64", point_dtype="int64", label="tensors", qdtype=qdtype
        )
        return
    elif ctx.rank == 0 and "axis" in names:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
    if "self" in names:
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    axis = None
    if "axis" in names:
        axis = ctx.draw(memo.integers(0, ctx.rank - 1), label="axis")
        ctx.fixed["axis"] = axis
        ctx.fixed["scales"], ctx.fixed["zero_points"] = _qparams(
            ctx, ctx.shape[axis], scale_dtype="float64", point_dtype="int64", label="channel", qdtype=qdtype
        )
    elif "scale" in names and next(a.type for a in ctx.op.arguments if a.name == "scale").startswith("Tensor"):
        scale, point = _qparams(ctx, 1, scale_dtype="float32", point_dtype="int64", label="tensor", qdtype=qdtype)
        ctx.fixed["scale"], ctx.fixed["zero_point"] = (
            dataclasses.replace(scale, shape=()),
            dataclasses.replace(point, shape=()),
        )
    elif "scale" in names:
        ctx.fixed["scale"] = ctx.draw(_quant_scales, label="scale")
        ctx.fixed["zero_point"] = ctx.draw(memo.integers(max(lo, -100), min(hi, 100)), label="zero_point")
    if ctx.op.variant == "out":
        # the out must be quantized like the result: the same dtype and, per channel, the same axis
        ctx.fixed["out"] = TensorSpec(shape=ctx.shape if axis is not None else (0,), dtype=qdtype, scale=1.0, axis=axis)


def _quantized_range(ctx) -> tuple[str, tuple[int, int]]:
    """A quantized dtype and its [quant_min, quant_max] (the fake-quantize kernels take either)."""
    qdtype = ctx.draw(memo.sampled_from(("quint8", "qint8")), label="quantized range")
    return qdtype, QUANT_RANGES[qdtype]


@family(
    "fake_quantize_per_channel_affine",
    "fake_quantize_per_channel_affine_cachemask",
    "fake_quantize_learnable_per_channel_affine",
)
def fake_quantize_per_channel(ctx):
    """Per-channel scales (> 0) and zero points within [quant_min, quant_max] along a drawn axis;
    the learnable variant takes float zero points."""
    learnable = "learnable" in ctx.op.base_name
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    axis = ctx.draw(memo.integers(0, ctx.rank - 1), label="axis")
    qdtype, (lo, hi) = _quantized_range(ctx)
    ctx.fixed.update(axis=axis, quant_min=lo, quant_max=hi)
    ctx.fixed["scale"], ctx.fixed["zero_point"] = _qparams(
        ctx,
        ctx.shape[axis],
        scale_dtype="float32",
        point_dtype="float32" if learnable else "int32",
        label="channel",
        qdtype=qdtype,
    )


@family("fake_quantize_learnable_per_tensor_affine")
def fake_quantize_learnable_per_tensor(ctx):
    """What torch.ao's _LearnableFakeQuantize passes (torch/ao/quantization/_learnable_fake_quantize.py):
    a one-element float32 scale (> 0) and zero point (an integer within [quant_min, quant_max],
    as the kernel checks), and the range of a quantized dtype; the backward gets self's gradient."""
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    qdtype, (lo, hi) = _quantized_range(ctx)
    ctx.fixed.update(quant_min=lo, quant_max=hi)
    ctx.fixed["scale"], ctx.fixed["zero_point"] = _qparams(
        ctx, 1, scale_dtype="float32", point_dtype="float32", label="tensor", qdtype=qdtype
    )


@family("fake_quantize_per_tensor_affine_cachemask_tensor_qparams")
def fake_quantize_cachemask_tensor_qparams(ctx):
    """What fake_quantize_per_tensor_affine.tensor_qparams passes its kernel
    (FakeQuantPerTensorAffine.cpp): one-element float32 scale (> 0) and int32 zero point within
    [quant_min, quant_max], a one-element int64 fake_quant_enabled flag, a quantized dtype's
    range; drawn apart, the one-element tensors had more elements ("a Tensor with N elements
    cannot be converted to Scalar"), valid only as the simplest case."""
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    qdtype, (lo, hi) = _quantized_range(ctx)
    ctx.fixed.update(quant_min=lo, quant_max=hi)
    ctx.fixed["scale"], ctx.fixed["zero_point"] = _qparams(
        ctx, 1, scale_dtype="float32", point_dtype="int32", label="tensor", qdtype=qdtype
    )
    ctx.fixed["fake_quant_enabled"] = _ints_spec((ctx.draw(memo.integers(0, 1), label="fake_quant_enabled"),))


@family(
    "fused_moving_avg_obs_fq_helper", "fused_moving_avg_obs_fq_helper_functional", "fused_moving_avg_obs_fake_quant"
)
def fused_moving_avg_obs_fq(ctx):
    """The state torch.ao's FusedMovingAvgObsFakeQuantize passes (torch/ao/quantization/fake_quantize.py):
    on/off flags as one-element int64 tensors; per tensor, ch_axis -1, 0-d running min and max,
    a one-element scale and zero point; per channel (per_row_fake_quant, which the kernel takes
    on axis 0 only), one min, max, scale and zero point per row. The running range is finite with
    min <= max, as observed data leaves it (FusedObsFakeQuant.cpp checks ch_axis < self.dim())."""
    per_row = ctx.draw(memo.booleans(), label="per_row_fake_quant")
    # non-empty (the observer's aminmax has no identity); per row, a weight of two dims or more
    # (the kernel flattens the dims after the first)
    ctx.shape = tuple(max(1, s) for s in ctx.shape)
    while per_row and ctx.rank < 2:
        ctx.shape = (*ctx.shape, ctx.draw(memo.integers(1, 4), label=f"size {ctx.rank}"))
    n = ctx.shape[0] if per_row else 1
    state = (n,) if per_row else ()
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    # the observing step reads self as float32 only ("expected scalar type Float but found
    # BFloat16"): in the other cells the observer is off, and fake quantization alone runs
    observe = ctx.draw(memo.integers(0, 1), label="observer_on") if ctx.dtype == "float32" else 0
    if observe:
        # the observer turns self's range into qparams: NaN or inf there gives a zero point
        # outside [quant_min, quant_max], which the kernel rejects, so an observed self is finite
        ctx.fixed["self"] = dataclasses.replace(ctx.fixed["self"], edges=None)
    ctx.fixed["observer_on"] = _ints_spec((observe,))
    ctx.fixed["fake_quant_on"] = _ints_spec((ctx.draw(memo.integers(0, 1), label="fake_quant_on"),))
    # finite (no stress edge but subnormals and zeros: the qparams come from the range even with the observer off)
    low, high = (
        draw_tensor(
            ctx.draw, dtype="float32", shape=state, values="nonnegative", layout="contiguous", label=f"running {x}"
        )
        for x in ("min", "max")
    )
    qdtype, (lo, hi) = _quantized_range(ctx)
    scale, point = _qparams(ctx, n, scale_dtype="float32", point_dtype="int32", label="state", qdtype=qdtype)
    ctx.fixed.update(
        # -min and max: a range around zero (min <= max)
        # in their own band: a stress case's magnitudes (apart columns) would put min above max
        running_min=dataclasses.replace(low, low=-1.0, high=0.0, magnitude="", edges=None),
        running_max=dataclasses.replace(high, magnitude="", edges=None),
        scale=scale,
        zero_point=point,
        averaging_const=ctx.draw(memo.sampled_from((0.01, 0.5, 1.0)), label="averaging_const"),
        quant_min=lo,
        quant_max=hi,
        ch_axis=0 if per_row else -1,
        per_row_fake_quant=per_row,
        symmetric_quant=ctx.draw(memo.booleans(), label="symmetric_quant"),
    )


def _ints_spec(values, dtype: str = "int64") -> TensorSpec:
    return TensorSpec(shape=(len(values),), dtype=dtype, data=tuple(values))


@family("make_per_tensor_quantized_tensor", "make_per_channel_quantized_tensor")
def make_quantized(ctx):
    """Integer values reinterpreted as quantized (uint8 as quint8, int8 as qint8, int32 as
    qint32) with valid scales and zero points; a quantized out of the same dtype."""
    qdtype = next((q for q, storage in QUANTIZED_STORAGE.items() if storage == ctx.dtype), None)
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    if qdtype is None:
        return  # not an integer storage: the reference rejects it
    lo, hi = QUANT_RANGES[qdtype]
    axis = None
    if "axis" in _arg_names(ctx):
        axis = ctx.draw(memo.integers(0, ctx.rank - 1), label="axis")
        ctx.fixed["axis"] = axis
        ctx.fixed["scale"], ctx.fixed["zero_point"] = _qparams(
            ctx, ctx.shape[axis], scale_dtype="float64", point_dtype="int64", label="channel", qdtype=qdtype
        )
    else:
        ctx.fixed["scale"] = ctx.draw(_quant_scales, label="scale")
        ctx.fixed["zero_point"] = ctx.draw(memo.integers(max(lo, -100), min(hi, 100)), label="zero_point")
    if ctx.op.variant == "out":
        ctx.fixed["out"] = TensorSpec(shape=ctx.shape if axis is not None else (0,), dtype=qdtype, scale=1.0, axis=axis)


@family("int_mm")
def int_mm(ctx):
    """int8 matrices in the int32 cell, the result's dtype (no default cell is int8: in the others
    the cell's dtype, which the reference rejects); the out= overload does not resize its out,
    which must be (n, m) int32."""
    int32 = ctx.dtype == "int32"
    if int32:
        ctx.dtype = "int8"
    symbolic(ctx, _MM)
    if int32:
        ctx.dtype = "int32"
    if ctx.op.variant == "out":
        ctx.fixed["out"] = TensorSpec(shape=(ctx.shape[0], ctx.fixed["mat2"].shape[1]), dtype="int32")


@family("scaled_mm")
def scaled_mm(ctx):
    """float8 (e4m3) matrices (n, k) x (k, m), the second column-major as every kernel requires,
    with per-tensor float32 scales; the result is in the cell's dtype (out_dtype), so the
    floating cells hold the valid cases."""
    n, k, m = (ctx.draw(memo.integers(1, 4), label=x) for x in ("n", "k", "m"))
    ctx.shape = (n, k)
    ctx.fixed["self"] = draw_tensor(
        ctx.draw, dtype="float8_e4m3fn", shape=(n, k), values="small", layout="contiguous", label="self"
    )
    ctx.fixed["mat2"] = draw_tensor(
        ctx.draw, dtype="float8_e4m3fn", shape=(k, m), values="small", layout="transposed", label="mat2"
    )
    for name in ("scale_a", "scale_b"):
        ctx.fixed[name] = draw_tensor(
            ctx.draw, dtype="float32", shape=(), values="positive", layout="contiguous", label=name
        )
    ctx.fixed.update(bias=None, scale_result=None, use_fast_accum=False)
    ctx.fixed["out_dtype"] = {"dtype": ctx.dtype}


@family("scaled_mm_v2")
def scaled_mm_v2(ctx):
    """_scaled_mm's float8 operands, with the v2 form's scales as lists and a recipe per operand
    (torch.nn.functional.scaled_mm builds them): the CPU kernel takes tensor-wise scaling (one
    float32 scale each) or row-wise scaling ((n, 1) and (1, m) contiguous float32 scales), and no
    swizzle (ScaledBlas.cpp's _scaled_mm_cpu_v2_out). ScalingType and SwizzleType are
    torch.nn.functional's enums: TensorWise 0, RowWise 1, NO_SWIZZLE 0."""
    scaled_mm(ctx)
    n, m = ctx.shape[0], ctx.fixed["mat2"].shape[1]
    rowwise = ctx.draw(memo.booleans(), label="row-wise scaling")
    shapes = ((n, 1), (1, m)) if rowwise else ((), ())
    for name, shape in zip(("scale_a", "scale_b"), shapes):
        ctx.fixed[name] = [
            draw_tensor(ctx.draw, dtype="float32", shape=shape, values="positive", layout="contiguous", label=name)
        ]
    recipe = 1 if rowwise else 0
    del ctx.fixed["scale_result"]
    ctx.fixed.update(recipe_a=[recipe], recipe_b=[recipe], swizzle_a=[0], swizzle_b=[0], contraction_dim=[])


@family("weight_int8pack_mm")
def weight_int8pack_mm(ctx):
    """self (M, K) times int8 weights (N, K)^T, scaled per output channel by scales (N,)."""
    m, n, k = (ctx.draw(memo.integers(1, 4), label=x) for x in ("m", "n", "k"))
    if ctx.dtype in ("float16", "bfloat16"):
        # torch 2.13's CPU kernel kills the process (no error) in half precision for a K that is
        # not a multiple of 8, which left the cell no valid case; K = 8 to 32 does run. (A weight
        # at an odd storage offset still kills it: that crash is a finding, so layouts stay drawn.)
        k *= 8
    ctx.shape = (m, k)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["mat2"] = _tensor(ctx, (n, k), dtype="int8", label="mat2")
    ctx.fixed["scales"] = _tensor(ctx, (n,), values="positive", label="scales")


@family("fbgemm_pack_quantized_matrix")
def fbgemm_pack_quantized_matrix(ctx):
    """An int8 weight matrix (N, K), and for the .KN form its K and N (QuantizedLinear.cpp)."""
    n, k = (ctx.draw(memo.integers(1, 4), label=x) for x in ("n", "k"))
    ctx.shape = (n, k)
    ctx.fixed["input"] = _tensor(ctx, (n, k), dtype="int8", label="input")
    if "K" in _arg_names(ctx):
        ctx.fixed["K"] = k
        ctx.fixed["N"] = n


def _int4_weight(ctx):
    """A 4-bit weight as torch.ao's 4-bit linear packs it: out_features n, in_features k (even), a
    block size g, k itself or 32 with k a multiple of it (the CPU packing's "Group size should be
    multiple of 32, in_features"); weights (n, k/2) uint8 (two 4-bit values a byte), scales (n, k/g)."""
    n = ctx.draw(memo.integers(1, 3), label="out features")
    if ctx.draw(memo.booleans(), label="blocks of 32"):
        blocks = ctx.draw(memo.integers(1, 2), label="blocks")
        k, g = 32 * blocks, 32
    else:
        k = 2 * ctx.draw(memo.integers(1, 4), label="in features / 2")
        g, blocks = k, 1
    weights = draw_tensor(
        ctx.draw, dtype="uint8", shape=(n, k // 2), values="real", layout="contiguous", label="weights"
    )
    scales = draw_tensor(
        ctx.draw, dtype="float32", shape=(n, blocks), values="positive", layout="contiguous", label="scales_zeros"
    )
    return n, k, g, weights, scales


@family("dyn_quant_pack_4bit_weight")
def dyn_quant_pack_4bit_weight(ctx):
    n, k, g, weights, scales = _int4_weight(ctx)
    ctx.shape = weights.shape
    ctx.fixed.update(weights=weights, scales_zeros=scales, bias=None, block_size=g, in_features=k, out_features=n)


@family("dyn_quant_matmul_4bit")
def dyn_quant_matmul_4bit(ctx):
    """packed_weights made by _dyn_quant_pack_4bit_weight for the same block size and features,
    the only producer (test_linalg.py's test__dyn_quant_matmul_4bit); arbitrary floats as packed
    weights divide by a zero block count (SIGFPE: audit)."""
    import torch

    n, k, g, weights, scales = _int4_weight(ctx)
    real_w, real_s = (s.materialize(lambda t: t) for s in (weights, scales))
    packed = torch.ops.aten._dyn_quant_pack_4bit_weight(real_w, real_s, None, g, k, n)
    m = ctx.draw(memo.integers(1, 3), label="rows")
    ctx.shape = (m, k)
    ctx.fixed["inp"] = _tensor(ctx, (m, k), label="inp")
    ctx.fixed["packed_weights"] = TensorSpec(
        shape=tuple(packed.shape), dtype=str(packed.dtype).removeprefix("torch."), data=tuple(packed.flatten().tolist())
    )
    ctx.fixed.update(block_size=g, in_features=k, out_features=n)


def _int4_rows(ctx, n: int, k: int) -> TensorSpec:
    """An (n, k) int32 weight of 4-bit values (0 to 15), as the int4 packing takes it."""
    return draw_tensor(
        ctx.draw, dtype="int32", shape=(n, k), values="index", low=0, high=16, layout="contiguous", label="int4 weight"
    )


@family("convert_weight_to_int4pack_for_cpu")
def convert_weight_to_int4pack(ctx):
    """An (N, K) int32 weight of 4-bit values with N a multiple of 16 and K even, as the CPU
    packing requires ("expect N to be dividable by 16", "expect weight to be 2D tensor")."""
    n = 16 * ctx.draw(memo.integers(1, 2), label="N / 16")
    k = 2 * ctx.draw(memo.integers(1, 4), label="K / 2")
    ctx.shape = (n, k)
    ctx.fixed["self"] = _int4_rows(ctx, n, k)
    ctx.fixed["innerKTiles"] = ctx.draw(memo.sampled_from((2, 4, 8)), label="innerKTiles")


@family("weight_int4pack_mm_for_cpu")
def weight_int4pack_mm(ctx):
    """self (M, K) times a weight packed by _convert_weight_to_int4pack_for_cpu (its only
    producer), in groups of qGroupSize 32 or 64 along K, with per-group scales and zeros
    (K / group, N, 2) of self's dtype (test_linalg.py's test__int4_mm)."""
    import torch

    n = 16
    group = ctx.draw(memo.sampled_from((32, 64)), label="qGroupSize")
    k = group * ctx.draw(memo.integers(1, 2), label="groups")
    weight = _int4_rows(ctx, n, k)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(weight.materialize(lambda t: t), 1)
    m = ctx.draw(memo.integers(1, 3), label="M")
    ctx.shape = (m, k)
    # contiguous: the kernel checks it ("expect A to be contiguous"), so other layouts only meet that check
    ctx.fixed["self"] = draw_tensor(
        ctx.draw, dtype=ctx.dtype, shape=(m, k), values=ctx.values or "real", layout="contiguous", label="self"
    )
    ctx.fixed["mat2"] = TensorSpec(shape=tuple(packed.shape), dtype="uint8", data=tuple(packed.flatten().tolist()))
    ctx.fixed["qGroupSize"] = group
    ctx.fixed["qScaleAndZeros"] = draw_tensor(
        ctx.draw,
        dtype=ctx.dtype,
        shape=(k // group, n, 2),
        values="positive",
        layout="contiguous",
        label="qScaleAndZeros",
    )


@family("fake_quantize_per_channel_affine_cachemask_backward", "fake_quantize_per_tensor_affine_cachemask_backward")
def fake_quantize_cachemask_backward(ctx):
    """The gradient and the forward's cached bool mask, of one shape ("`mask` and `dY` are not the
    same size", FakeQuantPerChannelAffine.cpp / FakeQuantPerTensorAffine.cpp): the per-channel
    backward went through its forward's builder, which draws neither."""
    ctx.fixed["grad"] = _tensor(ctx, ctx.shape, label="grad")
    ctx.fixed["mask"] = draw_tensor(ctx.draw, dtype="bool", shape=ctx.shape, label="mask")

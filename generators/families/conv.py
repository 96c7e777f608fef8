"""Convolution, pooling, upsampling, interpolation and padding: spatial ranks and per-dim lists."""

from __future__ import annotations

import re

from generators import memo
from generators.argtypes import list_size
from generators.case import TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.strategies import draw_tensor

# -- convolution, pooling, upsampling, padding --------------------------------------------------------


def _spatial_rank(ctx, default=None) -> int:
    """The number of spatial dims: the op's name says it (conv2d), or its schema does, with one
    fixed length for its per-dim lists (_nnpack_spatial_convolution's SymInt[2] padding: a 4-d
    input only, "NNPack convolutionOutput expects 4D input Tensor"), or it is drawn."""
    m = re.search(r"([123])d", ctx.op.base_name)
    if m:
        return int(m.group(1))
    fixed = {list_size(a.type) for a in ctx.op.arguments if a.name in _PER_DIM_LISTS} - {None}
    if len(fixed) == 1:
        return fixed.pop()
    return default or ctx.draw(memo.integers(1, 3), label="spatial dims")


_PER_DIM_LISTS = ("padding", "stride", "dilation", "kernel_size", "output_padding")


def _list_arg(ctx, name, values):
    """Set an int-list argument if the op has it, sized to its schema length when fixed."""
    arg = next((a for a in ctx.op.arguments if a.name == name), None)
    if arg is None:
        return
    if not arg.type.startswith(("int", "SymInt")):
        return
    if "[]" in arg.type or "[" not in arg.type:
        ctx.fixed[name] = list(values) if "[" in arg.type else values[0]
    else:
        ctx.fixed[name] = list(values)


@family(
    "convolution",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "mkldnn_convolution",
    "slow_conv3d",
    "slow_conv3d_forward",
    "thnn_conv2d",
    "slow_conv_transpose2d",
    "slow_conv_transpose3d",
    "slow_conv2d_forward",
    "slow_conv_dilated2d",
    "slow_conv_dilated3d",
    "convolution_mode",
    "conv_depthwise2d",
    "conv_tbc",
    "nnpack_spatial_convolution",
)
def convolution(ctx):
    """input (N, C_in, *spatial), weight (C_out, C_in / groups, *kernel) or transposed (C_in, C_out / groups, *kernel)."""
    names = _arg_names(ctx)
    base = ctx.op.base_name.lstrip("_")
    d = _spatial_rank(ctx, 2 if "2d" in base else None)
    transposed = "transpose" in base
    if "transposed" in names:
        transposed = ctx.draw(memo.booleans(), label="transposed")
        ctx.fixed["transposed"] = transposed
    groups = ctx.draw(memo.integers(1, 2), label="groups") if "groups" in names else 1
    cin = groups * ctx.draw(memo.integers(1, 2), label="c_in per group")
    cout = groups * ctx.draw(memo.integers(1, 2), label="c_out per group")
    n = ctx.draw(memo.integers(1, 2), label="batch")
    k = [ctx.draw(memo.integers(1, 3), label=f"kernel[{i}]") for i in range(d)]
    stride = [ctx.draw(memo.integers(1, 2), label=f"stride[{i}]") for i in range(d)]
    dilation = [ctx.draw(memo.integers(1, 2), label=f"dilation[{i}]") for i in range(d)]
    padding = [ctx.draw(memo.integers(0, 1), label=f"padding[{i}]") for i in range(d)]
    if base.startswith("nnpack"):
        # NNPACK takes padding smaller than the kernel only (nnp_status_unsupported_padding:
        # "NNPACK SpatialConvolution_updateOutput failed")
        padding = [min(p, k[i] - 1) for i, p in enumerate(padding)]
    spatial = [dilation[i] * (k[i] - 1) + 1 + ctx.draw(memo.integers(0, 3), label=f"extent[{i}]") for i in range(d)]
    if base in ("conv_tbc", "conv_tbc_backward"):
        # time, batch, channels; weight (kernel, C_in, C_out). The backward takes the input as
        # input and, as self, the gradient of the output: T + 2 * pad - kernel + 1 steps
        # (ConvolutionTBC.cpp's olen; drawn as the forward's input, one case in ten was valid)
        x = _tensor(ctx, (spatial[0], n, cin), label="self")
        ctx.fixed["weight"] = _tensor(ctx, (k[0], cin, cout), label="weight")
        ctx.fixed["bias"] = _tensor(ctx, (cout,), label="bias")
        ctx.fixed["pad"] = padding[0]
        if base == "conv_tbc":
            ctx.fixed["self"] = x
        else:
            ctx.fixed["input"] = x
            steps = spatial[0] + 2 * padding[0] - k[0] + 1
            ctx.fixed["self"] = _tensor(ctx, (steps, n, cout), label="grad")
        return
    in_name = "input" if "input" in names else "self"
    ctx.shape = (n, cin, *spatial)
    ctx.fixed[in_name] = _tensor(ctx, ctx.shape, label=in_name)
    wshape = (cin, cout // groups, *k) if transposed else (cout, cin // groups, *k)
    ctx.fixed["weight"] = _tensor(ctx, wshape, label="weight")
    if "bias" in names:
        ctx.fixed["bias"] = None if ctx.draw(memo.booleans(), label="no bias") else _tensor(ctx, (cout,), label="bias")
    if "groups" in names:
        ctx.fixed["groups"] = groups
    _list_arg(ctx, "kernel_size", k)
    _list_arg(ctx, "stride", stride)
    _list_arg(ctx, "dilation", dilation)
    pad_arg = next((a for a in ctx.op.arguments if a.name == "padding"), None)
    if pad_arg is not None and pad_arg.type.startswith("str"):
        ctx.fixed["padding"] = "valid"
    else:
        _list_arg(ctx, "padding", padding)
    _list_arg(ctx, "output_padding", [0] * d)


@family(
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "mkldnn_max_pool2d",
    "mkldnn_max_pool3d",
    "quantized_max_pool1d",
    "quantized_max_pool2d",
    "quantized_max_pool3d",
    "lp_pool1d",
    "lp_pool2d",
    "lp_pool3d",
)
def pooling(ctx):
    d = _spatial_rank(ctx)
    n = ctx.draw(memo.integers(1, 2), label="batch")
    c = ctx.draw(memo.integers(1, 3), label="channels")
    k = [ctx.draw(memo.integers(1, 3), label=f"kernel[{i}]") for i in range(d)]
    stride = [ctx.draw(memo.integers(1, 2), label=f"stride[{i}]") for i in range(d)]
    padding = [ctx.draw(memo.integers(0, k[i] // 2), label=f"padding[{i}]") for i in range(d)]
    # dilated windows, and inputs no longer than the window's reach less the padding: the edges
    # where a window lies in the padding alone, whose index must still name an input element
    # (a max-pooling index past the input, a divisor of 0 positions)
    dilated = "dilation" in _arg_names(ctx)
    dilation = [ctx.draw(memo.integers(1, 2), label=f"dilation[{i}]") if dilated else 1 for i in range(d)]
    reach = [dilation[i] * (k[i] - 1) + 1 for i in range(d)]
    spatial = [
        max(1, reach[i] - 2 * padding[i]) + ctx.draw(memo.integers(0, 3), label=f"extent[{i}]") for i in range(d)
    ]
    unbatched = ctx.draw(memo.integers(0, 3), label="unbatched") == 0
    ctx.shape = ((c,) if unbatched else (n, c)) + tuple(spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    _list_arg(ctx, "kernel_size", k)
    _list_arg(ctx, "stride", stride)
    _list_arg(ctx, "padding", padding)
    _list_arg(ctx, "dilation", dilation)
    if "divisor_override" in _arg_names(ctx):
        ctx.fixed["divisor_override"] = None


@family(
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "mkldnn_adaptive_avg_pool2d",
)
def adaptive_pooling(ctx):
    d = _spatial_rank(ctx)
    n = ctx.draw(memo.integers(1, 2), label="batch")
    c = ctx.draw(memo.integers(1, 3), label="channels")
    spatial = [ctx.draw(memo.integers(1, 5), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    out = [ctx.draw(memo.integers(1, 3), label=f"output[{i}]") for i in range(d)]
    _list_arg(ctx, "output_size", out)
    if "output_size" not in _arg_names(ctx):
        ctx.fixed["output_size"] = out  # the forward's, for a backward's indices (see generators.backward)


@family("fractional_max_pool2d", "fractional_max_pool3d")
def fractional_pooling(ctx):
    d = _spatial_rank(ctx)
    n, c = 1, ctx.draw(memo.integers(1, 2), label="channels")
    # output + kernel - 1 must not exceed the input (2d), must stay below it (3d)
    spatial = [ctx.draw(memo.integers(3 if d == 2 else 4, 5), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    _list_arg(ctx, "kernel_size", [2] * d)
    _list_arg(ctx, "output_size", [2] * d)
    ctx.fixed["random_samples"] = _tensor(ctx, (n, c, d), values="probability", label="random_samples")


@family("max_unpool2d", "max_unpool3d")
def max_unpooling(ctx):
    """The values and indices of a max pooling with non-overlapping windows (kernel = stride), so
    that no two values go to the same place; output_size is the pooled input's."""
    import torch

    d = _spatial_rank(ctx)
    n = ctx.draw(memo.integers(1, 2), label="batch")
    c = ctx.draw(memo.integers(1, 2), label="channels")
    k = [ctx.draw(memo.integers(1, 2), label=f"kernel[{i}]") for i in range(d)]
    spatial = [
        k[i] * ctx.draw(memo.integers(1, 3), label=f"windows[{i}]")
        + ctx.draw(memo.integers(0, k[i] - 1), label=f"rest[{i}]")
        for i in range(d)
    ]
    unbatched = ctx.draw(memo.integers(0, 3), label="unbatched") == 0
    lead = (c,) if unbatched else (n, c)
    pooled_input = _tensor(ctx, lead + tuple(spatial), dtype="float32", values="real", label="pooled input")
    pool = torch.ops.aten.max_pool2d_with_indices if d == 2 else torch.ops.aten.max_pool3d_with_indices
    # the indices are a function of the values alone: pool a contiguous copy (max_pool3d_with_indices
    # rejects some strided inputs, 'Unsupported memory format')
    _, indices = pool(pooled_input.materialize(lambda t: t).contiguous(), k, k)
    ctx.shape = tuple(indices.shape)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["indices"] = TensorSpec(shape=ctx.shape, dtype="int64", data=tuple(indices.flatten().tolist()))
    ctx.fixed["output_size"] = spatial
    _list_arg(ctx, "stride", k)
    _list_arg(ctx, "padding", [0] * d)


@family(
    "upsample_nearest1d",
    "upsample_nearest2d",
    "upsample_nearest3d",
    "upsample_nearest_exact1d",
    "upsample_nearest_exact2d",
    "upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "upsample_bicubic2d",
    "upsample_trilinear3d",
    "upsample_bilinear2d_aa",
    "upsample_bicubic2d_aa",
    "upsample_lanczos2d_aa",
)
def upsampling(ctx):
    d = _spatial_rank(ctx)
    names = _arg_names(ctx)
    n = ctx.draw(memo.integers(1, 2), label="batch")
    c = ctx.draw(memo.integers(1, 3), label="channels")
    spatial = [ctx.draw(memo.integers(1, 4), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    in_name = "input" if "input" in names else "self"
    ctx.fixed[in_name] = _tensor(ctx, ctx.shape, label=in_name)
    out = [ctx.draw(memo.integers(1, 6), label=f"output[{i}]") for i in range(d)]
    if "scale_factors" in names:
        if ctx.draw(memo.booleans(), label="by scale"):
            ctx.fixed["output_size"] = None
            ctx.fixed["scale_factors"] = [
                ctx.draw(memo.sampled_from([2.0, 0.5, 1.5]), label=f"scale[{i}]") for i in range(d)
            ]
        else:
            ctx.fixed["output_size"] = out
            ctx.fixed["scale_factors"] = None
    else:
        _list_arg(ctx, "output_size", out)
    if "input_size" in names:
        ctx.fixed["input_size"] = list(ctx.shape)
    for name in names:
        if name.startswith("scales"):
            ctx.fixed[name] = None


@family(
    "reflection_pad1d",
    "reflection_pad2d",
    "reflection_pad3d",
    "replication_pad1d",
    "replication_pad2d",
    "replication_pad3d",
    "pad_circular",
    "pad_enum",
    "constant_pad_nd",
    "pad",
)
def padding_modes(ctx):
    """Reflection pads must be smaller than the input; the input is (N, C, *spatial) or unbatched."""
    base = ctx.op.base_name.lstrip("_")
    d = _spatial_rank(ctx, None if base.startswith(("reflection", "replication")) else 1)
    n = ctx.draw(memo.integers(1, 2), label="batch")
    c = ctx.draw(memo.integers(1, 2), label="channels")
    spatial = [ctx.draw(memo.integers(2, 4), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self", writable=False)
    pads = []
    for i in range(d):
        limit = spatial[d - 1 - i] - 1
        pads += [
            ctx.draw(memo.integers(0, limit), label=f"pad[{2 * i}]"),
            ctx.draw(memo.integers(0, limit), label=f"pad[{2 * i + 1}]"),
        ]
    for name in ("padding", "pad"):
        if name in _arg_names(ctx):
            ctx.fixed[name] = pads
    if base == "pad" and "mode" in _arg_names(ctx):
        ctx.fixed["mode"] = ctx.draw(memo.sampled_from(["constant", "reflect", "replicate", "circular"]), label="mode")
        if ctx.fixed["mode"] != "constant":
            ctx.fixed["value"] = None


_INTERPOLATE_MODES = {
    1: ("nearest", "linear", "area"),
    2: ("nearest", "bilinear", "bicubic", "area"),
    3: ("nearest", "trilinear", "area"),
}


@family("interpolate", "upsample_nearest", "upsample_bilinear")
def interpolate(ctx):
    """TorchScript's F.interpolate builtins: an (N, C, *spatial) input and exactly one of size
    and scale_factor (an int or float, or one per spatial dim, as the overload types them)."""
    names = {a.name: a for a in ctx.op.arguments}
    base = ctx.op.base_name.lstrip("_")
    d = 2 if base == "upsample_bilinear" else ctx.draw(memo.integers(1, 3), label="spatial dims")
    n, c = ctx.draw(memo.integers(1, 2), label="batch"), ctx.draw(memo.integers(1, 2), label="channels")
    ctx.shape = (n, c, *(ctx.draw(memo.integers(1, 4), label=f"extent[{i}]") for i in range(d)))
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    by_size = ctx.draw(memo.booleans(), label="by size")
    size_list = names["size"].type.startswith("int[")
    scale_type = names["scale_factor"].type
    if by_size:
        sizes = [ctx.draw(memo.integers(1, 5), label=f"size[{i}]") for i in range(d)]
        ctx.fixed["size"], ctx.fixed["scale_factor"] = sizes if size_list else sizes[0], None
    else:
        # halving needs two elements or more in every dim, or the output would be empty
        floats = memo.sampled_from((2.0, 0.5, 1.5) if min(ctx.shape[2:]) >= 2 else (2.0, 1.5))
        scales = [
            ctx.draw(memo.integers(1, 2) if scale_type.startswith("int") else floats, label=f"scale[{i}]")
            for i in range(d)
        ]
        ctx.fixed["size"], ctx.fixed["scale_factor"] = None, scales if "[" in scale_type else scales[0]
    if "mode" in names:
        mode = ctx.draw(memo.sampled_from(_INTERPOLATE_MODES[d]), label="mode")
        ctx.fixed["mode"] = mode
        linear = mode in ("linear", "bilinear", "bicubic", "trilinear")
        ctx.fixed["align_corners"] = ctx.draw(memo.booleans(), label="align_corners") if linear else None
        ctx.fixed["antialias"] = False


def _conv_output_shape(ctx, in_name: str = "self") -> tuple[int, ...]:
    """The forward convolution's output shape for the arguments `convolution` drew (the formula
    of ConvUtils.h's conv_output_size / conv_input_size, for plain and transposed convolutions)."""
    f = ctx.fixed
    x, w = f[in_name].shape, f["weight"].shape
    d = len(x) - 2
    per_dim = lambda name, default: list(f[name]) if isinstance(f.get(name), list) else [f.get(name, default)] * d  # noqa: E731
    s, p, dil, op = per_dim("stride", 1), per_dim("padding", 0), per_dim("dilation", 1), per_dim("output_padding", 0)
    if f.get("transposed", False):
        cout = w[1] * f.get("groups", 1)
        spatial = [(x[2 + i] - 1) * s[i] - 2 * p[i] + dil[i] * (w[2 + i] - 1) + op[i] + 1 for i in range(d)]
    else:
        cout = w[0]
        spatial = [(x[2 + i] + 2 * p[i] - dil[i] * (w[2 + i] - 1) - 1) // s[i] + 1 for i in range(d)]
    return (x[0], cout, *spatial)


@family("slow_conv2d_backward")
def slow_conv2d_backward(ctx):
    """What convolution_backward passes the slow (im2col) 2-d kernel (ConvUtils / Convolution.cpp):
    a 4-d input, weight (C_out, C_in, kh, kw), and the gradient of the forward's output shape; a
    gradient of another shape is rejected ("Expected ND input tensor") or, with the forward's
    guess of the main shape, never matches."""
    convolution(ctx)
    # contiguous, as convolution_backward passes them (Convolution.cpp, Slow2d: `grad_output.contiguous(),
    # input.contiguous(), weight.contiguous()`): an expanded weight or a channels-last input gives
    # a weight gradient the kernel refuses ("grad_weight must be contiguous")
    for name in ("self", "weight"):
        spec = ctx.fixed[name]
        ctx.fixed[name] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=spec.shape, layout="contiguous", label=name)
    shape = _conv_output_shape(ctx)
    ctx.fixed["grad_output"] = draw_tensor(
        ctx.draw, dtype=ctx.dtype, shape=shape, layout="contiguous", label="grad_output"
    )


@family("convolution_double_backward")
def convolution_double_backward(ctx):
    """convolution_backward's own derivative (derivatives.yaml: `_convolution_double_backward(
    grads[0], grads[1], grads[2], grad_output, weight, input, ...)`): the incoming gradients of
    the input, the weight and the bias (each may be undefined), gO of the forward's output shape,
    and the forward's stride, padding, dilation, transposition and groups."""
    convolution(ctx)
    f = ctx.fixed
    if f["transposed"]:
        # a transposed convolution's padding trims its output, which a small input may not have
        f["padding"] = [0] * len(f["padding"])
    f["gO"] = _tensor(ctx, _conv_output_shape(ctx), label="gO")
    cout = f["gO"].shape[1]
    for name, shape in (("ggI", f["self"].shape), ("ggW", f["weight"].shape), ("ggb", (cout,))):
        f[name] = None if ctx.draw(memo.integers(0, 3), label=f"no {name}") == 0 else _tensor(ctx, shape, label=name)

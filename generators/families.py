"""Family builders: what a schema cannot say about an op's arguments.

A builder takes the `Context` of a case before the generic argument strategies run and
pre-draws some arguments into `ctx.fixed` (and may change `ctx.shape`). Builders are keyed by
operator base name with leading underscores and a trailing inplace underscore stripped, so
`conv2d`, `_convolution` and `convolution` can share one.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable

_BUILDERS: dict[str, Callable] = {}


def family(*names: str, provides: tuple[str, ...] = ()):
    """Register a builder for the given operator base names."""

    def register(fn):
        fn.provides = provides
        for n in names:
            _BUILDERS[n] = fn
        return fn

    return register


def key(name: str) -> str:
    return name.lstrip("_").removesuffix("_") if name not in _BUILDERS else name


def builder_for(op):
    """The builder for `op`: by name (leading "_" and inplace "_" stripped), else by opdb family."""
    b = _BUILDERS.get(op.base_name)
    if b is None:
        b = _BUILDERS.get(key(op.base_name))
    if b is None and "_backward" in op.base_name:
        # a backward op takes its forward op's arguments: the forward's builder draws them
        fwd = op.base_name.split("_backward", 1)[0]
        b = _BUILDERS.get(fwd) or _BUILDERS.get(key(fwd))
    if b is None:
        b = _FAMILY_BUILDERS.get(getattr(op, "family", ""))
    return b


# -- helpers ---------------------------------------------------------------------------------------

from generators import memo as st  # noqa: E402

from generators.argtypes import dims, draw_index, qscheme  # noqa: E402
from generators.case import QUANTIZED_STORAGE, TensorSpec  # noqa: E402
from generators.strategies import draw_tensor  # noqa: E402


def _tensor(ctx, shape, *, label, dtype=None, values=None, writable=False):
    return draw_tensor(ctx.draw, dtype=dtype or ctx.dtype, shape=tuple(shape), values=values or ctx.values or "real", writable=writable, qscheme=qscheme(ctx), label=label)


def _sub_shape(ctx, shape, *, label, at=None, at_max=4):
    """A shape no larger than `shape` in every dim except `at`, which may be anything up to `at_max`."""
    out = []
    for i, s in enumerate(shape):
        hi = at_max if i == at else s
        out.append(ctx.draw(st.integers(0 if hi == 0 else min(1, hi), hi), label=f"{label}[{i}]"))
    return tuple(out)


def _arg_names(ctx):
    return {a.name for a in ctx.op.arguments}


# -- indexing --------------------------------------------------------------------------------------


@family("gather", "take_along_dim", "scatter", "scatter_add", "scatter_reduce", "gather_backward")
def gather_like(ctx):
    """index has the rank of self, no larger than self in the dims other than `dim`."""
    names = _arg_names(ctx)
    dim = ctx.draw(dims(ctx), label="dim") if "dim" in names else None
    if dim is not None:
        ctx.fixed["dim"] = dim
    d = (dim % ctx.rank) if (dim is not None and ctx.rank) else None
    scatter = "src" in names or "value" in names
    ishape = _sub_shape(ctx, ctx.shape, label="index shape", at=None if scatter else d, at_max=4)
    high = ctx.size(dim) if dim is not None else max(1, ctx.shape and ctx.shape[0] or 1)
    if ctx.op.base_name.startswith("take_along_dim") and dim is None:
        ishape = (ctx.draw(st.integers(0, 4), label="index len"),)
        high = max(1, _numel(ctx.shape))
    for name in ("index", "indices"):
        if name in names:
            ctx.fixed[name] = draw_index(ctx, high=high, shape=ishape, label=name)
    if "src" in names:
        src_type = next(a.type for a in ctx.op.arguments if a.name == "src")
        if src_type.startswith("Tensor"):
            ctx.fixed["src"] = _tensor(ctx, ctx.shape, label="src")


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


@family("index_add", "index_copy", "index_fill", "index_reduce", "index_select", "index_select_backward")
def index_dim_like(ctx):
    """A 1-d index along `dim`; `source` is self with that dim resized to the index length."""
    names = _arg_names(ctx)
    dim = ctx.draw(dims(ctx), label="dim")
    ctx.fixed["dim"] = dim
    n = ctx.draw(st.integers(0, 4), label="index len") if ctx.rank else 1
    ctx.fixed["index"] = draw_index(ctx, high=ctx.size(dim), shape=(n,), label="index")
    if "source" in names:
        shape = list(ctx.shape)
        if shape:
            shape[dim % len(shape)] = n
        ctx.fixed["source"] = _tensor(ctx, shape, label="source")
    if "value" in names and next(a.type for a in ctx.op.arguments if a.name == "value").startswith("Tensor"):
        ctx.fixed["value"] = _tensor(ctx, (), label="value")


@family("masked_fill", "masked_scatter", "masked_select", "masked_fill_backward", "masked_scatter_backward")
def masked_like(ctx):
    from generators.argtypes import broadcast_shapes

    names = _arg_names(ctx)
    shape = ctx.draw(broadcast_shapes(ctx.shape), label="mask shape")
    ctx.fixed["mask"] = _tensor(ctx, shape, dtype="bool", label="mask")
    if "value" in names and next(a.type for a in ctx.op.arguments if a.name == "value").startswith("Tensor"):
        ctx.fixed["value"] = _tensor(ctx, (), label="value")
    if "source" in names:
        ctx.fixed["source"] = _tensor(ctx, ctx.shape, label="source")


@family("index_put", "index_put_impl", "unsafe_index_put", "index", "unsafe_index")
def advanced_indexing(ctx):
    names = _arg_names(ctx)
    if getattr(ctx.op, "family", "") == "torchscript":
        list_member(ctx)
        return
    if "values" in names:
        ctx.fixed["values"] = _tensor(ctx, (), label="values")


@family("take", "put")
def take_like(ctx):
    names = _arg_names(ctx)
    n = ctx.draw(st.integers(0, 4), label="index len")
    high = max(1, _numel(ctx.shape))
    if _numel(ctx.shape) == 0:
        n = 0
    ctx.fixed["index"] = draw_index(ctx, high=high, shape=(n,), label="index")
    if "source" in names:
        ctx.fixed["source"] = _tensor(ctx, (n,), label="source")


# -- symbolic shapes -------------------------------------------------------------------------------


def symbolic(ctx, spec: dict[str, str], *, min_size: int = 1, max_size: int = 4) -> None:
    """Pre-draw the tensors of `spec`, {arg name: "b n k"}: each letter is one size, drawn once.

    A digit is a literal size; ":kind" after the dims sets the value kind ("invertible", "spd",
    "index<letter>" for indices below that size, "pivots"); a leading "?" marks an argument that
    may be None. Arguments the op does not have are skipped, so one spec serves several overloads.
    """
    names = {a.name: a for a in ctx.op.arguments}
    sizes: dict[str, int] = {}

    def size(token: str) -> int:
        digits = token[: len(token) - len(token.lstrip("0123456789"))]
        letter = token[len(digits) :]
        if not letter:
            return int(digits)
        if letter not in sizes:
            sizes[letter] = ctx.draw(st.integers(min_size, max_size), label=f"size {letter}")
        return int(digits or 1) * sizes[letter]

    first = True
    for name, text in spec.items():
        arg = names.get(name)
        if arg is None or not arg.type.startswith("Tensor"):
            continue
        maybe_none = text.startswith("?")
        text = text.lstrip("?")
        dims_text, _, kind = text.partition(":")
        shape = tuple(size(x) for x in dims_text.split())
        if maybe_none and ctx.draw(st.booleans(), label=f"{name} none"):
            ctx.fixed[name] = None
            continue
        if kind.startswith("index"):
            high = size(kind[5:]) if kind[5:] else 1
            ctx.fixed[name] = draw_index(ctx, high=high, shape=shape, label=name)
        elif kind == "pivots":
            ctx.fixed[name] = draw_tensor(ctx.draw, dtype="int32", shape=shape, values="index", low=1, high=shape[-1] + 1 if shape else 2, layout="contiguous", label=name)
        else:
            ctx.fixed[name] = _tensor(ctx, shape, values=kind or None, label=name, writable=arg.is_write)
        if first:
            ctx.shape = shape
            first = False


def table(entries: dict[str, dict[str, str] | list[dict[str, str]]]):
    """Register a `symbolic` builder per op name; a list of specs is a choice of alternatives."""
    for op_name, spec in entries.items():

        def build(ctx, spec=spec):
            chosen = ctx.draw(st.sampled_from(spec), label="shape family") if isinstance(spec, list) else spec
            symbolic(ctx, chosen)

        build.provides = ()
        _BUILDERS[op_name] = build


_MM = {"self": "n k", "mat2": "k m"}
_ADDMM = {"self": "n m", "mat1": "n k", "mat2": "k m"}
table(
    {
        "mm": _MM,
        "bmm": {"self": "b n k", "mat2": "b k m"},
        "addmm": [_ADDMM, {"self": "m", "mat1": "n k", "mat2": "k m"}],
        "addmm_activation": _ADDMM,
        "baddbmm": {"self": "b n m", "batch1": "b n k", "batch2": "b k m"},
        "addbmm": {"self": "n m", "batch1": "b n k", "batch2": "b k m"},
        "addmv": {"self": "n", "mat": "n k", "vec": "k"},
        "addr": {"self": "n m", "vec1": "n", "vec2": "m"},
        "mv": {"self": "n k", "vec": "k"},
        "dot": {"self": "k", "tensor": "k"},
        "vdot": {"self": "k", "other": "k"},
        "outer": {"self": "n", "vec2": "m"},
        "ger": {"self": "n", "vec2": "m"},
        "inner": {"self": "n k", "other": "m k"},
        "linear": {"input": "b k", "weight": "m k", "bias": "?m"},
        "mkldnn_linear": {"self": "b k", "weight": "m k", "bias": "?m"},
        "matmul": [
            {"self": "n k", "other": "k m"},
            {"self": "b n k", "other": "k m"},
            {"self": "k", "other": "k m"},
            {"self": "b n k", "other": "b k m"},
            {"self": "n k", "other": "k"},
        ],
        "bilinear": {"input1": "b i", "input2": "b j", "weight": "o i j", "bias": "?o"},
        "cross": {"self": "n 3", "other": "n 3"},
        "linalg_cross": {"self": "n 3", "other": "n 3"},
        "cdist": {"x1": "b p m", "x2": "b r m"},
        "cdist_forward": {"x1": "b p m", "x2": "b r m"},
        "euclidean_dist": {"x1": "p m", "x2": "r m"},
        "prelu": {"self": "n c", "weight": "c"},
        "prelu_kernel": {"self": "n c", "weight": "c"},
        "cholesky_solve": {"self": "n k", "input2": "n n:invertible"},
        "cholesky_solve_helper": {"self": "n k", "A": "n n:invertible"},
        "linalg_solve": [{"A": "b n n:invertible", "B": "b n k"}, {"A": "n n:invertible", "B": "n"}],
        "linalg_solve_ex": {"A": "b n n:invertible", "B": "b n k"},
        "triangular_solve": {"self": "n k", "A": "n n:invertible"},
        "linalg_solve_triangular": {"self": "n n:invertible", "B": "n k"},
        "lu_solve": {"self": "n k", "LU_data": "n n:invertible", "LU_pivots": "n:pivots"},
        "linalg_lu_solve": {"LU": "n n:invertible", "pivots": "n:pivots", "B": "n k"},
        "lu_unpack": {"LU_data": "n n:invertible", "LU_pivots": "n:pivots"},
        "linalg_lstsq": {"self": "m n", "b": "m k"},
        "orgqr": {"self": "4 2", "input2": "2"},
        "linalg_householder_product": {"input": "4 2", "tau": "2"},
        "ormqr": {"self": "4 2", "input2": "2", "input3": "4 k"},
        "linalg_vecdot": {"x": "n k", "y": "n k"},
        "embedding": {"weight": "v d", "indices": "b:indexv"},
        "embedding_dense_backward": {"grad_output": "b d", "indices": "b:indexv"},
        "histogramdd": {"self": "n 2"},
        "histogramdd_bin_edges": {"self": "n 2"},
        "histogramdd_from_bin_cts": {"self": "n 2"},
        "histogramdd_from_bin_tensors": {"self": "n 2"},
        "quantile": [{"self": "n", "q": "k:probability"}, {"self": "n", "q": ":probability"}],
        "nanquantile": [{"self": "n", "q": "k:probability"}, {"self": "n", "q": ":probability"}],
        "searchsorted": {"sorted_sequence": "n", "self": "k"},
        "bucketize": {"self": "k", "boundaries": "n"},
        "pixel_unshuffle": {"self": "n c 2h 2w"},
        "pixel_shuffle": {"self": "n 4c h w"},
        "view_as_complex": {"self": "n 2"},
        "view_as_complex_copy": {"self": "n 2"},
        "glu_jvp": {"glu": "n k", "x": "n 2k", "dx": "n 2k"},
        "grid_sampler_2d": {"input": "n c h w", "grid": "n h w 2:unit"},
        "grid_sampler_3d": {"input": "n c d h w", "grid": "n d h w 3:unit"},
        "grid_sampler": {"input": "n c h w", "grid": "n h w 2:unit"},
        "gru_cell": {"input": "n i", "hx": "n h", "w_ih": "3h i", "w_hh": "3h h", "b_ih": "?3h", "b_hh": "?3h"},
        "rnn_tanh_cell": {"input": "n i", "hx": "n h", "w_ih": "h i", "w_hh": "h h", "b_ih": "?h", "b_hh": "?h"},
        "rnn_relu_cell": {"input": "n i", "hx": "n h", "w_ih": "h i", "w_hh": "h h", "b_ih": "?h", "b_hh": "?h"},
        "nll_loss": [{"self": "n c", "target": "n:indexc", "weight": "?c"}, {"self": "c", "target": ":indexc", "weight": "?c"}],
        "nll_loss_nd": {"self": "n c", "target": "n:indexc", "weight": "?c"},
        "nll_loss_forward": {"self": "n c", "target": "n:indexc", "weight": "?c"},
        "nll_loss2d": {"self": "n c h w", "target": "n h w:indexc", "weight": "?c"},
        "nll_loss2d_forward": {"self": "n c h w", "target": "n h w:indexc", "weight": "?c"},
        "cross_entropy_loss": [{"self": "n c", "target": "n:indexc", "weight": "?c"}, {"self": "n c", "target": "n c:probability"}],
        "multi_margin_loss": {"self": "n c", "target": "n:indexc", "weight": "?c"},
        "multilabel_margin_loss": {"self": "n c", "target": "n c:indexc"},
        "multilabel_margin_loss_forward": {"self": "n c", "target": "n c:indexc"},
        "binary_cross_entropy": {"self": "n c:probability", "target": "n c:probability", "weight": "?n c"},
        "cosine_embedding_loss": {"input1": "n d", "input2": "n d", "target": "n"},
        "margin_ranking_loss": {"input1": "n", "input2": "n", "target": "n"},
        "hinge_embedding_loss": {"self": "n", "target": "n"},
        "triplet_margin_loss": {"anchor": "n d", "positive": "n d", "negative": "n d"},
    }
)


# -- convolution, pooling, upsampling, padding --------------------------------------------------------


def _spatial_rank(ctx, default=None) -> int:
    m = re.search(r"([123])d", ctx.op.base_name)
    if m:
        return int(m.group(1))
    return default or ctx.draw(st.integers(1, 3), label="spatial dims")


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
    "convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "mkldnn_convolution", "slow_conv3d", "slow_conv3d_forward", "thnn_conv2d", "slow_conv_transpose2d",
    "slow_conv_transpose3d", "slow_conv2d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d",
    "convolution_mode", "conv_depthwise2d", "conv_tbc", "nnpack_spatial_convolution",
)
def convolution(ctx):
    """input (N, C_in, *spatial), weight (C_out, C_in / groups, *kernel) or transposed (C_in, C_out / groups, *kernel)."""
    names = _arg_names(ctx)
    base = ctx.op.base_name.lstrip("_")
    d = _spatial_rank(ctx, 2 if "2d" in base else None)
    transposed = "transpose" in base
    if "transposed" in names:
        transposed = ctx.draw(st.booleans(), label="transposed")
        ctx.fixed["transposed"] = transposed
    groups = ctx.draw(st.integers(1, 2), label="groups") if "groups" in names else 1
    cin = groups * ctx.draw(st.integers(1, 2), label="c_in per group")
    cout = groups * ctx.draw(st.integers(1, 2), label="c_out per group")
    n = ctx.draw(st.integers(1, 2), label="batch")
    k = [ctx.draw(st.integers(1, 3), label=f"kernel[{i}]") for i in range(d)]
    stride = [ctx.draw(st.integers(1, 2), label=f"stride[{i}]") for i in range(d)]
    dilation = [ctx.draw(st.integers(1, 2), label=f"dilation[{i}]") for i in range(d)]
    padding = [ctx.draw(st.integers(0, 1), label=f"padding[{i}]") for i in range(d)]
    spatial = [dilation[i] * (k[i] - 1) + 1 + ctx.draw(st.integers(0, 3), label=f"extent[{i}]") for i in range(d)]
    if base == "conv_tbc":
        # time, batch, channels; weight (kernel, C_in, C_out)
        ctx.fixed["self"] = _tensor(ctx, (spatial[0], n, cin), label="self")
        ctx.fixed["weight"] = _tensor(ctx, (k[0], cin, cout), label="weight")
        ctx.fixed["bias"] = _tensor(ctx, (cout,), label="bias")
        ctx.fixed["pad"] = padding[0]
        return
    in_name = "input" if "input" in names else "self"
    ctx.shape = (n, cin, *spatial)
    ctx.fixed[in_name] = _tensor(ctx, ctx.shape, label=in_name)
    wshape = (cin, cout // groups, *k) if transposed else (cout, cin // groups, *k)
    ctx.fixed["weight"] = _tensor(ctx, wshape, label="weight")
    if "bias" in names:
        ctx.fixed["bias"] = None if ctx.draw(st.booleans(), label="no bias") else _tensor(ctx, (cout,), label="bias")
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
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d", "mkldnn_max_pool2d",
    "mkldnn_max_pool3d", "quantized_max_pool1d", "quantized_max_pool2d", "quantized_max_pool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d",
)
def pooling(ctx):
    d = _spatial_rank(ctx)
    n = ctx.draw(st.integers(1, 2), label="batch")
    c = ctx.draw(st.integers(1, 3), label="channels")
    k = [ctx.draw(st.integers(1, 3), label=f"kernel[{i}]") for i in range(d)]
    stride = [ctx.draw(st.integers(1, 2), label=f"stride[{i}]") for i in range(d)]
    padding = [ctx.draw(st.integers(0, k[i] // 2), label=f"padding[{i}]") for i in range(d)]
    spatial = [k[i] + ctx.draw(st.integers(0, 3), label=f"extent[{i}]") for i in range(d)]
    unbatched = ctx.draw(st.integers(0, 3), label="unbatched") == 0
    ctx.shape = ((c,) if unbatched else (n, c)) + tuple(spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    _list_arg(ctx, "kernel_size", k)
    _list_arg(ctx, "stride", stride)
    _list_arg(ctx, "padding", padding)
    _list_arg(ctx, "dilation", [1] * d)
    if "divisor_override" in _arg_names(ctx):
        ctx.fixed["divisor_override"] = None


@family(
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "mkldnn_adaptive_avg_pool2d",
)
def adaptive_pooling(ctx):
    d = _spatial_rank(ctx)
    n = ctx.draw(st.integers(1, 2), label="batch")
    c = ctx.draw(st.integers(1, 3), label="channels")
    spatial = [ctx.draw(st.integers(1, 5), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    out = [ctx.draw(st.integers(1, 3), label=f"output[{i}]") for i in range(d)]
    _list_arg(ctx, "output_size", out)
    if "output_size" not in _arg_names(ctx):
        ctx.fixed["output_size"] = out  # the forward's, for a backward's indices (see generators.backward)


@family("fractional_max_pool2d", "fractional_max_pool3d")
def fractional_pooling(ctx):
    d = _spatial_rank(ctx)
    n, c = 1, ctx.draw(st.integers(1, 2), label="channels")
    # output + kernel - 1 must not exceed the input (2d), must stay below it (3d)
    spatial = [ctx.draw(st.integers(3 if d == 2 else 4, 5), label=f"extent[{i}]") for i in range(d)]
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
    n = ctx.draw(st.integers(1, 2), label="batch")
    c = ctx.draw(st.integers(1, 2), label="channels")
    k = [ctx.draw(st.integers(1, 2), label=f"kernel[{i}]") for i in range(d)]
    spatial = [k[i] * ctx.draw(st.integers(1, 3), label=f"windows[{i}]") + ctx.draw(st.integers(0, k[i] - 1), label=f"rest[{i}]") for i in range(d)]
    unbatched = ctx.draw(st.integers(0, 3), label="unbatched") == 0
    lead = (c,) if unbatched else (n, c)
    pooled_input = _tensor(ctx, lead + tuple(spatial), dtype="float32", values="real", label="pooled input")
    pool = torch.ops.aten.max_pool2d_with_indices if d == 2 else torch.ops.aten.max_pool3d_with_indices
    _, indices = pool(pooled_input.materialize(lambda t: t), k, k)
    ctx.shape = tuple(indices.shape)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["indices"] = TensorSpec(shape=ctx.shape, dtype="int64", data=tuple(indices.flatten().tolist()))
    ctx.fixed["output_size"] = spatial
    _list_arg(ctx, "stride", k)
    _list_arg(ctx, "padding", [0] * d)


@family(
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_nearest_exact1d",
    "upsample_nearest_exact2d", "upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "upsample_bicubic2d", "upsample_trilinear3d", "upsample_bilinear2d_aa", "upsample_bicubic2d_aa",
    "upsample_lanczos2d_aa",
)
def upsampling(ctx):
    d = _spatial_rank(ctx)
    names = _arg_names(ctx)
    n = ctx.draw(st.integers(1, 2), label="batch")
    c = ctx.draw(st.integers(1, 3), label="channels")
    spatial = [ctx.draw(st.integers(1, 4), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    in_name = "input" if "input" in names else "self"
    ctx.fixed[in_name] = _tensor(ctx, ctx.shape, label=in_name)
    out = [ctx.draw(st.integers(1, 6), label=f"output[{i}]") for i in range(d)]
    if "scale_factors" in names:
        if ctx.draw(st.booleans(), label="by scale"):
            ctx.fixed["output_size"] = None
            ctx.fixed["scale_factors"] = [ctx.draw(st.sampled_from([2.0, 0.5, 1.5]), label=f"scale[{i}]") for i in range(d)]
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
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "pad_circular", "pad_enum", "constant_pad_nd", "pad",
)
def padding_modes(ctx):
    """Reflection pads must be smaller than the input; the input is (N, C, *spatial) or unbatched."""
    base = ctx.op.base_name.lstrip("_")
    d = _spatial_rank(ctx, None if base.startswith(("reflection", "replication")) else 1)
    n = ctx.draw(st.integers(1, 2), label="batch")
    c = ctx.draw(st.integers(1, 2), label="channels")
    spatial = [ctx.draw(st.integers(2, 4), label=f"extent[{i}]") for i in range(d)]
    ctx.shape = (n, c, *spatial)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self", writable=False)
    pads = []
    for i in range(d):
        limit = spatial[d - 1 - i] - 1
        pads += [ctx.draw(st.integers(0, limit), label=f"pad[{2 * i}]"), ctx.draw(st.integers(0, limit), label=f"pad[{2 * i + 1}]")]
    for name in ("padding", "pad"):
        if name in _arg_names(ctx):
            ctx.fixed[name] = pads
    if base == "pad" and "mode" in _arg_names(ctx):
        ctx.fixed["mode"] = ctx.draw(st.sampled_from(["constant", "reflect", "replicate", "circular"]), label="mode")
        if ctx.fixed["mode"] != "constant":
            ctx.fixed["value"] = None


# -- normalisation ---------------------------------------------------------------------------------


@family(
    "batch_norm", "native_batch_norm", "native_batch_norm_legit", "native_batch_norm_legit_functional",
    "native_batch_norm_legit_no_training", "batch_norm_impl_index", "instance_norm", "cudnn_batch_norm",
    "miopen_batch_norm", "batch_norm_with_update", "batch_norm_no_update", "batch_norm_with_update_functional",
    "batch_norm_update_stats",
)
def batch_norm(ctx):
    """(N, C, *) input with per-channel weight, bias and running stats (running_var > 0).

    Running stats are always given when `training` is False: without them some CPU kernels
    crash the process instead of raising.
    """
    names = _arg_names(ctx)
    n = ctx.draw(st.integers(2, 3), label="batch")
    c = ctx.draw(st.integers(1, 3), label="channels")
    spatial = ctx.draw(st.lists(st.integers(1, 3), max_size=2), label="spatial")
    ctx.shape = (n, c, *spatial)
    if ctx.op.base_name.startswith("native_group_norm"):
        # the kernel (and its backward) take a contiguous input: group_norm makes it so first
        ctx.fixed["input"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values=ctx.values or "real", layout="contiguous", label="input")
    else:
        ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    for name in ("weight", "bias"):
        if name in names:
            ctx.fixed[name] = None if _leave_out(ctx, name) else _tensor(ctx, (c,), label=name)
    if "running_mean" in names:
        ctx.fixed["running_mean"] = _tensor(ctx, (c,), label="running_mean", writable=True)
        ctx.fixed["running_var"] = _tensor(ctx, (c,), values="positive", label="running_var", writable=True)
    elif "training" in names:
        # no running stats to use: evaluation mode would read absent stats (a segfault on CPU)
        ctx.fixed["training"] = True
    for name in ("save_mean", "save_invstd", "save_var"):
        if name in names:
            ctx.fixed[name] = _tensor(ctx, (c,), values="positive", label=name)
    for name in ("momentum", "exponential_average_factor"):
        if name in names:
            ctx.fixed[name] = 0.1
    for name in ("eps", "epsilon"):
        if name in names:
            ctx.fixed[name] = 1e-5


@family("quantized_batch_norm")
def quantized_batch_norm(ctx):
    """A quantized (N, C, *) input; float per-channel weight, bias and statistics (var > 0); the
    output's quantization parameters."""
    n = ctx.draw(st.integers(1, 3), label="batch")
    c = ctx.draw(st.integers(1, 3), label="channels")
    spatial = ctx.draw(st.lists(st.integers(1, 3), max_size=3), label="spatial")
    ctx.shape = (n, c, *spatial)
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    for name in ("weight", "bias", "mean"):
        ctx.fixed[name] = _tensor(ctx, (c,), dtype="float32", label=name)
    ctx.fixed["var"] = _tensor(ctx, (c,), dtype="float32", values="positive", label="var")
    ctx.fixed["eps"] = 1e-5
    ctx.fixed["output_scale"] = ctx.draw(st.sampled_from((0.1, 0.05, 0.5)), label="output_scale")
    ctx.fixed["output_zero_point"] = ctx.draw(st.integers(0, 10), label="output_zero_point")


def _forward_eps(ctx) -> None:
    """A backward takes the forward's mean and rstd, which generators.backward computes by running
    the forward; that needs the eps the backward does not take."""
    if "_backward" in ctx.op.base_name:
        ctx.fixed["eps"] = 1e-5


def _leave_out(ctx, name) -> bool:
    """Whether an optional weight or bias is None. Never in a backward's out= overload: without a
    weight its gradient is an undefined tensor, which the out= wrapper cannot copy into its out
    ("tensor does not have a device", native_layer_norm_backward.out, torch 2.13)."""
    if ctx.op.variant == "out" and "output_mask" in _arg_names(ctx):
        return False
    return ctx.draw(st.booleans(), label=f"no {name}")


@family("layer_norm", "native_layer_norm", "rms_norm", "fused_rms_norm", "fused_layer_norm")
def layer_norm(ctx):
    names = _arg_names(ctx)
    k = ctx.draw(st.integers(1, max(1, ctx.rank)), label="normalized dims") if ctx.rank else 0
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(st.integers(1, 4), label="size"),)
        k = 1
    normalized = list(ctx.shape[ctx.rank - k :])
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    ctx.fixed["normalized_shape"] = normalized
    _forward_eps(ctx)
    for name in ("weight", "bias"):
        if name in names:
            ctx.fixed[name] = None if _leave_out(ctx, name) else _tensor(ctx, tuple(normalized), label=name)


@family("group_norm", "native_group_norm")
def group_norm(ctx):
    names = _arg_names(ctx)
    g = ctx.draw(st.integers(1, 2), label="groups")
    c = g * ctx.draw(st.integers(1, 2), label="channels per group")
    n = ctx.draw(st.integers(1, 2), label="batch")
    spatial = ctx.draw(st.lists(st.integers(1, 3), max_size=2), label="spatial")
    ctx.shape = (n, c, *spatial)
    if ctx.op.base_name.startswith("native_group_norm"):
        # the kernel (and its backward) take a contiguous input: group_norm makes it so first
        ctx.fixed["input"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values=ctx.values or "real", layout="contiguous", label="input")
    else:
        ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    for name in ("weight", "bias"):
        if name in names:
            ctx.fixed[name] = None if _leave_out(ctx, name) else _tensor(ctx, (c,), label=name)
    _forward_eps(ctx)
    if "num_groups" in names:
        ctx.fixed["num_groups"] = g
    if "group" in names:
        hxw = 1
        for s in spatial:
            hxw *= s
        ctx.fixed.update({"N": n, "C": c, "HxW": hxw, "group": g})


# -- order statistics and shape ops ------------------------------------------------------------------


@family("topk", "kthvalue")
def topk_like(ctx):
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(st.integers(1, 4), label="size"),)
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    dim = ctx.draw(dims(ctx), label="dim")
    ctx.fixed["dim"] = dim
    size = ctx.size(dim)
    ctx.fixed["k"] = ctx.draw(st.integers(1 if ctx.op.base_name == "kthvalue" else 0, size) if size else st.just(0), label="k")


@family("cartesian_prod", "meshgrid", "combinations")
def products_of_vectors(ctx):
    """1-d inputs of at most 6 elements: the output is the product of their sizes (or n choose r),
    so the element cap on inputs alone let one case ask for gigabytes."""
    names = _arg_names(ctx)
    if "tensors" in names:
        k = ctx.draw(st.integers(1, 3), label="tensors")
        ctx.fixed["tensors"] = [_tensor(ctx, (ctx.draw(st.integers(0, 6), label=f"size[{i}]"),), label=f"tensors[{i}]") for i in range(k)]
    elif "self" in names:
        ctx.shape = (ctx.draw(st.integers(0, 6), label="size"),)
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")


@family("set")
def set_storage_view(ctx):
    """set_(self, source, storage_offset, size, stride): a view that lies inside source's storage.

    set_ grows a storage that is too small instead of raising, with uninitialised memory in the
    new part, so a view past the end compares garbage with garbage.
    """
    if "storage_offset" not in _arg_names(ctx):
        return
    n = ctx.draw(st.integers(1, 8), label="source numel")
    ctx.fixed["source"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=(n,), values=ctx.values or "real", layout="contiguous", label="source")
    offset = ctx.draw(st.integers(0, n - 1), label="storage_offset")
    rows = ctx.draw(st.integers(1, n - offset), label="rows")
    cols = ctx.draw(st.integers(1, (n - offset) // rows), label="cols")
    ctx.fixed["storage_offset"] = offset
    ctx.fixed["size"] = [rows, cols]
    ctx.fixed["stride"] = [cols, 1]


@family("select", "narrow", "narrow_copy", "select_copy", "select_scatter", "slice", "slice_copy", "unbind", "unsqueeze", "unsqueeze_copy", "unflatten", "movedim", "moveaxis", "unfold", "split_with_sizes", "split_with_sizes_copy", "unsafe_split_with_sizes", "split", "diagonal", "diag_embed", "tril", "triu", "tril_indices", "triu_indices")
def positional_dims(ctx):
    """Index, start and length arguments within the size of the chosen dim."""
    names = _arg_names(ctx)
    base = ctx.op.base_name.lstrip("_").removesuffix("_")
    if base in ("tril_indices", "triu_indices"):
        ctx.fixed["row"] = ctx.draw(st.integers(0, 4), label="row")
        ctx.fixed["col"] = ctx.draw(st.integers(0, 4), label="col")
        return
    if ctx.rank == 0 or base in ("diagonal", "diag_embed", "tril", "triu", "select_scatter", "narrow", "select"):
        if ctx.rank < 2:
            ctx.shape = tuple(ctx.draw(st.integers(1, 4), label=f"side[{i}]") for i in range(2))
    r = ctx.rank
    if base in ("unsqueeze", "unsqueeze_copy"):
        ctx.fixed["dim"] = ctx.draw(st.integers(-r - 1, r), label="dim")
        return
    dim = ctx.draw(dims(ctx), label="dim")
    size = ctx.size(dim)
    if "dim" in names and next(a for a in ctx.op.arguments if a.name == "dim").type.startswith(("int", "SymInt")):
        ctx.fixed["dim"] = dim
    if base in ("select", "select_copy"):
        ctx.fixed["index"] = ctx.draw(st.integers(-size, size - 1) if size else st.just(0), label="index")
    elif base in ("select_scatter",):
        idx = ctx.draw(st.integers(0, size - 1) if size else st.just(0), label="index")
        ctx.fixed["index"] = idx
        src_shape = tuple(s for i, s in enumerate(ctx.shape) if i != dim % r)
        ctx.fixed["src"] = _tensor(ctx, src_shape, label="src")
    elif base in ("narrow", "narrow_copy"):
        start = ctx.draw(st.integers(0, size), label="start")
        start_is_tensor = next(a for a in ctx.op.arguments if a.name == "start").type.startswith("Tensor")
        ctx.fixed["start"] = TensorSpec(shape=(), dtype="int64", data=(start,)) if start_is_tensor else start
        ctx.fixed["length"] = ctx.draw(st.integers(0, size - start), label="length")
    elif base in ("unflatten",):
        ctx.fixed["sizes"] = [1, size] if ctx.draw(st.booleans(), label="split") else [size, -1] if size else [size]
    elif base in ("split_with_sizes", "split_with_sizes_copy", "unsafe_split_with_sizes", "split") and _sizes_arg(ctx):
        # sizes that sum to the dim's size (split's list overloads are split_with_sizes)
        a = ctx.draw(st.integers(0, size), label="first")
        ctx.fixed[_sizes_arg(ctx)] = [a, size - a]
        ctx.list_shapes = [ctx.shape] * 2  # an out= overload's list of outs: one per piece
    elif base == "unfold":
        ctx.fixed["dimension"] = dim
        ctx.fixed["size"] = ctx.draw(st.integers(0, size), label="size")
        ctx.fixed["step"] = ctx.draw(st.integers(1, 2), label="step")
    elif base in ("diagonal", "diag_embed"):
        for a, b in (("dim1", "dim2"),):
            if a in names:
                ctx.fixed[a] = 0
                ctx.fixed[b] = 1
    elif base in ("movedim", "moveaxis"):
        src = next(a for a in ctx.op.arguments if a.name == "source")
        if src.type.startswith("int["):
            ctx.fixed["source"] = [dim]
            ctx.fixed["destination"] = [ctx.draw(dims(ctx), label="destination")]
        else:
            ctx.fixed["source"] = dim
            ctx.fixed["destination"] = ctx.draw(dims(ctx), label="destination")


def _sizes_arg(ctx) -> str | None:
    """The name of a split's list of sizes, if it takes one (split.Tensor takes one size)."""
    return next((a.name for a in ctx.op.arguments if a.name in ("split_size", "split_sizes") and "[" in a.type), None)


_FAMILY_BUILDERS: dict[str, Callable] = {}


def _linalg_default(ctx):
    """Square (batched) matrices, well-conditioned; symmetric positive definite where the op
    needs a Cholesky factorisation or a Hermitian eigenproblem."""
    name = ctx.op.base_name
    kind = "spd" if any(w in name for w in ("cholesky", "eigh", "eigvalsh", "ldl")) else "invertible"
    n = ctx.draw(st.integers(1, 4), label="n")
    batch = ctx.draw(st.lists(st.integers(1, 2), max_size=1), label="batch")
    ctx.shape = (*batch, n, n)
    if ctx.values in ("real", "", None):
        ctx.values = kind


_FAMILY_BUILDERS["linalg"] = _linalg_default
_FAMILY_BUILDERS["fft"] = lambda ctx: None


@family("embedding_bag", "embedding_bag_forward_only")
def embedding_bag(ctx):
    """One bag starting at offset 0; include_last_offset stays False: with it, a lone offset [0]
    and per-sample weights crash the CPU kernel (torch 2.13) instead of raising."""
    symbolic(ctx, {"weight": "v d", "indices": "b:indexv", "offsets": "1:index1", "per_sample_weights": "?b"})
    if "include_last_offset" in _arg_names(ctx):
        ctx.fixed["include_last_offset"] = False
    if "mode" in _arg_names(ctx):
        ctx.fixed["mode"] = 0 if ctx.fixed.get("per_sample_weights") is not None else ctx.draw(st.integers(0, 2), label="mode")


# -- quantization ----------------------------------------------------------------------------------

# the range of each quantized dtype's integer values, for zero points and quant_min / quant_max
QUANT_RANGES = {"quint8": (0, 255), "qint8": (-128, 127), "qint32": (-(2**31), 2**31 - 1)}
_qdtypes = st.sampled_from(tuple(QUANT_RANGES))
_quant_scales = st.sampled_from((0.1, 0.02, 0.5, 1.0))


def _qparams(ctx, n: int, *, scale_dtype: str, point_dtype: str, label: str, qdtype: str = "quint8"):
    """Per-channel scales (> 0) and zero points (within `qdtype`'s range) for `n` channels."""
    lo, hi = QUANT_RANGES[qdtype]
    scales = draw_tensor(ctx.draw, dtype=scale_dtype, shape=(n,), values="positive", low=0.01, high=1.0, layout="contiguous", label=f"{label} scales")
    points = draw_tensor(ctx.draw, dtype=point_dtype, shape=(n,), values="index", low=max(lo, -100), high=min(hi, 100), layout="contiguous", label=f"{label} zero points")
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
        ctx.shape = tuple(ctx.draw(st.integers(1, 4), label=f"size[{i}]") for i in range(ctx.draw(st.integers(1, 3), label="rank")))
        ctx.fixed["size"] = list(ctx.shape)
    elif "tensors" in names:
        ctx.fixed["tensors"] = [_tensor(ctx, s, label=f"tensors[{i}]") for i, s in enumerate(ctx.list_shapes)]
        ctx.fixed["scales"], ctx.fixed["zero_points"] = _qparams(ctx, len(ctx.list_shapes), scale_dtype="float64", point_dtype="int64", label="tensors", qdtype=qdtype)
        return
    elif ctx.rank == 0 and "axis" in names:
        ctx.shape = (ctx.draw(st.integers(1, 4), label="size"),)
    if "self" in names:
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    axis = None
    if "axis" in names:
        axis = ctx.draw(st.integers(0, ctx.rank - 1), label="axis")
        ctx.fixed["axis"] = axis
        ctx.fixed["scales"], ctx.fixed["zero_points"] = _qparams(ctx, ctx.shape[axis], scale_dtype="float64", point_dtype="int64", label="channel", qdtype=qdtype)
    elif "scale" in names and next(a.type for a in ctx.op.arguments if a.name == "scale").startswith("Tensor"):
        scale, point = _qparams(ctx, 1, scale_dtype="float32", point_dtype="int64", label="tensor", qdtype=qdtype)
        ctx.fixed["scale"], ctx.fixed["zero_point"] = dataclasses.replace(scale, shape=()), dataclasses.replace(point, shape=())
    elif "scale" in names:
        ctx.fixed["scale"] = ctx.draw(_quant_scales, label="scale")
        ctx.fixed["zero_point"] = ctx.draw(st.integers(max(lo, -100), min(hi, 100)), label="zero_point")
    if ctx.op.variant == "out":
        # the out must be quantized like the result: the same dtype and, per channel, the same axis
        ctx.fixed["out"] = TensorSpec(shape=ctx.shape if axis is not None else (0,), dtype=qdtype, scale=1.0, axis=axis)


@family("fake_quantize_per_channel_affine", "fake_quantize_per_channel_affine_cachemask", "fake_quantize_learnable_per_channel_affine")
def fake_quantize_per_channel(ctx):
    """Per-channel scales (> 0) and zero points within [quant_min, quant_max] along a drawn axis;
    the learnable variant takes float zero points."""
    learnable = "learnable" in ctx.op.base_name
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(st.integers(1, 4), label="size"),)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    axis = ctx.draw(st.integers(0, ctx.rank - 1), label="axis")
    qdtype = ctx.draw(st.sampled_from(("quint8", "qint8")), label="quantized range")
    lo, hi = QUANT_RANGES[qdtype]
    ctx.fixed.update(axis=axis, quant_min=lo, quant_max=hi)
    ctx.fixed["scale"], ctx.fixed["zero_point"] = _qparams(ctx, ctx.shape[axis], scale_dtype="float32", point_dtype="float32" if learnable else "int32", label="channel", qdtype=qdtype)


# -- recurrent networks ----------------------------------------------------------------------------

_GATES = {"gru": 3, "lstm": 4, "rnn_tanh": 1, "rnn_relu": 1}


@family("gru", "lstm", "rnn_tanh", "rnn_relu")
def recurrent(ctx):
    """A whole network: input (T, N, I) (batch first: (N, T, I)) or packed data with decreasing
    batch sizes; hidden state (layers * directions, N, H), two of them for an LSTM; and the flat
    parameter list PyTorch's modules pass: per layer and direction w_ih, w_hh[, b_ih, b_hh]."""
    names = _arg_names(ctx)
    base = ctx.op.base_name
    gates = _GATES[base]
    layers = ctx.draw(st.integers(1, 2), label="num_layers")
    bidirectional = ctx.draw(st.booleans(), label="bidirectional")
    has_biases = ctx.draw(st.booleans(), label="has_biases")
    dirs = 2 if bidirectional else 1
    n = ctx.draw(st.integers(1, 3), label="batch")
    t = ctx.draw(st.integers(1, 3), label="steps")
    i = ctx.draw(st.integers(1, 3), label="input size")
    h = ctx.draw(st.integers(1, 3), label="hidden size")
    if "batch_sizes" in names:
        # packed: step s holds the sequences longer than s, in decreasing order of length
        sizes = _batch_sizes(ctx, n, t)
        ctx.shape = (sum(sizes), i)
        ctx.fixed["data"] = _tensor(ctx, ctx.shape, label="data")
    else:
        batch_first = ctx.draw(st.booleans(), label="batch_first")
        ctx.fixed["batch_first"] = batch_first
        ctx.shape = (n, t, i) if batch_first else (t, n, i)
        ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    hidden = (layers * dirs, n, h)
    ctx.fixed["hx"] = [_tensor(ctx, hidden, label="h0"), _tensor(ctx, hidden, label="c0")] if base == "lstm" else _tensor(ctx, hidden, label="hx")
    params = []
    for layer in range(layers):
        width = i if layer == 0 else h * dirs
        for d in range(dirs):
            where = f"layer {layer} direction {d}"
            params += [_tensor(ctx, (gates * h, width), label=f"w_ih {where}"), _tensor(ctx, (gates * h, h), label=f"w_hh {where}")]
            if has_biases:
                params += [_tensor(ctx, (gates * h,), label=f"b_ih {where}"), _tensor(ctx, (gates * h,), label=f"b_hh {where}")]
    ctx.fixed.update(params=params, has_biases=has_biases, num_layers=layers, dropout=0.0, bidirectional=bidirectional)
    ctx.fixed["train"] = ctx.draw(st.booleans(), label="train")  # no dropout: the same either way


@family("lstm_cell")
def lstm_cell(ctx):
    symbolic(ctx, {"input": "n i", "w_ih": "4h i", "w_hh": "4h h", "b_ih": "?4h", "b_hh": "?4h"})
    n, h = ctx.shape[0], ctx.fixed["w_hh"].shape[1]
    ctx.fixed["hx"] = [_tensor(ctx, (n, h), label="h0"), _tensor(ctx, (n, h), label="c0")]


# -- losses ----------------------------------------------------------------------------------------


@family("ctc_loss")
def ctc_loss(ctx):
    """log_probs (T, N, C); padded targets (N, S) of classes other than the blank; input lengths
    up to T and target lengths up to S, as int lists or int64 tensors."""
    names = {a.name: a for a in ctx.op.arguments}
    t = ctx.draw(st.integers(1, 6), label="input length")
    n = ctx.draw(st.integers(1, 3), label="batch")
    c = ctx.draw(st.integers(2, 5), label="classes")
    s = ctx.draw(st.integers(1, 4), label="target length")
    blank = ctx.draw(st.integers(0, c - 1), label="blank")
    ctx.shape = (t, n, c)
    ctx.fixed["log_probs"] = _tensor(ctx, ctx.shape, label="log_probs")
    # classes drawn from [0, c - 1) and shifted past the blank
    targets = [ctx.draw(st.integers(0, c - 2), label=f"target[{j}]") for j in range(n * s)]
    targets = tuple(x + (x >= blank) for x in targets)
    ctx.fixed["targets"] = TensorSpec(shape=(n, s), dtype="int64", data=targets)
    if ctx.op.base_name.startswith("_"):
        # _ctc_loss returns log_alpha (its backward takes it), which the CPU kernel leaves
        # uninitialized past each sequence's lengths: full, equal lengths define all of it
        target_length = ctx.draw(st.integers(0, min(s, t)), label="target_lengths")
        lengths = {"input_lengths": [t] * n, "target_lengths": [target_length] * n}
    else:
        lengths = {
            "input_lengths": [ctx.draw(st.integers(1, t), label=f"input_lengths[{j}]") for j in range(n)],
            "target_lengths": [ctx.draw(st.integers(0, min(s, t)), label=f"target_lengths[{j}]") for j in range(n)],
        }
    for name, values in lengths.items():
        tensor = names[name].type.startswith("Tensor")
        ctx.fixed[name] = TensorSpec(shape=(n,), dtype="int64", data=tuple(values)) if tensor else values
    ctx.fixed["blank"] = blank



@family("affine_grid_generator")
def affine_grid(ctx):
    """theta (N, 2, 3) for a 2-d grid of size (N, C, H, W), (N, 3, 4) for a 3-d one."""
    d = ctx.draw(st.integers(2, 3), label="spatial dims")
    n = ctx.draw(st.integers(1, 2), label="batch")
    size = [n, ctx.draw(st.integers(1, 2), label="channels")] + [ctx.draw(st.integers(1, 4), label=f"size[{i}]") for i in range(d)]
    ctx.fixed["size"] = size
    ctx.shape = (n, d, d + 1)
    # the backward takes no theta; its gradient's shape comes from running the forward on it
    ctx.fixed["theta"] = _tensor(ctx, ctx.shape, label="theta")


@family("col2im")
def col2im(ctx):
    """Columns (N, C * prod(kernel), blocks) where blocks is the number of sliding windows that
    fit the output with the drawn kernel, dilation, padding and stride."""
    n = ctx.draw(st.integers(1, 2), label="batch")
    c = ctx.draw(st.integers(1, 2), label="channels")
    k = [ctx.draw(st.integers(1, 3), label=f"kernel[{i}]") for i in range(2)]
    dilation = [ctx.draw(st.integers(1, 2), label=f"dilation[{i}]") for i in range(2)]
    padding = [ctx.draw(st.integers(0, 1), label=f"padding[{i}]") for i in range(2)]
    stride = [ctx.draw(st.integers(1, 2), label=f"stride[{i}]") for i in range(2)]
    out = [dilation[i] * (k[i] - 1) + 1 + ctx.draw(st.integers(0, 3), label=f"extent[{i}]") for i in range(2)]
    blocks = 1
    for i in range(2):
        blocks *= (out[i] + 2 * padding[i] - dilation[i] * (k[i] - 1) - 1) // stride[i] + 1
    unbatched = ctx.draw(st.integers(0, 3), label="unbatched") == 0
    ctx.shape = ((c * k[0] * k[1], blocks) if unbatched else (n, c * k[0] * k[1], blocks))
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed.update(output_size=out, kernel_size=k, dilation=dilation, padding=padding, stride=stride)


@family("im2col")
def im2col(ctx):
    """An (N, C, H, W) or (C, H, W) image at least as large as the dilated kernel, with 2-d
    kernel, dilation, padding and stride."""
    k = [ctx.draw(st.integers(1, 3), label=f"kernel[{i}]") for i in range(2)]
    dilation = [ctx.draw(st.integers(1, 2), label=f"dilation[{i}]") for i in range(2)]
    extent = [dilation[i] * (k[i] - 1) + 1 + ctx.draw(st.integers(0, 3), label=f"extent[{i}]") for i in range(2)]
    lead = [ctx.draw(st.integers(1, 2), label="channels")]
    if ctx.draw(st.booleans(), label="batched"):
        lead.insert(0, ctx.draw(st.integers(1, 2), label="batch"))
    ctx.shape = (*lead, *extent)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    padding = [ctx.draw(st.integers(0, 1), label=f"padding[{i}]") for i in range(2)]
    stride = [ctx.draw(st.integers(1, 2), label=f"stride[{i}]") for i in range(2)]
    ctx.fixed.update(kernel_size=k, dilation=dilation, padding=padding, stride=stride)


@family("istft")
def istft(ctx):
    """A one-sided spectrogram (n_fft / 2 + 1, frames), complex of the cell's precision, with a
    hop and window that satisfy the overlap-add (NOLA) condition."""
    cell_complex = {"float32": "complex64", "float64": "complex128", "complex64": "complex64", "complex128": "complex128"}
    dtype = cell_complex.get(ctx.dtype, ctx.dtype)
    n_fft = ctx.draw(st.sampled_from((4, 8, 6)), label="n_fft")
    frames = ctx.draw(st.integers(2, 5), label="frames")
    batch = ctx.draw(st.lists(st.integers(1, 2), max_size=1), label="batch")
    ctx.shape = (*batch, n_fft // 2 + 1, frames)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, dtype=dtype, label="self")
    ctx.fixed["n_fft"] = n_fft
    ctx.fixed["hop_length"] = ctx.draw(st.sampled_from((n_fft // 4 or 1, n_fft // 2)), label="hop_length")
    ctx.fixed["win_length"] = None
    real = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
    ctx.fixed["window"] = None if ctx.draw(st.booleans(), label="no window") else _tensor(ctx, (n_fft,), dtype=real, values="positive", label="window")
    ctx.fixed["center"] = True
    ctx.fixed["onesided"] = True
    ctx.fixed["return_complex"] = False


@family("linalg_cond")
def linalg_cond(ctx):
    """Square invertible matrices; the string norms are the matrix norms "fro" and "nuc"."""
    _linalg_default(ctx)
    p = next((a for a in ctx.op.arguments if a.name == "p"), None)
    if p is not None and p.type.startswith("str"):
        ctx.fixed["p"] = ctx.draw(st.sampled_from(("fro", "nuc")), label="p")


@family("linalg_ldl_solve")
def linalg_ldl_solve(ctx):
    """LD and pivots from linalg_ldl_factor of a symmetric (not definite) matrix; B (n, k)."""
    import torch

    n = ctx.draw(st.integers(1, 4), label="n")
    k = ctx.draw(st.integers(1, 3), label="k")
    batch = tuple(ctx.draw(st.lists(st.integers(1, 2), max_size=1), label="batch"))
    hermitian = ctx.draw(st.booleans(), label="hermitian") if ctx.dtype.startswith("complex") else False
    x = _tensor(ctx, batch + (n, n), values="invertible", label="matrix").materialize(lambda t: t)
    a = x + (x.mH if hermitian else x.mT)
    try:
        ld, pivots, _ = torch.linalg.ldl_factor_ex(a, hermitian=hermitian)
    except RuntimeError:  # the cell's dtype has no LDL factorisation: draw a plain LD for the reference to reject
        ld, pivots = a, torch.ones(batch + (n,), dtype=torch.int32)
    ctx.shape = tuple(ld.shape)
    ctx.fixed["LD"] = TensorSpec(shape=ctx.shape, dtype=ctx.dtype, data=tuple(ld.flatten().tolist()))
    ctx.fixed["pivots"] = TensorSpec(shape=tuple(pivots.shape), dtype="int32", data=tuple(pivots.flatten().tolist()))
    ctx.fixed["B"] = _tensor(ctx, batch + (n, k), label="B")
    ctx.fixed["hermitian"] = hermitian


def _sparse(spec):
    return dataclasses.replace(spec, layout="sparse_coo")


@family("hspmm", "smm", "sspaddmm", "sparse_addmm")
def sparse_matmul(ctx):
    """Matrix products whose first factor is a sparse COO matrix, and so is sspaddmm's self
    (and result); _sparse_addmm adds to a dense self."""
    adds = ctx.op.base_name in ("sspaddmm", "_sparse_addmm")
    symbolic(ctx, {"self": "n m", "mat1": "n k", "mat2": "k m"} if adds else {"self": "n k", "mat1": "n k", "mat2": "k m"})
    for name in ("mat1",) if ctx.op.base_name == "_sparse_addmm" else ("self", "mat1"):
        if isinstance(ctx.fixed.get(name), TensorSpec):
            ctx.fixed[name] = _sparse(ctx.fixed[name])
    if ctx.op.variant == "out" and ctx.op.base_name != "_sparse_addmm":
        # the result is sparse, and so must the out be
        n, m = ctx.shape[0], ctx.fixed["mat2"].shape[1]
        ctx.fixed["out"] = TensorSpec(shape=(n, m), dtype=ctx.dtype, layout="sparse_coo")



# -- TorchScript builtins --------------------------------------------------------------------------

# list element types of builtins, by the list's schema type
_LIST_ELEMENTS = {
    "float[]": st.sampled_from((0.5, -1.5, 2.0, 0.0)),
    "int[]": st.integers(-3, 3),
    "str[]": st.sampled_from(("a", "b", "", "a b")),
    "bool[]": st.booleans(),
}


@family("remove")
def list_member(ctx):
    """list.index(x) and list.remove(x) on a non-empty list that holds x (else ValueError)."""
    arg = next((a for a in ctx.op.arguments if a.name == "self"), None)
    elements = _LIST_ELEMENTS.get(arg.type.replace("(a!)", "")) if arg is not None else None
    if elements is None or getattr(ctx.op, "family", "") != "torchscript":
        return
    items = ctx.draw(st.lists(elements, min_size=1, max_size=4), label="list")
    ctx.fixed["self"] = items
    ctx.fixed["el"] = items[ctx.draw(st.integers(0, len(items) - 1), label="member")]


@family("Float", "Int")
def number_from_string(ctx):
    """float("1.5") and int("-2"): the string must hold a number."""
    arg = next((a for a in ctx.op.arguments if a.name == "a"), None)
    if arg is not None and arg.type == "str":
        numbers = ("1", "-2", "0", "1.5", "-0.25", "1e3") if ctx.op.base_name == "Float" else ("1", "-2", "0", "42")
        ctx.fixed["a"] = ctx.draw(st.sampled_from(numbers), label="a")


# -- sparse constructors ---------------------------------------------------------------------------


def _sparsity(ctx):
    """(n, m, [(row, col), ...]): a drawn n x m sparsity pattern, row-major."""
    n = ctx.draw(st.integers(1, 4), label="rows")
    m = ctx.draw(st.integers(1, 4), label="cols")
    mask = ctx.draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m), label="pattern")
    return n, m, [(i // m, i % m) for i, on in enumerate(mask) if on]


def _index_spec(values) -> TensorSpec:
    return TensorSpec(shape=(len(values),), dtype="int64", data=tuple(values))


def _compressed(major: int, entries) -> tuple[TensorSpec, TensorSpec]:
    """Compressed and plain indices of `entries` ((major, minor) pairs sorted by major, minor)."""
    counts = [0] * (major + 1)
    for a, _ in entries:
        counts[a + 1] += 1
    for i in range(major):
        counts[i + 1] += counts[i]
    return _index_spec(counts), _index_spec([b for _, b in entries])


@family("sparse_coo_tensor", "sparse_coo_tensor_unsafe", "validate_sparse_coo_tensor_args")
def sparse_coo_constructor(ctx):
    """indices (2, nnz) of a drawn pattern, values (nnz,), a size that holds them."""
    names = _arg_names(ctx)
    if "indices" not in names:
        if ctx.op.variant == "out" and "size" in names:
            # the result is sparse and the out is not resized: a sparse out of the drawn size
            size = [ctx.draw(st.integers(0, 4), label=f"size[{i}]") for i in range(ctx.draw(st.integers(1, 3), label="rank"))]
            ctx.fixed["size"] = size
            ctx.fixed["out"] = TensorSpec(shape=tuple(size), dtype=ctx.dtype, layout="sparse_coo")
        return
    n, m, entries = _sparsity(ctx)
    ctx.fixed["indices"] = TensorSpec(shape=(2, len(entries)), dtype="int64", data=tuple(r for r, _ in entries) + tuple(c for _, c in entries))
    ctx.fixed["values"] = _tensor(ctx, (len(entries),), label="values")
    ctx.shape = (n, m)
    if "size" in names:
        ctx.fixed["size"] = [n + ctx.draw(st.integers(0, 1), label="extra rows"), m]
    if "layout" in names:
        from generators.schema import OMIT

        ctx.fixed["layout"] = OMIT


_COMPRESSED_LAYOUTS = {"csr": "sparse_csr", "csc": "sparse_csc", "bsr": "sparse_bsr", "bsc": "sparse_bsc"}


@family(
    "sparse_compressed_tensor", "sparse_compressed_tensor_unsafe", "validate_sparse_compressed_tensor_args",
    "validate_sparse_csr_tensor_args", "validate_sparse_csc_tensor_args", "validate_sparse_bsr_tensor_args",
    "validate_sparse_bsc_tensor_args", "validate_compressed_sparse_indices",
)
def sparse_compressed_constructor(ctx):
    """Compressed (row or column) and plain indices of a drawn pattern; block layouts with 1 x 1
    blocks, whose values are (nnz, 1, 1)."""
    names = _arg_names(ctx)
    m_ = re.search(r"(csr|csc|bsr|bsc)", ctx.op.base_name)
    kind = m_.group(1) if m_ else ctx.draw(st.sampled_from(tuple(_COMPRESSED_LAYOUTS)), label="layout")
    n, m, entries = _sparsity(ctx)
    by_column = kind in ("csc", "bsc")
    if "is_crow" in names:
        by_column = not ctx.draw(st.booleans(), label="is_crow")
        ctx.fixed["is_crow"] = not by_column
    ordered = sorted((c, r) for r, c in entries) if by_column else entries
    compressed, plain = _compressed(m if by_column else n, ordered)
    if "is_crow" in names:
        ctx.fixed.update(compressed_idx=compressed, plain_idx=plain, cdim=m if by_column else n, dim=n if by_column else m, nnz=len(entries))
        return
    first, second = [a.name for a in ctx.op.arguments if a.type.startswith("Tensor")][:2]
    ctx.fixed[first], ctx.fixed[second] = compressed, plain
    ctx.fixed["values"] = _tensor(ctx, (len(entries), 1, 1) if kind.startswith("b") else (len(entries),), label="values")
    ctx.shape = (n, m)
    if "size" in names:
        ctx.fixed["size"] = [n, m]
    if "layout" in names:
        ctx.fixed["layout"] = {"layout": _COMPRESSED_LAYOUTS[kind]}



@family("make_per_tensor_quantized_tensor", "make_per_channel_quantized_tensor")
def make_quantized(ctx):
    """Integer values reinterpreted as quantized (uint8 as quint8, int8 as qint8, int32 as
    qint32) with valid scales and zero points; a quantized out of the same dtype."""
    qdtype = next((q for q, storage in QUANTIZED_STORAGE.items() if storage == ctx.dtype), None)
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(st.integers(1, 4), label="size"),)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    if qdtype is None:
        return  # not an integer storage: the reference rejects it
    lo, hi = QUANT_RANGES[qdtype]
    axis = None
    if "axis" in _arg_names(ctx):
        axis = ctx.draw(st.integers(0, ctx.rank - 1), label="axis")
        ctx.fixed["axis"] = axis
        ctx.fixed["scale"], ctx.fixed["zero_point"] = _qparams(ctx, ctx.shape[axis], scale_dtype="float64", point_dtype="int64", label="channel", qdtype=qdtype)
    else:
        ctx.fixed["scale"] = ctx.draw(_quant_scales, label="scale")
        ctx.fixed["zero_point"] = ctx.draw(st.integers(max(lo, -100), min(hi, 100)), label="zero_point")
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
    n, k, m = (ctx.draw(st.integers(1, 4), label=x) for x in ("n", "k", "m"))
    ctx.shape = (n, k)
    ctx.fixed["self"] = draw_tensor(ctx.draw, dtype="float8_e4m3fn", shape=(n, k), values="small", layout="contiguous", label="self")
    ctx.fixed["mat2"] = draw_tensor(ctx.draw, dtype="float8_e4m3fn", shape=(k, m), values="small", layout="transposed", label="mat2")
    for name in ("scale_a", "scale_b"):
        ctx.fixed[name] = draw_tensor(ctx.draw, dtype="float32", shape=(), values="positive", layout="contiguous", label=name)
    ctx.fixed.update(bias=None, scale_result=None, use_fast_accum=False)
    ctx.fixed["out_dtype"] = {"dtype": ctx.dtype}



def _batch_sizes(ctx, n: int, t: int) -> list[int]:
    """A packed sequence's batch sizes: step s holds the sequences longer than s, in decreasing
    order of length, so the sizes never grow and the first is the batch; set as batch_sizes."""
    sizes = sorted((ctx.draw(st.integers(1, n), label=f"batch_sizes[{s}]") for s in range(t)), reverse=True)
    sizes[0] = n
    ctx.fixed["batch_sizes"] = TensorSpec(shape=(t,), dtype="int64", data=tuple(sizes))
    return sizes


@family("pad_packed_sequence", "pack_padded_sequence_backward")
def packed_sequence(ctx):
    """Packed data (sum(batch_sizes), *features) with valid batch sizes; the padded size."""
    n = ctx.draw(st.integers(1, 3), label="batch")
    t = ctx.draw(st.integers(1, 3), label="steps")
    features = tuple(ctx.draw(st.lists(st.integers(1, 3), max_size=2), label="features"))
    sizes = _batch_sizes(ctx, n, t)
    ctx.shape = (sum(sizes), *features)
    batch_first = ctx.draw(st.booleans(), label="batch_first")
    ctx.fixed["batch_first"] = batch_first
    names = _arg_names(ctx)
    data = "data" if "data" in names else "grad"
    ctx.fixed[data] = _tensor(ctx, ctx.shape, label=data)
    if "total_length" in names:
        ctx.fixed["total_length"] = t + ctx.draw(st.integers(0, 1), label="extra length")
    if "input_size" in names:
        ctx.fixed["input_size"] = [n, t, *features] if batch_first else [t, n, *features]


@family("scaled_dot_product_attention_math", "scaled_dot_product_flash_attention_for_cpu")
def attention(ctx):
    """query (B, H, L, E), key (B, H, S, E), value (B, H, S, E); no dropout, no mask."""
    b, h = ctx.draw(st.integers(1, 2), label="batch"), ctx.draw(st.integers(1, 2), label="heads")
    length, source, e = (ctx.draw(st.integers(1, 4), label=x) for x in ("target length", "source length", "embedding"))
    ctx.shape = (b, h, length, e)
    ctx.fixed["query"] = _tensor(ctx, ctx.shape, label="query")
    ctx.fixed["key"] = _tensor(ctx, (b, h, source, e), label="key")
    ctx.fixed["value"] = _tensor(ctx, (b, h, source, e), label="value")
    ctx.fixed.update(dropout_p=0.0, attn_mask=None)
    names = _arg_names(ctx)
    for name in ("dropout_mask",):
        if name in names:
            ctx.fixed[name] = None
    if "enable_gqa" in names:
        ctx.fixed["enable_gqa"] = False


@family("spdiags")
def spdiags(ctx):
    """diagonals (k, n) placed at k distinct offsets of an (m, n) matrix."""
    m, n = ctx.draw(st.integers(1, 4), label="rows"), ctx.draw(st.integers(1, 4), label="cols")
    offsets = ctx.draw(st.lists(st.integers(-m + 1, n - 1), min_size=1, max_size=3, unique=True), label="offsets")
    ctx.shape = (len(offsets), n)
    ctx.fixed["diagonals"] = _tensor(ctx, ctx.shape, label="diagonals")
    ctx.fixed["offsets"] = TensorSpec(shape=(len(offsets),), dtype="int64", data=tuple(offsets))
    ctx.fixed["shape"] = [m, n]
    ctx.fixed["layout"] = None
    if ctx.op.variant == "out":
        ctx.fixed["out"] = TensorSpec(shape=(m, n), dtype=ctx.dtype, layout="sparse_coo")  # the result is sparse COO


_INTERPOLATE_MODES = {1: ("nearest", "linear", "area"), 2: ("nearest", "bilinear", "bicubic", "area"), 3: ("nearest", "trilinear", "area")}


@family("interpolate", "upsample_nearest", "upsample_bilinear")
def interpolate(ctx):
    """TorchScript's F.interpolate builtins: an (N, C, *spatial) input and exactly one of size
    and scale_factor (an int or float, or one per spatial dim, as the overload types them)."""
    names = {a.name: a for a in ctx.op.arguments}
    base = ctx.op.base_name.lstrip("_")
    d = 2 if base == "upsample_bilinear" else ctx.draw(st.integers(1, 3), label="spatial dims")
    n, c = ctx.draw(st.integers(1, 2), label="batch"), ctx.draw(st.integers(1, 2), label="channels")
    ctx.shape = (n, c, *(ctx.draw(st.integers(1, 4), label=f"extent[{i}]") for i in range(d)))
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    by_size = ctx.draw(st.booleans(), label="by size")
    size_list = names["size"].type.startswith("int[")
    scale_type = names["scale_factor"].type
    if by_size:
        sizes = [ctx.draw(st.integers(1, 5), label=f"size[{i}]") for i in range(d)]
        ctx.fixed["size"], ctx.fixed["scale_factor"] = sizes if size_list else sizes[0], None
    else:
        # halving needs two elements or more in every dim, or the output would be empty
        floats = st.sampled_from((2.0, 0.5, 1.5) if min(ctx.shape[2:]) >= 2 else (2.0, 1.5))
        scales = [ctx.draw(st.integers(1, 2) if scale_type.startswith("int") else floats, label=f"scale[{i}]") for i in range(d)]
        ctx.fixed["size"], ctx.fixed["scale_factor"] = None, scales if "[" in scale_type else scales[0]
    if "mode" in names:
        mode = ctx.draw(st.sampled_from(_INTERPOLATE_MODES[d]), label="mode")
        ctx.fixed["mode"] = mode
        linear = mode in ("linear", "bilinear", "bicubic", "trilinear")
        ctx.fixed["align_corners"] = ctx.draw(st.booleans(), label="align_corners") if linear else None
        ctx.fixed["antialias"] = False


# -- kernels with one fixed calling convention ------------------------------------------------------


@family("linalg_check_errors")
def linalg_check_errors(ctx):
    """LAPACK info codes (int32; 0 = success, so that a valid case passes the check)."""
    n = ctx.draw(st.integers(0, 3), label="batch")
    ctx.shape = (n,)
    ctx.fixed["info"] = TensorSpec(shape=(n,), dtype="int32", data=(0,) * n)
    ctx.fixed["api_name"] = ctx.draw(st.sampled_from(("torch.linalg.inv", "torch.linalg.cholesky")), label="api_name")


@family("reshape_from_tensor")
def reshape_from_tensor(ctx):
    """A target shape, as a 1-d int64 tensor, with as many elements as self."""
    import math

    numel = math.prod(ctx.shape)
    split = ctx.draw(st.booleans(), label="split") and numel % 2 == 0 and numel > 0
    ctx.fixed["shape"] = _index_spec([2, numel // 2] if split else [numel])


@family("jagged_to_padded_dense_forward", "padded_dense_to_jagged_forward")
def jagged(ctx):
    """Jagged rows (total, D) with one offsets tensor (0, ..., total) and the padded (B, L, D)."""
    b = ctx.draw(st.integers(1, 3), label="batch")
    d = ctx.draw(st.integers(1, 3), label="features")
    lengths = [ctx.draw(st.integers(0, 3), label=f"length[{i}]") for i in range(b)]
    offsets = [0]
    for length in lengths:
        offsets.append(offsets[-1] + length)
    ctx.fixed["offsets"] = [_index_spec(offsets)]
    longest = max(lengths) + ctx.draw(st.integers(0, 1), label="extra padding")
    if "values" in _arg_names(ctx):
        ctx.shape = (offsets[-1], d)
        ctx.fixed["values"] = _tensor(ctx, ctx.shape, label="values")
        ctx.fixed["max_lengths"] = [longest]
    else:
        ctx.shape = (b, max(longest, 1), d)
        ctx.fixed["dense"] = _tensor(ctx, ctx.shape, label="dense")
        ctx.fixed["total_L"] = offsets[-1]


@family("weight_int8pack_mm")
def weight_int8pack_mm(ctx):
    """self (M, K) times int8 weights (N, K)^T, scaled per output channel by scales (N,)."""
    m, n, k = (ctx.draw(st.integers(1, 4), label=x) for x in ("m", "n", "k"))
    if ctx.dtype in ("float16", "bfloat16"):
        # torch 2.13's CPU kernel kills the process (no error) in half precision for a K that is
        # not a multiple of 8, which left the cell no valid case; K = 8 to 32 does run. (A weight
        # at an odd storage offset still kills it: that crash is a finding, so layouts stay drawn.)
        k *= 8
    ctx.shape = (m, k)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["mat2"] = _tensor(ctx, (n, k), dtype="int8", label="mat2")
    ctx.fixed["scales"] = _tensor(ctx, (n,), values="positive", label="scales")


@family("native_multi_head_attention")
def native_multi_head_attention(ctx):
    """query, key, value (B, L, E) with E divisible by the head count; packed in-projection
    weights (3E, E) and bias (3E,), out-projection (E, E) and (E,); no mask."""
    b, length = ctx.draw(st.integers(1, 2), label="batch"), ctx.draw(st.integers(1, 3), label="length")
    heads = ctx.draw(st.integers(1, 2), label="num_head")
    e = heads * ctx.draw(st.integers(1, 2), label="head dim")
    ctx.shape = (b, length, e)
    self_attention = ctx.draw(st.booleans(), label="self attention")
    query = _tensor(ctx, ctx.shape, label="query")
    ctx.fixed["query"] = query
    for name in ("key", "value"):
        ctx.fixed[name] = query if self_attention else _tensor(ctx, ctx.shape, label=name)
    ctx.fixed.update(embed_dim=e, num_head=heads, mask=None, mask_type=None)
    ctx.fixed["qkv_weight"] = _tensor(ctx, (3 * e, e), label="qkv_weight")
    ctx.fixed["qkv_bias"] = _tensor(ctx, (3 * e,), label="qkv_bias")
    ctx.fixed["proj_weight"] = _tensor(ctx, (e, e), label="proj_weight")
    ctx.fixed["proj_bias"] = _tensor(ctx, (e,), label="proj_bias")


@family("sobol_engine_draw", "sobol_engine_ff", "sobol_engine_scramble")
def sobol_engine(ctx):
    """The state SobolEngine keeps: direction numbers from _sobol_engine_initialize_state_
    (dimension, 30), the last point (dimension,), a lower-triangular binary scrambling matrix."""
    import torch

    dimension = ctx.draw(st.integers(1, 4), label="dimension")
    state = torch.zeros(dimension, 30, dtype=torch.long)
    torch._sobol_engine_initialize_state_(state, dimension)
    state_spec = TensorSpec(shape=(dimension, 30), dtype="int64", data=tuple(state.flatten().tolist()))
    ctx.fixed["dimension"] = dimension
    if ctx.op.base_name.endswith("scramble_"):
        bits = ctx.draw(st.lists(st.booleans(), min_size=30 * 30, max_size=30 * 30), label="ltm bits")
        ltm = [int(bits[i] or i // 30 == i % 30) if i % 30 <= i // 30 else 0 for i in range(900)]
        ctx.fixed["self"] = state_spec
        ctx.fixed["ltm"] = TensorSpec(shape=(dimension, 30, 30), dtype="int64", data=tuple(ltm) * dimension)
        return
    ctx.shape = (dimension,)
    points = TensorSpec(shape=(dimension,), dtype="int64", data=(0,) * dimension)
    ctx.fixed["quasi" if "quasi" in _arg_names(ctx) else "self"] = points
    ctx.fixed["sobolstate"] = state_spec
    ctx.fixed["n"] = ctx.draw(st.integers(1, 4), label="n")
    ctx.fixed["num_generated"] = 0
    if "dtype" in _arg_names(ctx):
        ctx.fixed["dtype"] = {"dtype": ctx.dtype} if ctx.dtype in ("float32", "float64") else None


@family("device")
def device_from_string(ctx):
    """torch.device("cpu:0"): a device string that names a device type."""
    arg = next((a for a in ctx.op.arguments if a.name == "a"), None)
    if arg is not None and arg.type == "str":
        ctx.fixed["a"] = ctx.draw(st.sampled_from(("cpu", "cpu:0", "meta", "cuda:1", "mps")), label="a")


# -- ops whose inputs are of another dtype than the cell's, or of one value range ---------------------


@family("float_power")
def float_power(ctx):
    """The result is float64 (complex128 for complex inputs) whatever the inputs: the in-place
    overloads write it into self, which must already be of that dtype."""
    if ctx.op.variant == "inplace":
        wide = "complex128" if ctx.dtype.startswith("complex") else "float64"
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, dtype=wide, label="self", writable=True)


@family("stft")
def stft(ctx):
    """A real or complex signal (L,) or (B, L) with n_fft <= L (and under L when centred, which
    reflect-pads by n_fft // 2), hop and window lengths within n_fft; return_complex is given,
    which torch requires for real input. Onesided only for real input."""
    names = _arg_names(ctx)
    length = ctx.draw(st.integers(2, 8), label="length")
    batch = ctx.draw(st.lists(st.integers(1, 2), max_size=1), label="batch")
    ctx.shape = (*batch, length)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    center = "center" in names and ctx.draw(st.booleans(), label="center")
    if "center" in names:
        ctx.fixed["center"] = center
        ctx.fixed["pad_mode"] = ctx.draw(st.sampled_from(("reflect", "constant", "replicate", "circular")), label="pad_mode")
    n_fft = ctx.draw(st.integers(1, length - 1 if center else length), label="n_fft")
    ctx.fixed["n_fft"] = n_fft
    # without a hop length, torch takes n_fft // 4, which is 0 (invalid) below 4
    ctx.fixed["hop_length"] = ctx.draw((st.none() if n_fft >= 4 else st.nothing()) | st.integers(1, n_fft), label="hop_length")
    win = ctx.draw(st.none() | st.integers(1, n_fft), label="win_length")
    ctx.fixed["win_length"] = win
    ctx.fixed["window"] = None if ctx.draw(st.booleans(), label="no window") else _tensor(ctx, (win or n_fft,), values="positive", label="window")
    ctx.fixed["normalized"] = ctx.draw(st.booleans(), label="normalized")
    ctx.fixed["onesided"] = None if ctx.dtype.startswith("complex") else ctx.draw(st.sampled_from((None, True, False)), label="onesided")
    ctx.fixed["return_complex"] = True
    if "align_to_window" in names:
        ctx.fixed["align_to_window"] = None


def _counts(ctx, n: int, *, label: str, high: int = 4, dtype: str | None = None) -> TensorSpec:
    """n non-negative integers below `high`, of the cell's dtype (only integer cells are valid)."""
    return draw_tensor(ctx.draw, dtype=dtype or ctx.dtype, shape=(n,), values="index", low=0, high=high, label=label)


@family("bincount")
def bincount(ctx):
    """A 1-d tensor of non-negative integers (the integer cells; the others are rejected), float
    weights of the same length or none, and a minimum length."""
    n = ctx.draw(st.integers(0, 6), label="length")
    ctx.shape = (n,)
    ctx.fixed["self"] = _counts(ctx, n, label="self", high=6)
    ctx.fixed["weights"] = None if ctx.draw(st.booleans(), label="no weights") else _tensor(ctx, (n,), dtype="float32", label="weights")
    ctx.fixed["minlength"] = ctx.draw(st.integers(0, 3), label="minlength")


@family("repeat_interleave")
def repeat_interleave(ctx):
    """Tensor repeats: 1-d non-negative integers, one per element of self along dim (of the
    flattened self without dim), or a single one; output_size, when given, is their total."""
    names = _arg_names(ctx)
    repeats = next((a for a in ctx.op.arguments if a.name == "repeats"), None)
    if repeats is None or not repeats.type.startswith("Tensor"):
        return
    if "self" in names:
        dim = ctx.draw(st.none() | dims(ctx), label="dim") if ctx.rank else None
        ctx.fixed["dim"] = dim
        n = _numel(ctx.shape) if dim is None else ctx.size(dim)
        n = 1 if ctx.draw(st.booleans(), label="one repeat") else n
    else:
        n = ctx.draw(st.integers(0, 5), label="length")
        ctx.shape = (n,)
    # with self, the repeats are an index-like argument: int64 in every cell
    ctx.fixed["repeats"] = _counts(ctx, n, label="repeats", dtype="int64" if "self" in names else None)
    ctx.fixed["output_size"] = None


@family("to_sparse", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc")
def to_sparse_compressed(ctx):
    """A dense matrix (compressed layouts hold 2-d tensors, batched or not, here unbatched) and,
    for the block layouts, a block size that divides it. The out= overloads copy into an out of
    the same layout, which must hold as many elements as the result: the same values, converted."""
    import dataclasses

    names = _arg_names(ctx)
    if ctx.op.base_name.lstrip("_") == "to_sparse":
        # the generic conversion: to sparse COO (no layout, no block size), sparse_dim <= rank
        ctx.fixed.update(layout=None, blocksize=None, dense_dim=None)
        if "sparse_dim" in names:
            ctx.fixed["sparse_dim"] = ctx.draw(st.integers(min(1, ctx.rank), ctx.rank), label="sparse_dim")
        return
    block = ctx.op.base_name.lstrip("_").startswith("to_sparse_b")
    bh, bw = (ctx.draw(st.integers(1, 2), label=f"block[{i}]") for i in range(2)) if block else (1, 1)
    ctx.shape = (bh * ctx.draw(st.integers(1, 3), label="block rows"), bw * ctx.draw(st.integers(1, 3), label="block cols"))
    out = ctx.op.variant == "out"
    ctx.fixed["self"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values=ctx.values or "real", layout="contiguous" if out else None, label="self")
    if block:
        ctx.fixed["blocksize"] = [bh, bw]
    ctx.fixed["dense_dim"] = None
    layout = {"to_sparse_csr": "sparse_csr", "to_sparse_csc": "sparse_csc"}.get(ctx.op.base_name.lstrip("_"))
    if out and layout:
        ctx.fixed["out"] = dataclasses.replace(ctx.fixed["self"], layout=layout)


@family("coalesce")
def uncoalesced(ctx):
    """_coalesce asserts that its input is not coalesced: a sparse COO tensor with each entry
    repeated (coalesce accepts both)."""
    if ctx.op.base_name == "_coalesce":
        # non-zero values, so that some entry is stored (and repeated): all zeros would be coalesced
        ctx.shape = tuple(ctx.draw(st.lists(st.integers(1, 4), min_size=1, max_size=2), label="shape"))
        ctx.fixed["self"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values="nonzero", layout="sparse_coo_uncoalesced", label="self")


@family("Delete", "__getitem__", "pop")
def dict_key(ctx):
    """dict[key], del dict[key] and dict.pop(key) on a TorchScript Dict: the key is one the dict
    holds (else KeyError). A Tensor key is the very spec of the dict's key, which
    `Case.materialize` builds once: Dict[Tensor, t] hashes tensors by identity."""
    from generators.argtypes import draw_jit, jit_formal

    names = _arg_names(ctx)
    if getattr(ctx.op, "family", "") != "torchscript" or "Dict" not in ctx.op.overload or "key" not in names:
        return
    d = draw_jit(jit_formal(ctx.op, "self"), ctx, "arg self", name="self")
    ctx.fixed["self"] = d
    keys = [k for k, _ in d["dict"]]
    ctx.fixed["key"] = keys[ctx.draw(st.integers(0, len(keys) - 1), label="key")]


@family("einsum")
def einsum_sublist(ctx):
    """einsum(a, [subscripts of a], b, [subscripts of b], ..., [output subscripts]): the sublist
    form takes its operands and subscript lists as varargs after a. Shared subscripts have one
    size; the output subscripts, when given, are distinct subscripts of the operands."""
    from generators.schema import VARARGS

    if ctx.op.overload != "sublist":
        return
    sizes = [ctx.draw(st.integers(1, 3), label=f"size[{i}]") for i in range(4)]
    operands = ctx.draw(st.integers(1, 2), label="operands")
    subs = [ctx.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label=f"subscripts[{i}]") for i in range(operands)]
    tensors = [_tensor(ctx, tuple(sizes[j] for j in sub), label=f"operand[{i}]") for i, sub in enumerate(subs)]
    ctx.shape = tensors[0].shape
    ctx.fixed["a"] = tensors[0]
    rest = [subs[0]]
    for t, sub in zip(tensors[1:], subs[1:]):
        rest += [t, sub]
    if ctx.draw(st.booleans(), label="output subscripts"):
        present = sorted({j for sub in subs for j in sub})
        # not empty: the builtin's vararg types are inferred from the values, and [] has no element type
        rest.append(ctx.draw(st.lists(st.sampled_from(present), min_size=1, max_size=len(present), unique=True), label="output"))
    ctx.fixed[VARARGS] = rest


@family("fused_adam", "fused_adamw", "fused_adagrad", "fused_sgd")
def fused_optimizer(ctx):
    """A step of a fused optimizer over a list of parameters: state_steps holds one step count per
    parameter, each a one-element float32 tensor (it is read as a number); no gradient scaling."""
    names = _arg_names(ctx)
    if "state_steps" in names:
        ctx.fixed["state_steps"] = [
            draw_tensor(ctx.draw, dtype="float32", shape=(), values="index", low=1, high=5, layout="contiguous", label=f"state_steps[{i}]")
            for i in range(len(ctx.list_shapes))
        ]
    for name in ("grad_scale", "found_inf"):
        if name in names:
            ctx.fixed[name] = None
    if "amsgrad" in names:
        # max_exp_avg_sqs is used with amsgrad only, and must be empty without it
        amsgrad = ctx.draw(st.booleans(), label="amsgrad")
        ctx.fixed["amsgrad"] = amsgrad
        if not amsgrad:
            ctx.fixed["max_exp_avg_sqs"] = []


# -- nested tensors ---------------------------------------------------------------------------------


def _nested_lengths(ctx):
    """(batch, lengths, features): the component tensors of a nested tensor are (length_i, D)."""
    b = ctx.draw(st.integers(1, 3), label="batch")
    d = ctx.draw(st.integers(1, 3), label="features")
    lengths = [ctx.draw(st.integers(1, 3), label=f"length[{i}]") for i in range(b)]
    return b, lengths, d


@family("nested_tensor_from_mask", "nested_tensor_from_mask_left_aligned")
def nested_from_mask(ctx):
    """A padded (N, L, D) batch and its (N, L) padding mask, left-aligned: each row is True for
    the first length_i positions (what the constructor keeps) and False after."""
    b, lengths, d = _nested_lengths(ctx)
    longest = max(lengths)
    ctx.shape = (b, longest, d)
    ctx.fixed["t"] = _tensor(ctx, ctx.shape, label="t")
    mask = tuple(j < n for n in lengths for j in range(longest))
    ctx.fixed["mask"] = TensorSpec(shape=(b, longest), dtype="bool", data=mask)
    if "mask_check" in _arg_names(ctx):
        ctx.fixed["mask_check"] = True


@family("nested_from_padded", "nested_from_padded_and_nested_example")
def nested_from_padded(ctx):
    """A padded (N, L, D) batch and the (N, 2) int64 sizes of its components (length_i, D)."""
    b, lengths, d = _nested_lengths(ctx)
    ctx.shape = (b, max(lengths), d)
    ctx.fixed["padded"] = _tensor(ctx, ctx.shape, label="padded")
    sizes = tuple(x for n in lengths for x in (n, d))
    ctx.fixed["cpu_nested_shape_example"] = TensorSpec(shape=(b, 2), dtype="int64", data=sizes)
    if "fuse_transform_0213" in _arg_names(ctx):
        ctx.fixed["fuse_transform_0213"] = False


@family("nested_view_from_buffer", "nested_view_from_buffer_copy")
def nested_view_from_buffer(ctx):
    """A contiguous 1-d buffer holding the components (length_i, D) one after the other: their
    (N, 2) sizes, row-major strides (D, 1) and start offsets, all int64."""
    b, lengths, d = _nested_lengths(ctx)
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n * d)
    ctx.shape = (offsets[-1],)
    ctx.fixed["self"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values=ctx.values or "real", layout="contiguous", label="self")
    ctx.fixed["nested_size"] = TensorSpec(shape=(b, 2), dtype="int64", data=tuple(x for n in lengths for x in (n, d)))
    ctx.fixed["nested_strides"] = TensorSpec(shape=(b, 2), dtype="int64", data=(d, 1) * b)
    ctx.fixed["offsets"] = TensorSpec(shape=(b,), dtype="int64", data=tuple(offsets[:-1]))


@family("renorm")
def renorm(ctx):
    """A positive norm order and a positive max norm (renorm rejects non-positive ones), over the
    sub-tensors along dim of an input of two dims or more."""
    ctx.fixed["p"] = ctx.draw(st.sampled_from((2.0, 1.0, 3.0)), label="p")
    ctx.fixed["maxnorm"] = ctx.draw(st.sampled_from((1.0, 0.5, 2.0)), label="maxnorm")
    if ctx.rank < 2:
        ctx.shape = tuple(ctx.draw(st.integers(1, 4), label=f"side[{i}]") for i in range(2))
    ctx.fixed["dim"] = ctx.draw(dims(ctx), label="dim")


@family("chain_matmul")
def chain_matmul(ctx):
    """Matrices whose inner sizes chain: (n0, n1), (n1, n2), ..."""
    k = ctx.draw(st.integers(1, 3), label="matrices")
    sides = [ctx.draw(st.integers(1, 4), label=f"side[{i}]") for i in range(k + 1)]
    ctx.shape = (sides[0], sides[1])
    ctx.fixed["matrices"] = [_tensor(ctx, (sides[i], sides[i + 1]), label=f"matrices[{i}]") for i in range(k)]


@family("diagonal_scatter")
def diagonal_scatter(ctx):
    """src is the shape of self's diagonal (offset, dim1, dim2): the other dims, then its length."""
    if ctx.rank < 2:
        ctx.shape = tuple(ctx.draw(st.integers(1, 4), label=f"side[{i}]") for i in range(2))
    rows, cols = ctx.shape[0], ctx.shape[1]
    # (an empty side leaves only offset 0, which every empty diagonal accepts)
    offset = ctx.draw(st.integers(min(0, -rows + 1), max(0, cols - 1)), label="offset")
    ctx.fixed.update(offset=offset, dim1=0, dim2=1)
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["src"] = _tensor(ctx, (*ctx.shape[2:], length), label="src")


@family("glu_jvp")
def glu_jvp(ctx):
    """glu's result (n, k) and its input and tangent (n, 2k): halved along dim 1."""
    symbolic(ctx, {"glu": "n k", "x": "n 2k", "dx": "n 2k"})
    ctx.fixed["dim"] = 1


@family("empty_permuted")
def empty_permuted(ctx):
    """A size and a physical layout that is a permutation of its dims."""
    size = [ctx.draw(st.integers(0, 3), label=f"size[{i}]") for i in range(ctx.draw(st.integers(0, 3), label="rank"))]
    ctx.fixed["size"] = size
    ctx.fixed["physical_layout"] = ctx.draw(st.permutations(list(range(len(size)))), label="physical_layout")


_SPLIT_DIM = {"vsplit": (0, 2), "hsplit": (1, 1), "dsplit": (2, 3)}  # (dim, least rank)


@family("dsplit", "hsplit", "vsplit")
def directional_split(ctx):
    """A tensor of the rank the split needs; an int number of sections that divides its dim
    (hsplit splits a 1-d tensor along dim 0)."""
    dim, least = _SPLIT_DIM[ctx.op.base_name]
    if ctx.rank < least:
        ctx.shape = tuple(ctx.draw(st.integers(1, 4), label=f"side[{i}]") for i in range(least))
    if "sections" in _arg_names(ctx):
        size = ctx.shape[dim if ctx.rank > 1 else 0]
        ctx.fixed["sections"] = ctx.draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0] or [1]), label="sections")

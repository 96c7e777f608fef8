"""Indexing ops: an index tensor sized to the dim it indexes, a mask that broadcasts."""

from __future__ import annotations

from generators import memo
from generators.argtypes import dims, draw_index
from generators.case import TensorSpec
from generators.families.common import _arg_names, _sub_shape, _tensor
from generators.families.registry import family
from generators.families.script import list_member
from generators.strategies import draw_tensor

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
        ishape = (ctx.draw(memo.integers(0, 4), label="index len"),)
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
    n = ctx.draw(memo.integers(0, 4), label="index len") if ctx.rank else 1
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
    if ctx.op.overload.endswith("hacked_twin"):
        _hacked_twin_indices(ctx)
    elif getattr(ctx.op, "family", "") == "torchscript":
        list_member(ctx)
        return
    if "values" in names:
        ctx.fixed["values"] = _tensor(ctx, (), label="values")


@family("take", "put")
def take_like(ctx):
    names = _arg_names(ctx)
    n = ctx.draw(memo.integers(0, 4), label="index len")
    high = max(1, _numel(ctx.shape))
    if _numel(ctx.shape) == 0:
        n = 0
    ctx.fixed["index"] = draw_index(ctx, high=high, shape=(n,), label="index")
    if "source" in names:
        ctx.fixed["source"] = _tensor(ctx, (n,), label="source")


def _hacked_twin_indices(ctx):
    """The hacked twins (TorchScript's Tensor[] spelling of Tensor?[] indices) index self's
    leading dims with one int64 tensor each, all of one length, in range: none may be None, so
    self has a dim for each (a 0-d self: "too many indices for tensor of dimension 0"). The
    unsafe ones do not check bounds, so no index points past the end there."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self", writable=ctx.op.variant == "inplace")
    k = ctx.draw(memo.integers(1, ctx.rank), label="indices count")
    n = ctx.draw(memo.integers(0, 3), label="indices len")
    # the unsafe ones (and _index_put_impl_, whose unsafe=True skips the check) never point
    # past the end; the others may, through the first index only (draw_index's one in six)
    unsafe = ctx.op.base_name.startswith("_unsafe") or "unsafe" in _arg_names(ctx)
    ctx.fixed["indices"] = [
        draw_tensor(
            ctx.draw,
            dtype="int64",
            shape=(n,),
            values="index",
            low=0,
            high=max(side, 1),
            layout="contiguous",
            label=f"indices[{i}]",
        )
        if unsafe or not side or i > 0
        else draw_index(ctx, high=side, shape=(n,), label=f"indices[{i}]")
        for i, side in enumerate(ctx.shape[:k])
    ]
    if any(side == 0 for side in ctx.shape[:k]):
        # nothing is in range of an empty dim: only empty indices are
        ctx.fixed["indices"] = [TensorSpec(shape=(0,), dtype="int64") for _ in range(k)]

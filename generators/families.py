"""Family builders: what a schema cannot say about an op's arguments.

A builder takes the `Context` of a case before the generic argument strategies run and
pre-draws some arguments into `ctx.fixed` (and may change `ctx.shape`). Builders are keyed by
operator base name with leading underscores and a trailing inplace underscore stripped, so
`conv2d`, `_convolution` and `convolution` can share one.
"""

from __future__ import annotations

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
    b = _BUILDERS.get(op.base_name)
    if b is None:
        b = _BUILDERS.get(key(op.base_name))
    return b


# -- helpers ---------------------------------------------------------------------------------------

from hypothesis import strategies as st  # noqa: E402

from generators.argtypes import dims, index_tensors  # noqa: E402
from generators.strategies import tensors  # noqa: E402


def _tensor(ctx, shape, *, label, dtype=None, values=None, writable=False):
    return ctx.draw(tensors(dtype=dtype or ctx.dtype, shape=tuple(shape), values=values or ctx.values or "real", writable=writable), label=label)


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
            ctx.fixed[name] = ctx.draw(index_tensors(ctx, high=high, shape=ishape), label=name)
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
    ctx.fixed["index"] = ctx.draw(index_tensors(ctx, high=ctx.size(dim), shape=(n,)), label="index")
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
    if "values" in names:
        ctx.fixed["values"] = _tensor(ctx, (), label="values")


@family("take", "put")
def take_like(ctx):
    names = _arg_names(ctx)
    n = ctx.draw(st.integers(0, 4), label="index len")
    high = max(1, _numel(ctx.shape))
    if _numel(ctx.shape) == 0:
        n = 0
    ctx.fixed["index"] = ctx.draw(index_tensors(ctx, high=high, shape=(n,)), label="index")
    if "source" in names:
        ctx.fixed["source"] = _tensor(ctx, (n,), label="source")

"""Nested tensors: lengths, masks, padded buffers and the jagged kernels."""

from __future__ import annotations

from generators import memo
from generators.case import TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.families.sparse import _index_spec
from generators.strategies import draw_tensor


@family("jagged_to_padded_dense_forward", "padded_dense_to_jagged_forward")
def jagged(ctx):
    """Jagged rows (total, D) with one offsets tensor (0, ..., total) and the padded (B, L, D)."""
    b = ctx.draw(memo.integers(1, 3), label="batch")
    d = ctx.draw(memo.integers(1, 3), label="features")
    lengths = [ctx.draw(memo.integers(0, 3), label=f"length[{i}]") for i in range(b)]
    offsets = [0]
    for length in lengths:
        offsets.append(offsets[-1] + length)
    ctx.fixed["offsets"] = [_index_spec(offsets)]
    longest = max(lengths) + ctx.draw(memo.integers(0, 1), label="extra padding")
    if "values" in _arg_names(ctx):
        ctx.shape = (offsets[-1], d)
        ctx.fixed["values"] = _tensor(ctx, ctx.shape, label="values")
        ctx.fixed["max_lengths"] = [longest]
    else:
        ctx.shape = (b, max(longest, 1), d)
        ctx.fixed["dense"] = _tensor(ctx, ctx.shape, label="dense")
        ctx.fixed["total_L"] = offsets[-1]


# -- nested tensors ---------------------------------------------------------------------------------


def _nested_lengths(ctx):
    """(batch, lengths, features): the component tensors of a nested tensor are (length_i, D)."""
    b = ctx.draw(memo.integers(1, 3), label="batch")
    d = ctx.draw(memo.integers(1, 3), label="features")
    lengths = [ctx.draw(memo.integers(1, 3), label=f"length[{i}]") for i in range(b)]
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
    ctx.fixed["self"] = draw_tensor(
        ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values=ctx.values or "real", layout="contiguous", label="self"
    )
    ctx.fixed["nested_size"] = TensorSpec(shape=(b, 2), dtype="int64", data=tuple(x for n in lengths for x in (n, d)))
    ctx.fixed["nested_strides"] = TensorSpec(shape=(b, 2), dtype="int64", data=(d, 1) * b)
    ctx.fixed["offsets"] = TensorSpec(shape=(b,), dtype="int64", data=tuple(offsets[:-1]))

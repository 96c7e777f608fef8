"""Order statistics and shape ops: dims, sizes and splits drawn within the tensor's shape."""

from __future__ import annotations

from generators import memo
from generators.argtypes import dims
from generators.case import TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.families.sparse import _index_spec
from generators.strategies import draw_tensor

# -- order statistics and shape ops ------------------------------------------------------------------


@family("topk", "kthvalue")
def topk_like(ctx):
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    dim = ctx.draw(dims(ctx), label="dim")
    ctx.fixed["dim"] = dim
    size = ctx.size(dim)
    ctx.fixed["k"] = ctx.draw(
        memo.integers(1 if ctx.op.base_name == "kthvalue" else 0, size) if size else memo.just(0), label="k"
    )


@family("cartesian_prod", "meshgrid", "combinations")
def products_of_vectors(ctx):
    """1-d inputs of at most 6 elements: the output is the product of their sizes (or n choose r),
    so the element cap on inputs alone let one case ask for gigabytes."""
    names = _arg_names(ctx)
    if "tensors" in names:
        k = ctx.draw(memo.integers(1, 3), label="tensors")
        ctx.fixed["tensors"] = [
            _tensor(ctx, (ctx.draw(memo.integers(0, 6), label=f"size[{i}]"),), label=f"tensors[{i}]") for i in range(k)
        ]
    elif "self" in names:
        ctx.shape = (ctx.draw(memo.integers(0, 6), label="size"),)
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")


@family("set")
def set_storage_view(ctx):
    """set_(self, source, storage_offset, size, stride): a view that lies inside source's storage.

    set_ grows a storage that is too small instead of raising, with uninitialised memory in the
    new part, so a view past the end compares garbage with garbage.
    """
    if "storage_offset" not in _arg_names(ctx):
        return
    n = ctx.draw(memo.integers(1, 8), label="source numel")
    ctx.fixed["source"] = draw_tensor(
        ctx.draw, dtype=ctx.dtype, shape=(n,), values=ctx.values or "real", layout="contiguous", label="source"
    )
    offset = ctx.draw(memo.integers(0, n - 1), label="storage_offset")
    rows = ctx.draw(memo.integers(1, n - offset), label="rows")
    cols = ctx.draw(memo.integers(1, (n - offset) // rows), label="cols")
    ctx.fixed["storage_offset"] = offset
    ctx.fixed["size"] = [rows, cols]
    ctx.fixed["stride"] = [cols, 1]


@family(
    "select",
    "narrow",
    "narrow_copy",
    "select_copy",
    "select_scatter",
    "slice_scatter",
    "slice",
    "slice_copy",
    "unbind",
    "unsqueeze",
    "unsqueeze_copy",
    "unflatten",
    "movedim",
    "moveaxis",
    "unfold",
    "split_with_sizes",
    "split_with_sizes_copy",
    "unsafe_split_with_sizes",
    "split",
    "diagonal",
    "diag_embed",
    "tril",
    "triu",
    "tril_indices",
    "triu_indices",
)
def positional_dims(ctx):
    """Index, start and length arguments within the size of the chosen dim."""
    names = _arg_names(ctx)
    base = ctx.op.base_name.lstrip("_").removesuffix("_")
    if base == "select" and ctx.op.overload == "t":
        # TorchScript's list[idx] (select.t(t[] list, int idx)), not a tensor's select
        from generators.families.script import list_and_index

        list_and_index(ctx, "list")
        return
    if base in ("tril_indices", "triu_indices"):
        ctx.fixed["row"] = ctx.draw(memo.integers(0, 4), label="row")
        ctx.fixed["col"] = ctx.draw(memo.integers(0, 4), label="col")
        return
    if ctx.rank == 0 or base in ("diagonal", "diag_embed", "tril", "triu", "select_scatter", "narrow", "select"):
        if ctx.rank < 2:
            ctx.shape = tuple(ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(2))
    r = ctx.rank
    if base in ("unsqueeze", "unsqueeze_copy"):
        ctx.fixed["dim"] = ctx.draw(memo.integers(-r - 1, r), label="dim")
        return
    dim = ctx.draw(dims(ctx), label="dim")
    size = ctx.size(dim)
    if "dim" in names and next(a for a in ctx.op.arguments if a.name == "dim").type.startswith(("int", "SymInt")):
        ctx.fixed["dim"] = dim
    if base in ("select", "select_copy"):
        ctx.fixed["index"] = ctx.draw(memo.integers(-size, size - 1) if size else memo.just(0), label="index")
    elif base in ("select_scatter",):
        idx = ctx.draw(memo.integers(0, size - 1) if size else memo.just(0), label="index")
        ctx.fixed["index"] = idx
        src_shape = tuple(s for i, s in enumerate(ctx.shape) if i != dim % r)
        ctx.fixed["src"] = _tensor(ctx, src_shape, label="src")
    elif base == "slice_scatter":
        # src of the slice's shape ("expected src to have a size equal to the slice of self",
        # TensorShape.cpp's slice_scatter): drawn apart, it was valid by luck
        start = ctx.draw(memo.integers(0, size), label="start")
        end = ctx.draw(memo.integers(start, size), label="end")
        step = ctx.draw(memo.integers(1, 2), label="step")
        ctx.fixed.update(start=start, end=end, step=step)
        src_shape = tuple(len(range(start, end, step)) if i == dim % r else s for i, s in enumerate(ctx.shape))
        ctx.fixed["src"] = _tensor(ctx, src_shape, label="src")
    elif base in ("narrow", "narrow_copy"):
        start = ctx.draw(memo.integers(0, size), label="start")
        start_is_tensor = next(a for a in ctx.op.arguments if a.name == "start").type.startswith("Tensor")
        ctx.fixed["start"] = TensorSpec(shape=(), dtype="int64", data=(start,)) if start_is_tensor else start
        ctx.fixed["length"] = ctx.draw(memo.integers(0, size - start), label="length")
    elif base in ("unflatten",):
        ctx.fixed["sizes"] = [1, size] if ctx.draw(memo.booleans(), label="split") else [size, -1] if size else [size]
    elif base in ("split_with_sizes", "split_with_sizes_copy", "unsafe_split_with_sizes", "split") and _sizes_arg(ctx):
        # sizes that sum to the dim's size (split's list overloads are split_with_sizes)
        a = ctx.draw(memo.integers(0, size), label="first")
        ctx.fixed[_sizes_arg(ctx)] = [a, size - a]
        ctx.list_shapes = [ctx.shape] * 2  # an out= overload's list of outs: one per piece
    elif base == "unfold":
        ctx.fixed["dimension"] = dim
        ctx.fixed["size"] = ctx.draw(memo.integers(0, size), label="size")
        ctx.fixed["step"] = ctx.draw(memo.integers(1, 2), label="step")
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


@family("reshape_from_tensor")
def reshape_from_tensor(ctx):
    """A target shape, as a 1-d int64 tensor, with as many elements as self."""
    import math

    numel = math.prod(ctx.shape)
    split = ctx.draw(memo.booleans(), label="split") and numel % 2 == 0 and numel > 0
    ctx.fixed["shape"] = _index_spec([2, numel // 2] if split else [numel])


@family("diagonal_scatter")
def diagonal_scatter(ctx):
    """src is the shape of self's diagonal (offset, dim1, dim2): the other dims, then its length."""
    if ctx.rank < 2:
        ctx.shape = tuple(ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(2))
    rows, cols = ctx.shape[0], ctx.shape[1]
    # (an empty side leaves only offset 0, which every empty diagonal accepts)
    offset = ctx.draw(memo.integers(min(0, -rows + 1), max(0, cols - 1)), label="offset")
    ctx.fixed.update(offset=offset, dim1=0, dim2=1)
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["src"] = _tensor(ctx, (*ctx.shape[2:], length), label="src")


@family("empty_permuted")
def empty_permuted(ctx):
    """A size and a physical layout that is a permutation of its dims."""
    size = [
        ctx.draw(memo.integers(0, 3), label=f"size[{i}]") for i in range(ctx.draw(memo.integers(0, 3), label="rank"))
    ]
    ctx.fixed["size"] = size
    ctx.fixed["physical_layout"] = ctx.draw(memo.permutations(list(range(len(size)))), label="physical_layout")


_SPLIT_DIM = {"vsplit": (0, 2), "hsplit": (1, 1), "dsplit": (2, 3)}  # (dim, least rank)


@family("dsplit", "hsplit", "vsplit")
def directional_split(ctx):
    """A tensor of the rank the split needs; an int number of sections that divides its dim
    (hsplit splits a 1-d tensor along dim 0)."""
    dim, least = _SPLIT_DIM[ctx.op.base_name]
    if ctx.rank < least:
        ctx.shape = tuple(ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(least))
    if "sections" in _arg_names(ctx):
        size = ctx.shape[dim if ctx.rank > 1 else 0]
        ctx.fixed["sections"] = ctx.draw(
            memo.sampled_from([d for d in range(1, size + 1) if size % d == 0] or [1]), label="sections"
        )


@family("channel_shuffle", "native_channel_shuffle")
def channel_shuffle(ctx):
    """(N, C, *) with one spatial dim or more and a group count that divides C
    (ChanelShuffle.cpp: "expects input with > 2 dims", "channels must be divisible by groups")."""
    if ctx.rank < 3:
        ctx.shape = tuple(ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(3))
    c = ctx.shape[1]
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["groups"] = ctx.draw(memo.sampled_from([g for g in range(1, c + 1) if c % g == 0] or [1]), label="groups")


@family("split_copy")
def split_copy(ctx):
    """A tensor of one dim or more ("split expects at least a 1-dimensional tensor"), a positive
    split size (0 only splits an empty dim), and for the out= overload one out per piece, each of
    the piece's shape: split_copy copies into its outs without resizing them."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 5), label="size"),)
    dim = ctx.draw(dims(ctx), label="dim")
    size = ctx.size(dim)
    split = ctx.draw(memo.integers(1, max(size, 1)), label="split_size")
    ctx.fixed.update(self=_tensor(ctx, ctx.shape, label="self"), split_size=split, dim=dim)
    if ctx.op.variant == "out":
        d = dim % ctx.rank
        pieces = [min(split, size - start) for start in range(0, size, split)] or [0]
        ctx.fixed["out"] = [
            TensorSpec(shape=ctx.shape[:d] + (n,) + ctx.shape[d + 1 :], dtype=ctx.dtype, layout="contiguous")
            for n in pieces
        ]


@family("add_batch_dim")
def add_batch_dim(ctx):
    """The legacy vmap wrapper: a batch dim of self (a 0-d self has none: "Could not allocate
    memory to change Tensor SizesAndStrides!"; a negative one is out of its level bitset) and a
    vmap level in [0, 64) (LegacyBatchedTensorImpl.cpp keeps the levels in a 64-bit set)."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["batch_dim"] = ctx.draw(memo.integers(0, ctx.rank - 1), label="batch_dim")
    ctx.fixed["level"] = ctx.draw(memo.integers(0, 63), label="level")


@family("to_mkldnn")
def to_mkldnn(ctx):
    """oneDNN has no 0-d memory: converting a 0-d tensor fails in dense_to_mkldnn
    (aten/src/ATen/native/mkldnn/MKLDNNConversions.cpp: "could not create a primitive descriptor for
    the reorder primitive"), so self has one dim or more. The out= form's out is an mkldnn tensor of
    the result's size (generators.backward), since an mkldnn tensor cannot be resized."""
    if not ctx.shape:
        ctx.shape = (ctx.draw(memo.integers(1, 5), label="length"),)


@family("unflatten_dense_tensors")
def unflatten_dense_tensors(ctx):
    """The flat buffer of the tensors: 1-d, as long as their elements together
    (torch/csrc/utils/tensor_flatten.h's unflatten_dense_tensors narrows it tensor by tensor:
    "start (N) + length (N) exceeds dimension size (N)" for a shorter one)."""
    n = ctx.draw(memo.integers(1, 3), label="tensors")
    shapes = [ctx.draw(memo.lists(memo.integers(0, 3), max_size=2), label=f"tensors[{i}] shape") for i in range(n)]
    tensors = [_tensor(ctx, tuple(s), label=f"tensors[{i}]") for i, s in enumerate(shapes)]
    total = sum(t.numel for t in tensors)
    ctx.shape = (total,)
    ctx.fixed["flat"] = _tensor(ctx, ctx.shape, label="flat")
    ctx.fixed["tensors"] = tensors


@family("unfold_backward")
def unfold_backward(ctx):
    """The gradient of self.unfold(dim, size, step) for a self of input_sizes: input_sizes with
    dim replaced by the window count (sizes[dim] - size) // step + 1 and the window size last, a
    positive step and a size within the dim (UnfoldBackward.cpp; any other grad_in was rejected:
    "step is 0 but must be > 0", "The size of tensor a must match", valid by luck)."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="side"),)
    sizes = list(ctx.shape)
    dim = ctx.draw(memo.integers(0, len(sizes) - 1), label="dim")
    size = ctx.draw(memo.integers(0, sizes[dim]), label="size")
    step = ctx.draw(memo.integers(1, 3), label="step")
    windows = (sizes[dim] - size) // step + 1
    grad = (*sizes[:dim], windows, *sizes[dim + 1 :], size)
    ctx.fixed["grad_in"] = _tensor(ctx, grad, label="grad_in")
    ctx.fixed["input_sizes"] = sizes
    ctx.fixed["dim"] = dim - len(sizes) if ctx.draw(memo.booleans(), label="negative dim") else dim
    ctx.fixed["size"] = size
    ctx.fixed["step"] = step


@family("tensor_split")
def tensor_split(ctx):
    """tensor_indices_or_sections is an int64 tensor: 0-d, a number of sections (>= 1), or 1-d,
    the indices to split at; self has a dim (TensorShape.cpp's tensor_split: "expected
    tensor_indices_or_sections to have dtype of long", "to be a zero-dimensional or
    one-dimensional tensor", "expected at least a 1-dimensional tensor"). Drawn as a tensor of
    the cell's dtype and shape, it was valid by luck."""
    if ctx.op.overload != "tensor_indices_or_sections":
        return
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 5), label="side"),)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    dim = ctx.draw(dims(ctx), label="dim")
    ctx.fixed["dim"] = dim
    size = ctx.size(dim)
    if ctx.draw(memo.booleans(), label="sections"):
        count = ctx.draw(memo.integers(1, max(size, 1) + 1), label="count")
        ctx.fixed["tensor_indices_or_sections"] = TensorSpec(shape=(), dtype="int64", data=(count,))
    else:
        at = ctx.draw(memo.lists(memo.integers(0, size + 1), max_size=3), label="indices")
        ctx.fixed["tensor_indices_or_sections"] = TensorSpec(shape=(len(at),), dtype="int64", data=tuple(at))


@family("as_strided_scatter")
def as_strided_scatter(ctx):
    """A view (size, stride, storage_offset) inside self's storage and a src of the view's size
    (TensorShape.cpp's as_strided_scatter: "expected src to have a size equal to the slice of
    self", "setStorage: ... out of bounds for storage", "Storage size calculation overflowed"):
    drawn apart, one case in three was valid. self is (rows, cols), as large as the view needs."""
    k = ctx.draw(memo.integers(1, 2), label="view dims")
    size = [ctx.draw(memo.integers(1, 3), label=f"size[{i}]") for i in range(k)]
    # no two elements of the view at one place ("more than one element of the written-to tensor
    # refers to a single memory location"): each dim steps past the whole of the next
    stride = [ctx.draw(memo.integers(1, 2), label="inner stride")]
    if k == 2:
        stride.insert(0, size[1] * stride[0] + ctx.draw(memo.integers(0, 1), label="outer gap"))
    offset = ctx.draw(memo.integers(0, 2), label="storage_offset")
    needed = offset + 1 + sum((s - 1) * t for s, t in zip(size, stride))
    cols = ctx.draw(memo.integers(1, 4), label="cols")
    rows = -(-needed // cols) + ctx.draw(memo.integers(0, 1), label="extra rows")
    ctx.shape = (rows, cols)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["src"] = _tensor(ctx, tuple(size), label="src")
    ctx.fixed.update(size=size, stride=stride, storage_offset=offset)

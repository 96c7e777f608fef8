"""Sparse layouts: COO and compressed constructors, conversions, sparse matmuls."""

from __future__ import annotations

import dataclasses
import re

from generators import memo
from generators.case import TensorSpec
from generators.context import OMIT
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.families.tables import symbolic
from generators.strategies import draw_tensor


def _sparse(spec):
    return dataclasses.replace(spec, layout="sparse_coo")


@family("hspmm", "smm", "sspaddmm", "sparse_addmm")
def sparse_matmul(ctx):
    """Matrix products whose first factor is a sparse COO matrix, and so is sspaddmm's self
    (and result); _sparse_addmm adds to a dense self."""
    adds = ctx.op.base_name in ("sspaddmm", "_sparse_addmm")
    symbolic(
        ctx, {"self": "n m", "mat1": "n k", "mat2": "k m"} if adds else {"self": "n k", "mat1": "n k", "mat2": "k m"}
    )
    for name in ("mat1",) if ctx.op.base_name == "_sparse_addmm" else ("self", "mat1"):
        if isinstance(ctx.fixed.get(name), TensorSpec):
            ctx.fixed[name] = _sparse(ctx.fixed[name])
    if ctx.op.variant == "out" and ctx.op.base_name != "_sparse_addmm":
        # the result is sparse, and so must the out be
        n, m = ctx.shape[0], ctx.fixed["mat2"].shape[1]
        ctx.fixed["out"] = TensorSpec(shape=(n, m), dtype=ctx.dtype, layout="sparse_coo")


# -- sparse constructors ---------------------------------------------------------------------------


def _sparsity(ctx):
    """(n, m, [(row, col), ...]): a drawn n x m sparsity pattern, row-major."""
    n = ctx.draw(memo.integers(1, 4), label="rows")
    m = ctx.draw(memo.integers(1, 4), label="cols")
    mask = ctx.draw(memo.lists(memo.booleans(), min_size=n * m, max_size=n * m), label="pattern")
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
            size = [
                ctx.draw(memo.integers(0, 4), label=f"size[{i}]")
                for i in range(ctx.draw(memo.integers(1, 3), label="rank"))
            ]
            ctx.fixed["size"] = size
            ctx.fixed["out"] = TensorSpec(shape=tuple(size), dtype=ctx.dtype, layout="sparse_coo")
        return
    n, m, entries = _sparsity(ctx)
    ctx.fixed["indices"] = TensorSpec(
        shape=(2, len(entries)), dtype="int64", data=tuple(r for r, _ in entries) + tuple(c for _, c in entries)
    )
    ctx.fixed["values"] = _tensor(ctx, (len(entries),), label="values")
    ctx.shape = (n, m)
    if "size" in names:
        ctx.fixed["size"] = [n + ctx.draw(memo.integers(0, 1), label="extra rows"), m]
    if "layout" in names:
        ctx.fixed["layout"] = OMIT


_COMPRESSED_LAYOUTS = {"csr": "sparse_csr", "csc": "sparse_csc", "bsr": "sparse_bsr", "bsc": "sparse_bsc"}


@family(
    "sparse_compressed_tensor",
    "sparse_compressed_tensor_unsafe",
    "validate_sparse_compressed_tensor_args",
    "validate_sparse_csr_tensor_args",
    "validate_sparse_csc_tensor_args",
    "validate_sparse_bsr_tensor_args",
    "validate_sparse_bsc_tensor_args",
    "validate_compressed_sparse_indices",
    # the per-layout constructors, safe and unsafe (key() strips the leading underscore)
    "sparse_csr_tensor",
    "sparse_csc_tensor",
    "sparse_bsr_tensor",
    "sparse_bsc_tensor",
    "sparse_csr_tensor_unsafe",
    "sparse_csc_tensor_unsafe",
    "sparse_bsr_tensor_unsafe",
    "sparse_bsc_tensor_unsafe",
)
def sparse_compressed_constructor(ctx):
    """Compressed (row or column) and plain indices of a drawn pattern; block layouts with 1 x 1
    blocks, whose values are (nnz, 1, 1)."""
    names = _arg_names(ctx)
    m_ = re.search(r"(csr|csc|bsr|bsc)", ctx.op.base_name)
    kind = m_.group(1) if m_ else ctx.draw(memo.sampled_from(tuple(_COMPRESSED_LAYOUTS)), label="layout")
    n, m, entries = _sparsity(ctx)
    by_column = kind in ("csc", "bsc")
    if "is_crow" in names:
        by_column = not ctx.draw(memo.booleans(), label="is_crow")
        ctx.fixed["is_crow"] = not by_column
    ordered = sorted((c, r) for r, c in entries) if by_column else entries
    compressed, plain = _compressed(m if by_column else n, ordered)
    if "is_crow" in names:
        ctx.fixed.update(
            compressed_idx=compressed,
            plain_idx=plain,
            cdim=m if by_column else n,
            dim=n if by_column else m,
            nnz=len(entries),
        )
        return
    first, second = [a.name for a in ctx.op.arguments if a.type.startswith("Tensor")][:2]
    ctx.fixed[first], ctx.fixed[second] = compressed, plain
    ctx.fixed["values"] = _tensor(
        ctx, (len(entries), 1, 1) if kind.startswith("b") else (len(entries),), label="values"
    )
    ctx.shape = (n, m)
    if "size" in names:
        ctx.fixed["size"] = [n, m]
    if "layout" in names:
        ctx.fixed["layout"] = {"layout": _COMPRESSED_LAYOUTS[kind]}
    if "dtype" in names:
        # the values' dtype: an omitted one is the default dtype, not the values' (the ATen
        # constructors, unlike torch.sparse_*_tensor, do not infer it: "dtype of values (Int)
        # must match dtype of sparse tensor (Float)")
        ctx.fixed["dtype"] = {"dtype": ctx.dtype}


@family("spdiags")
def spdiags(ctx):
    """diagonals (k, n) placed at k distinct offsets of an (m, n) matrix."""
    m, n = ctx.draw(memo.integers(1, 4), label="rows"), ctx.draw(memo.integers(1, 4), label="cols")
    offsets = ctx.draw(memo.lists(memo.integers(-m + 1, n - 1), min_size=1, max_size=3, unique=True), label="offsets")
    ctx.shape = (len(offsets), n)
    ctx.fixed["diagonals"] = _tensor(ctx, ctx.shape, label="diagonals")
    ctx.fixed["offsets"] = TensorSpec(shape=(len(offsets),), dtype="int64", data=tuple(offsets))
    ctx.fixed["shape"] = [m, n]
    ctx.fixed["layout"] = None
    if ctx.op.variant == "out":
        ctx.fixed["out"] = TensorSpec(shape=(m, n), dtype=ctx.dtype, layout="sparse_coo")  # the result is sparse COO


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
            ctx.fixed["sparse_dim"] = ctx.draw(memo.integers(min(1, ctx.rank), ctx.rank), label="sparse_dim")
        return
    block = ctx.op.base_name.lstrip("_").startswith("to_sparse_b")
    bh, bw = (ctx.draw(memo.integers(1, 2), label=f"block[{i}]") for i in range(2)) if block else (1, 1)
    ctx.shape = (
        bh * ctx.draw(memo.integers(1, 3), label="block rows"),
        bw * ctx.draw(memo.integers(1, 3), label="block cols"),
    )
    out = ctx.op.variant == "out"
    ctx.fixed["self"] = draw_tensor(
        ctx.draw,
        dtype=ctx.dtype,
        shape=ctx.shape,
        values=ctx.values or "real",
        layout="contiguous" if out else None,
        label="self",
    )
    if block:
        ctx.fixed["blocksize"] = [bh, bw]
    ctx.fixed["dense_dim"] = None
    layout = {"to_sparse_csr": "sparse_csr", "to_sparse_csc": "sparse_csc"}.get(ctx.op.base_name.lstrip("_"))
    if out and layout:
        ctx.fixed["out"] = dataclasses.replace(ctx.fixed["self"], layout=layout)
    elif out and block:
        # copy_sparse_compressed_ keeps the out's block size and needs its nnz: self's blocks
        layout = "sparse_bsr" if ctx.op.base_name.lstrip("_") == "to_sparse_bsr" else "sparse_bsc"
        ctx.fixed["out"] = dataclasses.replace(ctx.fixed["self"], layout=layout, blocksize=(bh, bw))


@family("coalesce")
def uncoalesced(ctx):
    """_coalesce asserts that its input is not coalesced: a sparse COO tensor with each entry
    repeated (coalesce accepts both)."""
    if ctx.op.base_name == "_coalesce":
        # non-zero values, so that some entry is stored (and repeated): all zeros would be coalesced
        ctx.shape = tuple(ctx.draw(memo.lists(memo.integers(1, 4), min_size=1, max_size=2), label="shape"))
        ctx.fixed["self"] = draw_tensor(
            ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values="nonzero", layout="sparse_coo_uncoalesced", label="self"
        )


@family("copy_sparse_to_sparse")
def copy_sparse_to_sparse(ctx):
    """A COO self and src of one shape and one number of sparse dims (it refuses to change that
    on a non-empty tensor)."""
    ctx.fixed["self"] = _sparse(_tensor(ctx, ctx.shape, label="self"))
    ctx.fixed["src"] = _sparse(_tensor(ctx, ctx.shape, label="src"))


@family("sparse_compressed_tensor_with_dims")
def sparse_compressed_with_dims(ctx):
    """An empty compressed tensor: a compressed layout (none is "expected sparse compressed tensor
    layout but got none"), a matrix size, a block size that divides it for the block layouts."""
    layout = ctx.draw(memo.sampled_from(("sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc")), label="layout")
    block = (
        [ctx.draw(memo.integers(1, 2), label=f"block[{i}]") for i in range(2)]
        if layout in ("sparse_bsr", "sparse_bsc")
        else []
    )
    rows, cols = (
        ctx.draw(memo.integers(1, 3), label=x) * (block[i] if block else 1) for i, x in enumerate(("rows", "cols"))
    )
    ctx.fixed.update(size=[rows, cols], blocksize=block, dense_dim=0, layout={"layout": layout})
    ctx.fixed["nnz"] = ctx.draw(
        memo.integers(0, rows * cols // max(1, block[0] * block[1] if block else 1)), label="nnz"
    )
    ctx.fixed["index_dtype"] = {"dtype": ctx.draw(memo.sampled_from(("int32", "int64")), label="index dtype")}


@family("sparse_mask_projection")
def sparse_mask_projection(ctx):
    """A COO self projected onto a COO mask of its shape (Tensor.sparse_mask's backward calls it
    with both sparse; a strided mask is an internal assert, "mask.is_sparse()")."""
    shape = tuple(ctx.shape) or (ctx.draw(memo.integers(1, 4), label="length"),)
    ctx.shape = shape
    ctx.fixed["self"] = _sparse(_tensor(ctx, shape, label="self"))
    ctx.fixed["mask"] = _sparse(_tensor(ctx, shape, label="mask"))


@family("sparse_mask")
def sparse_mask(ctx):
    """self (strided, or COO as the layout rule draws it) masked by a COO mask of its shape: the
    mask must be sparse (a strided one reaches "Could not run 'aten::_nnz' ... 'CPU' backend");
    the out= overload copies into a COO out of the result's shape, which it cannot resize."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="length"),)
    ctx.fixed["mask"] = _sparse(_tensor(ctx, ctx.shape, label="mask"))
    if ctx.op.variant == "out":
        ctx.fixed["out"] = TensorSpec(shape=ctx.shape, dtype=ctx.dtype, layout="sparse_coo")


@family("sparse_resize", "sparse_resize_and_clear", "resize_as_sparse")
def sparse_resize(ctx):
    """A COO self (every dim sparse, as to_sparse makes it) resized to a size at least as large
    in every dim, with its own sparse and dense dim counts: a non-empty sparse tensor refuses to
    change those or shrink ("'len(size) == sparse_dim + dense_dim' is not satisfied", "changing
    the number of sparse dimensions ... on a non-empty sparse tensor is not supported":
    SparseTensor.cpp's sparse_resize_ and resize_as_sparse_; sparse_resize_and_clear needs the
    lengths to agree too). resize_as_sparse takes the size from a COO template."""
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="side"),)
    ctx.fixed["self"] = _sparse(_tensor(ctx, ctx.shape, label="self"))
    size = [s + ctx.draw(memo.integers(0, 2), label=f"grow[{i}]") for i, s in enumerate(ctx.shape)]
    names = _arg_names(ctx)
    if "the_template" in names:
        ctx.fixed["the_template"] = _sparse(_tensor(ctx, tuple(size), label="the_template"))
    else:
        ctx.fixed.update(size=size, sparse_dim=len(size), dense_dim=0)
    if "out" in names:
        ctx.fixed["out"] = _sparse(_tensor(ctx, tuple(size), label="out", writable=True))


@family("sparse_softmax", "sparse_log_softmax")
def sparse_softmax(ctx):
    """A COO self (a dense one has no CPU kernel: "Could not run 'aten::_sparse_softmax' with
    arguments from the 'CPU' backend"), a dim within it, and no half_to_float ("softmax: with half
    to float conversion is not supported on CPU", aten/src/ATen/native/sparse/SoftMax.cpp): drawn
    apart, one case in four was valid, the simplest."""
    if "backward" in ctx.op.base_name:
        return
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="side"),)
    ctx.fixed["self"] = _sparse(_tensor(ctx, ctx.shape, label="self"))
    ctx.fixed["dim"] = ctx.draw(memo.integers(-ctx.rank, ctx.rank - 1), label="dim")
    if "half_to_float" in _arg_names(ctx):
        ctx.fixed["half_to_float"] = False

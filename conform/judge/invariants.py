"""Documented invariants of an op's result, checked on the side under judgement: a contract that
holds whatever golden says, so a bug golden shares (its own kernel in float64) is still seen.

Indices within the input: the indices an op returns (argmax, topk, sort, max.dim, cummax, the
max-pooling family) point into its input, along the op's dim or into the flattened window
plane of a pooling op. An index past the input reads memory that is not the tensor's.

A sparse result keeps its layout's invariants (torch.sparse's documentation; torch checks them
with `_validate_sparse_coo_tensor_args` and `_validate_sparse_compressed_tensor_args`): indices
within the size, compressed indices that start at 0 and never decrease, and a COO tensor flagged
coalesced holds no repeated index. A result that breaks them from inputs that keep them is wrong
whatever its dense values are (pytorch#162482: _sparse_broadcast_to of an uncoalesced tensor
repeats indices yet says coalesced, and the ops that trust the flag then sum nothing), and golden
breaks them too: it is the same kernel. Not for ops whose contract is to trust the caller (an
`unsafe` constructor, an `is_coalesced` or `coalesced` argument that sets the flag, a backward
whose indices a forward checked).

A factorization's factors multiply back to its input and have their documented form
(conform.judge.factorizations).
"""

from __future__ import annotations

import math

import torch

from conform.judge import factorizations
from conform.judge.compare import Record, bind_arguments, index_outputs, leaves

# pooling ops whose indices count positions in the last k dims of the input, flattened
POOLING_DIMS = {
    "max_pool1d_with_indices": 1,
    "max_pool2d_with_indices": 2,
    "max_pool3d_with_indices": 3,
    "adaptive_max_pool1d": 1,
    "adaptive_max_pool2d": 2,
    "adaptive_max_pool3d": 3,
    "fractional_max_pool2d": 2,
    "fractional_max_pool3d": 3,
}
# ops whose indices count positions along `dim` (every element when dim is None)
DIM_OPS = frozenset(
    {
        "argmax",
        "argmin",
        "argsort",
        "sort",
        "topk",
        "kthvalue",
        "mode",
        "median",
        "nanmedian",
        "max",
        "min",
        "cummax",
        "cummin",
    }
)


def _extent(op, bound) -> int | None:
    """How many positions an index may name, or None where the op's contract is not known here."""
    x = bound.get("self", bound.get("input"))
    if not isinstance(x, torch.Tensor):
        return None
    name = op.base_name.removesuffix("_")
    if name in POOLING_DIMS:
        k = POOLING_DIMS[name]
        return math.prod(x.shape[-k:]) if x.dim() >= k else None
    if name not in DIM_OPS:
        return None
    dim = bound.get("dim", -1 if name in ("sort", "argsort", "topk", "kthvalue", "mode") else None)
    if dim is None:
        return x.numel()
    if not isinstance(dim, int):
        return None
    if x.dim() == 0:
        return 1
    return x.shape[dim] if -x.dim() <= dim < x.dim() else None


def index_records(op, inputs, result) -> list[Record]:
    """A failing record for each index output with an index outside the input, else []."""
    positions = index_outputs(op)
    name = op.base_name.removesuffix("_")
    if not positions and (name in POOLING_DIMS or name in DIM_OPS) and len(op.returns) == 2:
        positions = {1}  # (values, indices), the schema leaving them unnamed
    if not positions or not inputs:
        return []
    try:
        n = _extent(op, bind_arguments(op, *inputs))
    except Exception:  # noqa: BLE001 - an argument this check cannot read: no opinion
        return []
    if not n:
        return []
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    records = []
    for i in sorted(positions):
        if i >= len(outs):
            continue
        for t in leaves(outs[i]):
            if not isinstance(t, torch.Tensor) or t.is_floating_point() or t.is_complex() or not t.numel():
                continue
            bad = (t < 0) | (t >= n)
            if bool(bad.any()):
                flat = int(bad.reshape(-1).to(torch.uint8).argmax())
                value = int(t.reshape(-1)[flat])
                path = f"output[{i}]" if len(outs) > 1 else "output"
                records.append(
                    Record(
                        path,
                        "values",
                        f"documented invariant: an index lies outside the input: {value} at flat position {flat}, "
                        f"where [0, {n}) is allowed ({int(bad.sum())} of {t.numel()} indices) [{path}]",
                        mismatched=int(bad.sum()),
                        total=t.numel(),
                    )
                )
    return records


SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def broken_layout(t: torch.Tensor) -> str:
    """Why a sparse tensor breaks its layout's invariants (torch's own message), or ""."""
    try:
        if t.layout == torch.sparse_coo:
            torch._validate_sparse_coo_tensor_args(
                t._indices().detach().cpu(), t._values().detach().cpu(), t.shape, t.is_coalesced()
            )
        elif t.layout in (torch.sparse_csr, torch.sparse_bsr):
            torch._validate_sparse_compressed_tensor_args(
                t.crow_indices().cpu(), t.col_indices().cpu(), t.values().detach().cpu(), t.shape, t.layout
            )
        elif t.layout in (torch.sparse_csc, torch.sparse_bsc):
            torch._validate_sparse_compressed_tensor_args(
                t.ccol_indices().cpu(), t.row_indices().cpu(), t.values().detach().cpu(), t.shape, t.layout
            )
    except Exception as e:  # noqa: BLE001 - torch's validators raise RuntimeError or ValueError
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ""


def _trusts_caller(op) -> bool:
    """The op's contract takes the caller's word for its result's invariants: an unsafe
    constructor, an argument that sets the coalesced flag, or a backward, whose indices come
    from a forward that checked them (a gradient of gather with sparse_grad scatters to the
    indices it is given: one past the end is the caller's, not a break of the kernel's)."""
    return (
        "unsafe" in op.base_name
        or "_backward" in op.base_name
        or any(a.name in ("is_coalesced", "coalesced") for a in op.arguments)
    )


def sparse_records(op, inputs, result) -> list[Record]:
    """A failing record for each sparse output that breaks its layout's invariants while every
    sparse input keeps them, else []."""
    outs = list(result) if isinstance(result, (tuple, list)) else [result]
    found = [
        (i, t)
        for i, out in enumerate(outs)
        for t in leaves(out)
        if isinstance(t, torch.Tensor) and t.layout in SPARSE_LAYOUTS and t.device.type != "meta"
    ]
    if not found or _trusts_caller(op):
        return []
    if any(
        isinstance(t, torch.Tensor) and t.layout in SPARSE_LAYOUTS and broken_layout(t) for t in leaves(inputs or ())
    ):
        return []  # an input that breaks them already (built unchecked): the result's are the caller's
    records = []
    for i, t in found:
        why = broken_layout(t)
        if why:
            path = f"output[{i}]" if len(outs) > 1 else "output"
            records.append(
                Record(
                    path,
                    "values",
                    f"documented invariant: the sparse result breaks its layout's invariants: {why} [{path}]",
                    mismatched=1,
                    total=1,
                )
            )
    return records


def records(op, inputs, result) -> list[Record]:
    """The failing records of every documented invariant the result breaks."""
    return (
        index_records(op, inputs, result)
        + sparse_records(op, inputs, result)
        + factorizations.records(op, inputs, result)
    )

"""Documented invariants of an op's result, checked on the side under judgement: a contract that
holds whatever golden says, so a bug golden shares (its own kernel in float64) is still seen.

Indices within the input: the indices an op returns (argmax, topk, sort, max.dim, cummax, the
max-pooling family) point into its input, along the op's dim or into the flattened window
plane of a pooling op. An index past the input reads memory that is not the tensor's.
"""

from __future__ import annotations

import math

import torch

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

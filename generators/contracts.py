"""Value contracts that an op documents and its schema does not say (opdb hints, contracts.toml).

`argument_values`: what one argument's values may be ({-1, 1} labels, probabilities). A drawn
tensor of such an argument keeps its shape and layout and takes the contract's values instead.

`produced_by`: arguments that must be another op's result, such as LU factors with their pivots
(from linalg_lu_factor), Householder reflectors with their tau (geqrf), or a Cholesky factor. A
matrix of the drawn argument's shape, layout and magnitude is factorised by the producer on the
CPU in the case's dtype, and its results become the arguments, as explicit values. Drawn apart,
an "LU factor" of multipliers near 1e19 is one that no pivoted LU produces, and the solve's
blow-up says nothing about the kernel.
"""

from __future__ import annotations

import dataclasses

import torch

from generators.case import TensorSpec
from generators.context import OMIT
from generators.tensor import VALUE_LAYOUTS


def within_contract(name: str, value, ctx):
    """`value` drawn for argument `name`, with the values the op's contract allows for it."""
    kind = ctx.hints.get("argument_values", {}).get(name)
    if kind is None or not isinstance(value, TensorSpec) or value.data is not None or value.quantized:
        return value
    return dataclasses.replace(value, values=kind, magnitude="", edges=None, low=None, high=None)


def produce(values: dict, ctx) -> dict:
    """`values` (argument name -> drawn value) with the arguments the op's `produced_by` hint
    names replaced by its producer's results; unchanged where the producer rejects the case (a
    dtype it has no kernel for: the op under test then rejects the drawn ones as well)."""
    hint = ctx.hints.get("produced_by")
    if not hint:
        return values
    results: dict[str, int] = hint["results"]
    names = [hint["from"]] if hint.get("from") else [n for n in results if n in values]
    source = values.get(names[0]) if names else None
    if not isinstance(source, TensorSpec) or source.data is not None:
        return values
    matrix = dataclasses.replace(source, values=hint.get("input", source.values), edges=None)
    kwargs = {p: values[a] for p, a in hint.get("args", {}).items() if values.get(a, OMIT) is not OMIT}
    try:
        with torch.no_grad():
            out = _overload(hint["op"])(matrix.materialize(_same), **kwargs)
    except (RuntimeError, NotImplementedError, TypeError):
        return values
    out = out if isinstance(out, (tuple, list)) else (out,)
    replaced = dict(values)
    for name, i in results.items():
        drawn = values.get(name)
        if isinstance(drawn, TensorSpec):
            same_shape = tuple(out[i].shape) == tuple(drawn.shape)
            replaced[name] = as_spec(out[i], layout=drawn.layout if same_shape else "contiguous")
    return replaced


def as_spec(t: torch.Tensor, *, layout: str = "contiguous") -> TensorSpec:
    """`t`'s values as an explicit TensorSpec, in `layout` (valid for its shape) where explicit
    values can take it."""
    if layout not in VALUE_LAYOUTS:
        layout = "contiguous"  # an expanded one would repeat its first row: not the producer's result
    return TensorSpec(
        shape=tuple(t.shape),
        dtype=str(t.dtype).removeprefix("torch."),
        layout=layout,
        data=tuple(t.detach().flatten().tolist()),
    )


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _overload(qualname: str):
    name, _, overload = qualname.removeprefix("aten::").partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")

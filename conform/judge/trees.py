"""Walking the values an op takes and returns: tensors nested in tuples, lists and dicts, and
arguments bound to their schema names."""

from __future__ import annotations

from typing import Any

import torch


def bind_arguments(op, args, kwargs) -> dict[str, Any]:
    """Schema argument name -> value, for positional and keyword arguments alike."""
    bound = {}
    names = [a.name for a in op.arguments]
    for name, v in zip(names, args):
        bound[name] = v
    bound.update(kwargs)
    return bound


def dense(t: torch.Tensor) -> torch.Tensor:
    return t if t.layout == torch.strided else t.to_dense()


def leaves(x):
    """The tensors in `x`, depth first."""
    if isinstance(x, torch.Tensor) and x.is_nested:
        yield from x.unbind()  # no single shape: its components are the leaves
    elif isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        for v in x:
            yield from leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from leaves(v)

"""Helpers the family builders share: drawing a tensor, a sub-shape, the op's argument names."""

from __future__ import annotations

from generators import memo
from generators.argtypes import qscheme
from generators.strategies import draw_tensor


def _tensor(ctx, shape, *, label, dtype=None, values=None, writable=False):
    return draw_tensor(
        ctx.draw,
        dtype=dtype or ctx.dtype,
        shape=tuple(shape),
        values=values or ctx.values or "real",
        writable=writable,
        qscheme=qscheme(ctx),
        label=label,
    )


def _sub_shape(ctx, shape, *, label, at=None, at_max=4):
    """A shape no larger than `shape` in every dim except `at`, which may be anything up to `at_max`."""
    out = []
    for i, s in enumerate(shape):
        hi = at_max if i == at else s
        out.append(ctx.draw(memo.integers(0 if hi == 0 else min(1, hi), hi), label=f"{label}[{i}]"))
    return tuple(out)


def _arg_names(ctx):
    return {a.name for a in ctx.op.arguments}

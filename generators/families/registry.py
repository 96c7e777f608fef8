"""The registry of family builders: which builder fills in an op's arguments.

A builder takes the `Context` of a case before the generic argument strategies run and
pre-draws some arguments into `ctx.fixed` (and may change `ctx.shape`). Builders are keyed by
operator base name with leading underscores and a trailing inplace underscore stripped, so
`conv2d`, `_convolution` and `convolution` can share one.
"""

from __future__ import annotations

from collections.abc import Callable

_BUILDERS: dict[str, Callable] = {}
# builders by opdb family, for ops no builder names
_FAMILY_BUILDERS: dict[str, Callable] = {}


def family(*names: str, provides: tuple[str, ...] = ()):
    """Register a builder for the given operator base names."""

    def register(fn):
        fn.provides = provides
        for n in names:
            register_builder(n, fn)
        return fn

    return register


def register_builder(name: str, fn: Callable) -> None:
    """Register `fn` for op base name `name`; a name has one builder, whichever module defines it."""
    if name in _BUILDERS:
        raise ValueError(f"two family builders for {name!r}: {_BUILDERS[name].__module__} and {fn.__module__}")
    _BUILDERS[name] = fn


def key(name: str) -> str:
    return name.lstrip("_").removesuffix("_") if name not in _BUILDERS else name


def builder_for(op):
    """The builder for `op`: by name (leading "_" and inplace "_" stripped), else by opdb family."""
    b = _BUILDERS.get(op.base_name)
    if b is None:
        b = _BUILDERS.get(key(op.base_name))
    if b is None and "_backward" in op.base_name:
        # a backward op takes its forward op's arguments: the forward's builder draws them
        fwd = op.base_name.split("_backward", 1)[0]
        b = _BUILDERS.get(fwd) or _BUILDERS.get(key(fwd))
    if b is None:
        b = _FAMILY_BUILDERS.get(getattr(op, "family", ""))
    return b

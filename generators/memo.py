"""`hypothesis.strategies`, with the construction of strategies memoised.

Generators draw from small strategies built on the spot (`memo.integers(0, rank)`,
`memo.sampled_from(options)`...), tens of them per case and thousands of cases per sweep. A fresh
strategy object pays hypothesis's validation and its emptiness/recursion analysis again on first
draw; profiled over a sweep, that was a third of all generation time. A strategy is an immutable
description, so the same arguments can share one object: each constructor here returns the cached
strategy for its arguments (lists become tuples so that they hash). `composite` is hypothesis's,
checking each function's source once (see there); anything else not memoised here (`data`, ...)
is hypothesis's own.
"""

# Use as ``from generators import memo`` (``memo.integers(...)``): the name ``st`` stays
# hypothesis's own ``strategies``, so the two are never mistaken for each other.

from __future__ import annotations

import functools

from hypothesis import strategies as _st


def _key(value):
    """A cache key that tells 0, 0.0 and False apart, also inside tuples (lru_cache would not)."""
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_key(v) for v in value))
    return (type(value), value)


def _memoised(constructor):
    cache: dict = {}

    @functools.wraps(constructor)
    def build(*args, **kwargs):
        args = tuple(tuple(a) if isinstance(a, list) else a for a in args)
        try:
            key = (_key(args), _key(tuple(sorted(kwargs.items()))))
            strategy = cache.get(key)
        except TypeError:  # an unhashable argument (a dict, a set): build it afresh
            return constructor(*args, **kwargs)
        if strategy is None:
            if len(cache) > 8192:
                cache.clear()
            strategy = cache[key] = constructor(*args, **kwargs)
        return strategy

    return build


integers = _memoised(_st.integers)
booleans = _memoised(_st.booleans)
floats = _memoised(_st.floats)
just = _memoised(_st.just)
none = _memoised(_st.none)
sampled_from = _memoised(_st.sampled_from)
permutations = _memoised(_st.permutations)
lists = _memoised(_st.lists)
tuples = _memoised(_st.tuples)
one_of = _memoised(_st.one_of)


def __getattr__(name):
    return getattr(_st, name)


_CHECKED_SOURCES: set = set()


def composite(f):
    """hypothesis's `composite`, which parses `f`'s source to warn when `draw` goes unused: for a
    function defined inside another (a cell's stress wrapper, built for every cell) that was the
    same source parsed again each time, 2 ms a cell. Checked for the first function of each code
    object; the others skip the check (hypothesis.strategies._internal.core's
    is_first_param_referenced_in_function, 6.1xx; where it is not, every one is checked)."""
    code = getattr(f, "__code__", None)
    if code is None or code not in _CHECKED_SOURCES:
        if code is not None:
            _CHECKED_SOURCES.add(code)
        return _st.composite(f)
    try:
        from hypothesis.strategies._internal import core
    except ImportError:  # another layout: check it, as hypothesis does
        return _st.composite(f)
    original = getattr(core, "is_first_param_referenced_in_function", None)
    if original is None:
        return _st.composite(f)
    core.is_first_param_referenced_in_function = lambda _f: True
    try:
        return _st.composite(f)
    finally:
        core.is_first_param_referenced_in_function = original

"""Draws that follow from the seed alone, not from what the process has loaded."""

# Hypothesis (6.1xx, hypothesis/internal/conjecture/providers.py) draws one integer, float or string
# in twenty from a pool of constants, half the time from the constants it finds in the source of
# every *local* module loaded in the process (`_get_local_constants`: not the standard library, not
# site-packages, not test files). So the cases a seed draws depend on where conform is installed
# (editable, its source is local and its constants join the pool: 4096, 2736, 1e-5...; from a wheel,
# it is in site-packages and they do not), on which of a user's own modules happen to be loaded
# (conform joining another project's pytest session), and on import order. A seed that draws other
# cases elsewhere reproduces nothing, and the pool's values were never chosen as inputs: with 60
# examples of seed 7, 51 of clamp int32's cases and 15 of linspace's changed once conform's own
# source left the pool (an editable install against an empty pool).
#
# `seed_only()` empties the local pool while a cell draws (hypothesis's own global constants, the
# same in every install, stay). It reaches into hypothesis's internals, checked against 6.155; with
# another layout it does nothing rather than fail.

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def seed_only():
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants

        original = providers._get_local_constants
        cache = providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError):
        yield
        return
    empty = Constants()
    providers._get_local_constants = lambda: empty
    cache.clear()  # (the permitted constants of each kind of draw, computed with the local pool)
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()

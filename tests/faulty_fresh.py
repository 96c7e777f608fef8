"""A second set of fault-injecting backends, fixed before conform ran on any of them.

tests/faulty.py's faults have shaped conform (each was found, then kept found). These twelve are
realistic accelerator-kernel bugs of other kinds, written down together with the op and the
outcome a correct tester reports, and measured as they were first run
(`benchmarks/finding_power.py --set fresh`): what conform finds of faults it was never shaped
around. The mechanism is tests/faulty.py's (a dispatch mode on the device side only).
"""

from __future__ import annotations

import math

import torch

from conform.outcomes import Outcome
from tests.faulty import FaultyBackend, fault_registry

aten = torch.ops.aten

FRESH: dict[str, type[FaultyBackend]] = {}


fault = fault_registry(FRESH, globals())


@fault("softmax_last_dim_only", aten._softmax.default)
def _softmax_last_dim_only(func, args, kwargs):
    """softmax always normalises over the last dimension, whatever `dim` says."""
    x, dim, half_to_float = args
    return func(x, -1 if x.dim() else dim, half_to_float)


@fault("scan_carry_lost", aten.cumsum.default)
def _scan_carry_lost(func, args, kwargs):
    """A block scan of 32 elements whose carry between blocks is dropped: along a dimension longer
    than 32, each block restarts from 0."""
    x, dim = args[0], args[1]
    out = func(*args, **kwargs)
    if x.dim() == 0 or x.shape[dim] <= 32:
        return out
    n = x.shape[dim]
    pieces = [func(x.narrow(dim, s, min(32, n - s)), dim, **kwargs) for s in range(0, n, 32)]
    return torch.cat(pieces, dim)


@fault("mm_transposed_operand", aten.mm.default)
def _mm_transposed_operand(func, args, kwargs):
    """A transposed (column-major) second operand is read as row-major: mat2's storage is taken
    as if it were contiguous, giving the product with the wrong matrix."""
    a, b = args
    if b.dim() == 2 and b.stride(0) == 1 and b.stride(1) == b.shape[0] and b.shape[0] > 1 and b.shape[1] > 1:
        b = torch.as_strided(b, b.shape, (b.shape[1], 1), b.storage_offset())
    return func(a, b)


@fault("tanh_fast_math", aten.tanh.default)
def _tanh_fast_math(func, args, kwargs):
    """float32 tanh computed in half precision (a fast-math kernel): about 3 significant digits."""
    x = args[0]
    if x.dtype == torch.float32:
        return func(x.to(torch.float16)).to(torch.float32)
    return func(x)


@fault("clamp_max_dropped", aten.clamp.default)
def _clamp_max_dropped(func, args, kwargs):
    """clamp with no `min` forgets `max` too (an optional-argument check that returns early)."""
    x = args[0]
    lo = args[1] if len(args) > 1 else kwargs.get("min")
    if lo is None:
        return x.clone()
    return func(*args, **kwargs)


@fault("topk_largest_ignored", aten.topk.default)
def _topk_largest_ignored(func, args, kwargs):
    """topk(largest=False) returns the largest k anyway."""
    args = list(args)
    if len(args) > 3:
        args[3] = True
    kwargs = {k: (True if k == "largest" else v) for k, v in kwargs.items()}
    return func(*args, **kwargs)


@fault("sort_nan_first", aten.sort.default, aten.sort.stable)
def _sort_nan_first(func, args, kwargs):
    """An ascending sort puts NaN first instead of last (a comparison that treats NaN as smallest)."""
    values, indices = func(*args, **kwargs)
    x = args[0]
    descending = kwargs.get("descending", False)
    if func is aten.sort.default and len(args) > 2:
        descending = args[2]
    if descending or not x.is_floating_point() or x.dim() == 0:
        return values, indices
    dim = kwargs.get("dim", args[1] if func is aten.sort.default and len(args) > 1 else -1)
    nan = torch.isnan(values)
    if not bool(nan.any()):
        return values, indices
    # stable reorder: NaNs to the front of each row
    order = torch.argsort((~nan).to(torch.int8), dim=dim, stable=True)
    return values.gather(dim, order), indices.gather(dim, order)


@fault("index_put_accumulate_ignored", aten.index_put.default, aten.index_put_.default, aten._index_put_impl_.default)
def _index_put_accumulate_ignored(func, args, kwargs):
    """index_put with accumulate=True overwrites instead of adding."""
    args = list(args)
    if len(args) > 3:
        args[3] = False
    kwargs = {k: (False if k == "accumulate" else v) for k, v in kwargs.items()}
    return func(*args, **kwargs)


@fault("int64_add_wraps", aten.add.Tensor)
def _int64_add_wraps(func, args, kwargs):
    """int64 addition done in 32 bits (no native 64-bit integer arithmetic): wraps above 2**31."""
    out = func(*args, **kwargs)
    if out.dtype != torch.int64:
        return out
    return (out.to(torch.int32)).to(torch.int64)


@fault("pow_through_log", aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def _pow_through_log(func, args, kwargs):
    """x ** y as exp(y * log(x)) for floating x: NaN for a negative base even at an integer
    exponent (-2 ** 2 is NaN, not 4)."""
    x, y = args
    out = func(x, y)
    if not (isinstance(x, torch.Tensor) and x.is_floating_point()):
        return out
    return torch.where(x < 0, torch.full_like(out, math.nan), out)


@fault("gelu_tanh_backward_exact", aten.gelu_backward.default)
def _gelu_tanh_backward_exact(func, args, kwargs):
    """gelu's backward ignores approximate='tanh' and uses the exact (erf) derivative."""
    kwargs = {k: v for k, v in kwargs.items() if k != "approximate"}
    return func(args[0], args[1], **kwargs)


@fault("expanded_read_linear", aten.div.Tensor)
def _expanded_read_linear(func, args, kwargs):
    """An expanded (stride-0) input is read as if its distinct elements were laid out one after
    another for every position: a broadcast row repeated is read as the row's storage wrapping."""
    fixed = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.dim() >= 2 and 0 in a.stride() and a.numel() > 1:
            distinct = math.prod(s for s, st in zip(a.shape, a.stride()) if st != 0)  # >= 1: no empty dim
            src = torch.as_strided(a, (distinct,), (1,), a.storage_offset())
            a = src.repeat(-(-a.numel() // distinct))[: a.numel()].reshape(a.shape).clone()
        fixed.append(a)
    return func(*fixed, **kwargs)


# (bug, backend, op, expected outcome), fixed with the faults before conform ran on any of them
BUGS_FRESH = [
    ("softmax_last_dim_only", FRESH["softmax_last_dim_only"], "aten::_softmax", Outcome.MISMATCH),
    ("scan_carry_lost", FRESH["scan_carry_lost"], "aten::cumsum", Outcome.MISMATCH),
    ("mm_transposed_operand", FRESH["mm_transposed_operand"], "aten::mm", Outcome.MISMATCH),
    ("tanh_fast_math", FRESH["tanh_fast_math"], "aten::tanh", Outcome.MISMATCH),
    ("clamp_max_dropped", FRESH["clamp_max_dropped"], "aten::clamp", Outcome.MISMATCH),
    ("topk_largest_ignored", FRESH["topk_largest_ignored"], "aten::topk", Outcome.MISMATCH),
    ("sort_nan_first", FRESH["sort_nan_first"], "aten::sort", Outcome.MISMATCH),
    ("index_put_accumulate_ignored", FRESH["index_put_accumulate_ignored"], "aten::index_put", Outcome.MISMATCH),
    ("int64_add_wraps", FRESH["int64_add_wraps"], "aten::add.Tensor", Outcome.MISMATCH),
    ("pow_through_log", FRESH["pow_through_log"], "aten::pow.Tensor_Scalar", Outcome.MISMATCH),
    ("gelu_tanh_backward_exact", FRESH["gelu_tanh_backward_exact"], "aten::gelu", Outcome.GRAD_MISMATCH),
    ("expanded_read_linear", FRESH["expanded_read_linear"], "aten::div.Tensor", Outcome.MISMATCH),
]

"""A third set of fault-injecting backends, fixed before conform ran on any of them.

tests/faulty.py's faults shaped conform, and tests/faulty_fresh.py's were fixed before conform
ran on them, then reached by the changes their misses named. These fourteen are realistic
accelerator-kernel bugs of kinds neither set has (NaN in a reduction, a boundary convention of a
backward, an argument of a loss, a reduction over the wrong dimension of a transposed input, an
index of another integer dtype, an empty input among others), written down with the op and the
outcome a correct tester reports, and measured as first run (`benchmarks/finding_power.py --set
third`). The mechanism is tests/faulty.py's (a dispatch mode on the device side only).
"""

from __future__ import annotations

import math

import torch

from conform.outcomes import Outcome
from tests.faulty import FaultyBackend, fault_registry

aten = torch.ops.aten

THIRD: dict[str, type[FaultyBackend]] = {}


fault = fault_registry(THIRD, globals(), prefix="Third")


@fault("amax_nan_ignored", aten.amax.default)
def _amax_nan_ignored(func, args, kwargs):
    """amax takes fmax's semantics: a NaN in the reduced elements is skipped (a row of NaN only
    gives -inf), where torch propagates NaN."""
    x = args[0]
    if x.is_floating_point():
        x = torch.where(torch.isnan(x), torch.full_like(x, -math.inf), x)
    return func(x, *args[1:], **kwargs)


@fault("hardsigmoid_backward_boundary", aten.hardsigmoid_backward.default)
def _hardsigmoid_backward_boundary(func, args, kwargs):
    """hardsigmoid's backward passes the gradient (1/6) at x = -3 and x = 3 exactly, where torch's
    is 0 (the open interval): a <= for a <."""
    grad, x = args[0], args[1]
    out = func(*args, **kwargs)
    edge = (x == 3) | (x == -3)
    return torch.where(edge, grad / 6, out)


@fault("var_correction_ignored", aten.var.correction)
def _var_correction_ignored(func, args, kwargs):
    """var always divides by N - 1: the `correction` argument never reaches the kernel."""
    kwargs = dict(kwargs)
    kwargs.pop("correction", None)
    return func(*args, **kwargs)


@fault("log1p_naive", aten.log1p.default)
def _log1p_naive(func, args, kwargs):
    """Floating log1p computed as log(1 + x) in the input's dtype: tiny x give 0 (or a few
    percent off) instead of x."""
    x = args[0]
    if not x.is_floating_point():
        return func(*args, **kwargs)
    return torch.log(1 + x)


@fault("upsample_align_corners_ignored", aten.upsample_bilinear2d.vec, aten.upsample_bilinear2d.default)
def _upsample_align_corners_ignored(func, args, kwargs):
    """Bilinear upsampling always samples as align_corners=False."""
    args = list(args)
    if len(args) > 2:
        args[2] = False
    if "align_corners" in kwargs:
        kwargs = dict(kwargs, align_corners=False)
    return func(*args, **kwargs)


@fault("nll_loss_ignore_index_ignored", aten.nll_loss_forward.default)
def _nll_loss_ignore_index_ignored(func, args, kwargs):
    """nll_loss counts the targets equal to ignore_index like any other class."""
    args = list(args)
    if len(args) > 4:
        args[4] = -(2**40)  # no target is this class
    return func(*args, **kwargs)


@fault("where_condition_read_linear", aten.where.self)
def _where_condition_read_linear(func, args, kwargs):
    """A broadcast condition is read linearly, as if it had the result's shape: its elements
    repeat in memory order instead of along the broadcast dimensions."""
    cond, a, b = args
    shape = torch.broadcast_shapes(cond.shape, a.shape, b.shape)
    n = math.prod(shape)
    if tuple(cond.shape) == tuple(shape) or cond.numel() == 0 or n == 0:
        return func(*args, **kwargs)
    flat = cond.reshape(-1)
    linear = flat.repeat(-(-n // flat.numel()))[:n].reshape(shape)
    return func(linear, a, b, **kwargs)


@fault("embedding_padding_grad", aten.embedding_dense_backward.default)
def _embedding_padding_grad(func, args, kwargs):
    """embedding's backward accumulates into the padding_idx row too (padding_idx ignored)."""
    args = list(args)
    if len(args) > 3:
        args[3] = -1
    return func(*args, **kwargs)


@fault("mean_half_accumulate", aten.mean.dim)
def _mean_half_accumulate(func, args, kwargs):
    """A float16 mean sums in float16 before dividing: a row whose sum passes 65504 gives inf,
    though its mean fits."""
    x = args[0]
    out = func(*args, **kwargs)
    if x.dtype != torch.float16 or x.numel() == 0 or kwargs.get("dtype") not in (None, torch.float16):
        return out
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    total = torch.sum(x.float(), dim, keepdim)
    overflow = total.abs() > 65504
    return torch.where(overflow, (total.sign() * math.inf).to(out.dtype), out)


@fault("floor_divide_int_through_float", aten.floor_divide.default)
def _floor_divide_int_through_float(func, args, kwargs):
    """Integer floor_divide computed in float32: floor(a / b) is wrong once |a| passes 2**24, and a
    division by zero gives a cast infinity instead of raising."""
    a, b = args
    if a.is_floating_point() or (isinstance(b, torch.Tensor) and b.is_floating_point()) or a.dtype == torch.bool:
        return func(*args, **kwargs)
    q = torch.floor(a.to(torch.float32) / (b.to(torch.float32) if isinstance(b, torch.Tensor) else float(b)))
    return q.to(torch.result_type(a, b))


@fault("cat_after_empty_zeroed", aten.cat.default)
def _cat_after_empty_zeroed(func, args, kwargs):
    """cat misplaces the input that follows an empty one along `dim`: its slot is left zeros (the
    offset of the empty input is counted twice and the copy lands out of the result)."""
    tensors = list(args[0])
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    out = func(*args, **kwargs)
    if out.dim() == 0:
        return out
    d = dim % out.dim()
    offset = 0
    for i, t in enumerate(tensors):
        if t.dim() == 1 and t.numel() == 0 and out.dim() != 1:
            continue  # a legacy empty tensor: cat skips it
        n = t.shape[d] if t.dim() else 0
        if i > 0 and n > 0:
            prev = tensors[i - 1]
            if prev.dim() == out.dim() and prev.shape[d] == 0:
                out = out.clone()
                out.narrow(d, offset, n).zero_()
        offset += n
    return out


@fault("rsqrt_zero_nan", aten.rsqrt.default)
def _rsqrt_zero_nan(func, args, kwargs):
    """rsqrt of +-0 gives NaN (a fast reciprocal square root's Newton step meets 0 * inf) instead of
    +-inf."""
    x = args[0]
    out = func(*args, **kwargs)
    if not out.is_floating_point():
        return out
    return torch.where(x == 0, torch.full_like(out, math.nan), out)


@fault("sum_transposed_wrong_dim", aten.sum.dim_IntList)
def _sum_transposed_wrong_dim(func, args, kwargs):
    """sum over one dim of a transposed 2-d input reduces along the dim that is innermost in memory
    instead of the dim asked for (the kernel picks its loop from the strides)."""
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    if (
        x.dim() == 2
        and dims is not None
        and len(dims) == 1
        and x.stride(0) == 1
        and x.stride(1) == x.shape[0]
        and x.shape[0] > 1
        and x.shape[1] > 1
    ):
        args = (x, [1 - (dims[0] % 2)], *args[2:])
    return func(*args, **kwargs)


@fault("index_select_int32_stride", aten.index_select.default)
def _index_select_int32_stride(func, args, kwargs):
    """An int32 index is read as 64-bit words: every second index is taken, each twice."""
    x, dim, index = args
    if index.dtype != torch.int32 or index.numel() < 2:
        return func(*args, **kwargs)
    n = index.numel()
    flat = index.reshape(-1)
    read = flat[::2].repeat_interleave(2)[:n].reshape(index.shape)
    return func(x, dim, read, **kwargs)


# (bug, backend, op, expected outcome), fixed with the faults before conform ran on any of them
BUGS_THIRD = [
    ("amax_nan_ignored", THIRD["amax_nan_ignored"], "aten::amax", Outcome.MISMATCH),
    (
        "hardsigmoid_backward_boundary",
        THIRD["hardsigmoid_backward_boundary"],
        "aten::hardsigmoid",
        Outcome.GRAD_MISMATCH,
    ),
    ("var_correction_ignored", THIRD["var_correction_ignored"], "aten::var.correction", Outcome.MISMATCH),
    ("log1p_naive", THIRD["log1p_naive"], "aten::log1p", Outcome.MISMATCH),
    (
        "upsample_align_corners_ignored",
        THIRD["upsample_align_corners_ignored"],
        "aten::upsample_bilinear2d.vec",
        Outcome.MISMATCH,
    ),
    (
        "nll_loss_ignore_index_ignored",
        THIRD["nll_loss_ignore_index_ignored"],
        "aten::nll_loss_forward",
        Outcome.MISMATCH,
    ),
    ("where_condition_read_linear", THIRD["where_condition_read_linear"], "aten::where.self", Outcome.MISMATCH),
    ("embedding_padding_grad", THIRD["embedding_padding_grad"], "aten::embedding", Outcome.GRAD_MISMATCH),
    ("mean_half_accumulate", THIRD["mean_half_accumulate"], "aten::mean.dim", Outcome.MISMATCH),
    (
        "floor_divide_int_through_float",
        THIRD["floor_divide_int_through_float"],
        "aten::floor_divide",
        Outcome.MISMATCH,
    ),
    ("cat_after_empty_zeroed", THIRD["cat_after_empty_zeroed"], "aten::cat", Outcome.MISMATCH),
    ("rsqrt_zero_nan", THIRD["rsqrt_zero_nan"], "aten::rsqrt", Outcome.MISMATCH),
    ("sum_transposed_wrong_dim", THIRD["sum_transposed_wrong_dim"], "aten::sum.dim_IntList", Outcome.MISMATCH),
    ("index_select_int32_stride", THIRD["index_select_int32_stride"], "aten::index_select", Outcome.MISMATCH),
]

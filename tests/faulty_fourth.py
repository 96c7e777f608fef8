"""A fourth set of fault-injecting backends, fixed before conform ran on any of them.

tests/faulty.py's faults shaped conform; tests/faulty_fresh.py's and tests/faulty_third.py's were
fixed before conform ran on them, then reached by the changes their misses named. These fourteen
are realistic accelerator-kernel bugs of kinds none of those sets has (a padding offset of a
convolution, a pooling divisor, a nearest-neighbour index rounding, a loss formula mixed up with
its sibling's, infinities in a stabilised reduction, a negative dim wrapped against the wrong
rank, a channel-to-group mapping, a batch stride, a comparison through its negation, a logical
shift for an arithmetic one, a weight saturated, saturating 8-bit arithmetic, a gradient scattered
without accumulation, a factorisation's status dropped), each conditional on an argument, a value
or a dtype, written down with the op and the outcome a correct tester reports, and measured as
first run (`benchmarks/finding_power.py --set fourth`). The mechanism is tests/faulty.py's (a
dispatch mode on the device side only).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from conform.outcomes import Outcome
from tests.faulty import FaultyBackend, fault_registry

aten = torch.ops.aten

FOURTH: dict[str, type[FaultyBackend]] = {}


fault = fault_registry(FOURTH, globals(), prefix="Fourth")


@fault("conv_padding_one_sided", aten.convolution.default)
def _conv_padding_one_sided(func, args, kwargs):
    """A (non-transposed) convolution puts all of its padding before the input: 2 * p zeros at the
    start of each spatial dim and none at the end (an offset counted twice). The output shape is
    right; with any padding > 0 its values are shifted."""
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    if transposed or not any(p > 0 for p in padding) or x.dim() < 3:
        return func(*args, **kwargs)
    pads = []
    for p in reversed(list(padding)):  # F.pad's order: the last dim first
        pads += [2 * p, 0]
    return func(F.pad(x, pads), weight, bias, stride, [0] * len(padding), dilation, transposed, output_padding, groups)


@fault("avg_pool_ceil_divisor", aten.avg_pool2d.default)
def _avg_pool_ceil_divisor(func, args, kwargs):
    """avg_pool2d with ceil_mode=True takes the divisor_override path with the full window area:
    a window clipped at the end of the input (or one over padding, with count_include_pad=False)
    is divided by kh * kw instead of the elements it covers."""
    names = ("self", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")
    call = dict(zip(names, args), **kwargs)
    if not call.get("ceil_mode", False) or call.get("divisor_override") is not None:
        return func(*args, **kwargs)
    k = list(call["kernel_size"])
    kh, kw = (k[0], k[0]) if len(k) == 1 else (k[0], k[1])
    call["divisor_override"] = kh * kw
    return func(**call)


@fault("nearest_rounds_half", aten.upsample_nearest2d.vec, aten.upsample_nearest2d.default)
def _nearest_rounds_half(func, args, kwargs):
    """Nearest upsampling takes the source index as floor((i + 0.5) * scale) (nearest-exact's
    rounding, the pixel-centre convention) instead of floor(i * scale): the same for integer
    scales, other pixels for any other ratio."""
    exact = (
        aten._upsample_nearest_exact2d.vec
        if func is aten.upsample_nearest2d.vec
        else aten._upsample_nearest_exact2d.default
    )
    return exact(*args, **kwargs)


@fault("huber_as_smooth_l1", aten.huber_loss.default)
def _huber_as_smooth_l1(func, args, kwargs):
    """huber_loss runs smooth_l1_loss's kernel with beta = delta (the two are shared code): the
    result is huber / delta, wrong for any delta other than 1."""
    names = ("self", "target", "reduction", "delta")
    call = dict(zip(names, args), **kwargs)
    delta = call.pop("delta", 1.0)
    return aten.smooth_l1_loss.default(call["self"], call["target"], call.get("reduction", 1), delta)


@fault("logsumexp_inf_rows", aten.logsumexp.default)
def _logsumexp_inf_rows(func, args, kwargs):
    """logsumexp subtracts the row maximum without masking infinite maxima: a row of -inf only, or
    a row holding +inf, gives inf - inf = NaN (torch gives -inf and +inf)."""
    x = args[0]
    out = func(*args, **kwargs)
    if not x.is_floating_point() or x.numel() == 0:
        return out
    dim = args[1] if len(args) > 1 else kwargs.get("dim", [])
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    if x.dim() == 0:
        top = x
    else:
        top = torch.amax(x, dims if dims else list(range(x.dim())), keepdim)
    return torch.where(torch.isinf(top), torch.full_like(out, math.nan), out)


@fault("stack_negative_dim_input_rank", aten.stack.default)
def _stack_negative_dim_input_rank(func, args, kwargs):
    """A negative `dim` of stack is wrapped against the inputs' rank instead of the result's (one
    more): dim=-1 on 2-d inputs stacks at 1 instead of 2."""
    tensors = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if dim >= 0 or not tensors or tensors[0].dim() == 0:
        return func(*args, **kwargs)
    return func(tensors, dim % tensors[0].dim())


@fault("group_norm_round_robin", aten.native_group_norm.default)
def _group_norm_round_robin(func, args, kwargs):
    """group_norm assigns channel c to group c % G (round robin) instead of c // (C / G)
    (contiguous blocks): with more than one group of more than one channel, each channel is
    normalised with the statistics of the wrong channels."""
    x, weight, bias, n, c, hxw, group, eps = args
    if group <= 1 or group >= c or x.dim() < 2 or x.numel() == 0:
        return func(*args, **kwargs)
    per = c // group
    perm = torch.tensor([g + group * j for g in range(group) for j in range(per)])
    inverse = torch.argsort(perm)
    out, mean, rstd = func(
        x[:, perm],
        None if weight is None else weight[perm],
        None if bias is None else bias[perm],
        n,
        c,
        hxw,
        group,
        eps,
    )
    return out[:, inverse].contiguous(), mean, rstd


@fault("bmm_batch_stride_zero", aten.bmm.default)
def _bmm_batch_stride_zero(func, args, kwargs):
    """bmm reads mat2 with a batch stride of 0: every batch is multiplied by mat2[0], so batch 0
    alone is right."""
    a, b = args
    if b.dim() != 3 or b.shape[0] < 2:
        return func(*args, **kwargs)
    return func(a, b[:1].expand_as(b))


@fault("ge_as_not_lt", aten.ge.Tensor)
def _ge_as_not_lt(func, args, kwargs):
    """a >= b computed as not (a < b): true where either side is NaN (torch gives false)."""
    a, b = args
    return torch.logical_not(aten.lt.Tensor(a, b))


@fault("right_shift_logical", aten.bitwise_right_shift.Tensor)
def _right_shift_logical(func, args, kwargs):
    """A signed right shift is logical, not arithmetic: a negative value shifts in zeros, so
    -8 >> 1 is 124 in int8 (torch gives -4)."""
    a, b = args
    out = func(*args, **kwargs)
    if out.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64):
        return out
    width = torch.iinfo(out.dtype).bits
    a_full = torch.as_tensor(a).expand(out.shape).to(torch.int64)
    s = torch.as_tensor(b).expand(out.shape).to(torch.int64)
    shifted = (s > 0) & (s < width) & (a_full < 0)
    mask = torch.bitwise_left_shift(torch.ones_like(s), (width - s).clamp(0, 63)) - 1
    logical = (out.to(torch.int64) & mask).to(out.dtype)
    return torch.where(shifted, logical, out)


@fault("lerp_weight_saturated", aten.lerp.Tensor, aten.lerp.Scalar)
def _lerp_weight_saturated(func, args, kwargs):
    """lerp saturates its weight to [0, 1] (a shader's mix with a clamp): extrapolation, weight < 0
    or > 1, stops at start or end."""
    start, end, weight = args
    if start.is_complex() or (isinstance(weight, torch.Tensor) and weight.is_complex()) or isinstance(weight, complex):
        return func(*args, **kwargs)
    if isinstance(weight, torch.Tensor):
        weight = weight.clamp(0, 1)
    else:
        weight = min(max(weight, 0), 1)
    return func(start, end, weight)


@fault("sub_8bit_saturates", aten.sub.Tensor)
def _sub_8bit_saturates(func, args, kwargs):
    """int8 and uint8 subtraction saturates (a SIMD psubs/psubus instruction) instead of wrapping:
    uint8 3 - 5 is 0, not 254; int8 -100 - 100 is -128, not 56."""
    out = func(*args, **kwargs)
    if out.dtype not in (torch.int8, torch.uint8):
        return out
    a, b = args
    wide = [v.to(torch.int64) if isinstance(v, torch.Tensor) else v for v in (a, b)]
    info = torch.iinfo(out.dtype)
    return func(*wide, **kwargs).clamp(info.min, info.max).to(out.dtype)


@fault("max_pool_grad_overwrites", aten.max_pool2d_with_indices_backward.default)
def _max_pool_grad_overwrites(func, args, kwargs):
    """max_pool2d's backward writes each window's gradient to its argmax instead of adding it (no
    atomic add): an element that is the maximum of several overlapping windows gets the gradient
    of one of them only."""
    grad_output, x = args[0], args[1]
    indices = args[7] if len(args) > 7 else kwargs["indices"]
    if x.dim() < 3 or x.numel() == 0 or grad_output.numel() == 0:
        return func(*args, **kwargs)
    lead = tuple(x.shape[:-2])
    grad = torch.zeros(x.shape, dtype=grad_output.dtype, device=grad_output.device)
    grad.view(*lead, -1).scatter_(-1, indices.contiguous().view(*lead, -1), grad_output.contiguous().view(*lead, -1))
    return grad


@fault("cholesky_info_dropped", aten.linalg_cholesky_ex.default)
def _cholesky_info_dropped(func, args, kwargs):
    """The Cholesky kernel never reports a failed factorisation: `info` is always 0, so a matrix
    that is not positive-definite gives a partial factor instead of linalg.cholesky's error."""
    names = ("self", "upper", "check_errors")
    call = dict(zip(names, args), **kwargs)
    call["check_errors"] = False
    factor, info = func(**call)
    return factor, torch.zeros_like(info)


# (bug, backend, op, expected outcome), fixed with the faults before conform ran on any of them
BUGS_FOURTH = [
    ("conv_padding_one_sided", FOURTH["conv_padding_one_sided"], "aten::convolution", Outcome.MISMATCH),
    ("avg_pool_ceil_divisor", FOURTH["avg_pool_ceil_divisor"], "aten::avg_pool2d", Outcome.MISMATCH),
    ("nearest_rounds_half", FOURTH["nearest_rounds_half"], "aten::upsample_nearest2d.vec", Outcome.MISMATCH),
    ("huber_as_smooth_l1", FOURTH["huber_as_smooth_l1"], "aten::huber_loss", Outcome.MISMATCH),
    ("logsumexp_inf_rows", FOURTH["logsumexp_inf_rows"], "aten::logsumexp", Outcome.MISMATCH),
    (
        "stack_negative_dim_input_rank",
        FOURTH["stack_negative_dim_input_rank"],
        "aten::stack",
        Outcome.META_MISMATCH,
    ),
    ("group_norm_round_robin", FOURTH["group_norm_round_robin"], "aten::native_group_norm", Outcome.MISMATCH),
    ("bmm_batch_stride_zero", FOURTH["bmm_batch_stride_zero"], "aten::bmm", Outcome.MISMATCH),
    ("ge_as_not_lt", FOURTH["ge_as_not_lt"], "aten::ge.Tensor", Outcome.MISMATCH),
    ("right_shift_logical", FOURTH["right_shift_logical"], "aten::bitwise_right_shift.Tensor", Outcome.MISMATCH),
    ("lerp_weight_saturated", FOURTH["lerp_weight_saturated"], "aten::lerp.Tensor", Outcome.MISMATCH),
    ("sub_8bit_saturates", FOURTH["sub_8bit_saturates"], "aten::sub.Tensor", Outcome.MISMATCH),
    (
        "max_pool_grad_overwrites",
        FOURTH["max_pool_grad_overwrites"],
        "aten::max_pool2d_with_indices",
        Outcome.GRAD_MISMATCH,
    ),
    ("cholesky_info_dropped", FOURTH["cholesky_info_dropped"], "aten::linalg_cholesky", Outcome.MISSING_ERROR),
]

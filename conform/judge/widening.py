"""Integer results against the same op with its narrow integer inputs widened to int64.

Golden runs floating cells in float64; an integer cell has no such expectation, and a kernel that
computes in the narrow dtype is its own reference. Where an int8, int16, int32 or uint8 tensor
meets a Python integer its dtype cannot hold, ATen converts the scalar to the tensor's dtype with
wraparound: `x == 2**32 + 1` is True where an int32 `x` is 1, `x < 2**31` is False everywhere,
`x // 2**31` is -1 for positive `x` (pytorch#101653, #114679; a clamp's bound, #107702). The
results are booleans or integers the dtype holds, and wrong.

The same op with every narrow integer tensor of the case widened to int64 (its scalars, dtype
arguments and other tensors unchanged) computes with the scalar's own value. Integer arithmetic is
exact, and sums and products wrap modulo 2**bits, so a narrow result that is right equals the
widened one wherever the widened value fits the narrow result's dtype; where it does not
(x + 2**32 in int32, an overflowing product), the narrow result's wraparound is the dtype's
arithmetic, and there is no opinion. Booleans always fit. Floating results are not judged here
(golden's), nor results of another shape (an op that reads the element width: view.dtype).
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from conform.judge.trees import leaves

# the dtypes an int64 run widens: a narrower integer, signed or not
NARROW = (torch.int8, torch.int16, torch.int32, torch.uint8)
WIDE = torch.int64


def refuses(error: BaseException | None) -> bool:
    """Whether `error` is ATen's checked conversion refusing the scalar: c10::checked_convert's
    report_overflow (c10/util/TypeCast.cpp) raises "value cannot be converted to type int without
    overflow", as the CPU's clamp, fill and where do for the same scalar."""
    text = str(error or "")
    return "cannot be converted to type" in text and "without overflow" in text


def widened_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of an input tensor, in int64 where its dtype is a narrow integer."""
    return t.to(WIDE) if t.dtype in NARROW else t.clone()


def float_copy(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy of an input tensor, in float64 where its dtype is a narrow integer: the widened
    run's own check (int64 wraps too, where a power or a product passes 2**63)."""
    return t.to(torch.float64) if t.dtype in NARROW else t.clone()


def _python_ints(v):
    if isinstance(v, bool):
        return
    if isinstance(v, int):
        yield v
    elif isinstance(v, (list, tuple)):
        for x in v:
            yield from _python_ints(x)


def applies(case) -> bool:
    """Whether a widened run judges `case`: it holds a narrow integer tensor and a Python integer
    that dtype cannot hold (the conversion at stake), and no 0-d int64 tensor (which type
    promotion casts to the narrow dtype in the narrow run: the promotion rule's conversion, not
    the kernel's). Without such a scalar a difference is an intermediate's overflow in the
    dtype's own arithmetic (relu(x + y) of two large int32 tensors), which is no conversion."""
    specs = case.tensor_specs()
    narrow = {sp.torch_dtype for sp in specs if sp.torch_dtype in NARROW}
    if not narrow or any(not sp.shape and sp.torch_dtype == WIDE for sp in specs):
        return False
    ints = [i for v in list(case.args) + list(case.kwargs.values()) for i in _python_ints(v)]
    return any(not torch.iinfo(dt).min <= i <= torch.iinfo(dt).max for dt in narrow for i in ints)


def _integral(t) -> bool:
    return isinstance(t, torch.Tensor) and not (t.is_floating_point() or t.is_complex()) and t.layout == torch.strided


def _confirmed(w: torch.Tensor, x) -> torch.Tensor:
    """Where the float64 run `x` (None: the op takes no float64) gives the int64 run's values."""
    if x is None:
        return torch.ones(w.shape, dtype=torch.bool)
    if not isinstance(x, torch.Tensor) or x.shape != w.shape or x.is_complex():
        return torch.zeros(w.shape, dtype=torch.bool)
    return x.to(torch.float64) == w.to(torch.float64)


def off_widened(narrow, wide, exact=None, label: str = "result") -> str:
    """Where the integer or boolean leaves of `narrow` (a result, or a (result, written) pair) differ
    from those of `wide` at values their dtype holds, and that the float64 run `exact` (the same
    structure, or None where the op refused float64) confirms: a message, or "" where they agree."""
    xs = list(leaves(exact)) if exact is not None else None
    for k, (n, w) in enumerate(zip(leaves(narrow), leaves(wide))):
        if (
            not (_integral(n) and _integral(w))
            or n.shape != w.shape
            or (n.dtype == torch.bool) != (w.dtype == torch.bool)
        ):
            continue
        confirmed = _confirmed(w, None if xs is None else xs[k] if k < len(xs) else 0)
        if n.dtype == torch.bool:
            off = (n != w) & confirmed
        else:
            info = torch.iinfo(n.dtype)
            wv = w.to(WIDE)
            off = (wv >= info.min) & (wv <= info.max) & (n.to(WIDE) != wv) & confirmed
        if bool(off.any()):
            at = tuple(int(i) for i in off.nonzero()[0]) if off.dim() else ()
            return (
                f"{label}[{k}] at {list(at)} is {n[at].item()!r} where the op on the integer inputs widened to "
                f"int64 gives {w[at].item()!r}, which {str(n.dtype).removeprefix('torch.')} holds "
                f"({int(off.sum())} of {off.numel()} elements): a narrow conversion wrapped a value"
            )
    return ""


def substituted(narrow, observed, wide, exact=None):
    """`narrow` (a (result, written) pair) with each integer or boolean leaf taking `observed`'s
    value where that is the widened run's, cast to the leaf's dtype (wrapped where it does not fit,
    as the dtype's own arithmetic wraps), and the float64 run `exact` confirms it: the expectation
    of a device that converts no Python scalar with wraparound."""
    ns, spec = pytree.tree_flatten(narrow)
    os_, ws = pytree.tree_leaves(observed), pytree.tree_leaves(wide)
    xs = pytree.tree_leaves(exact) if exact is not None else None
    if not len(ns) == len(os_) == len(ws) or (xs is not None and len(xs) != len(ns)):
        return narrow
    out = []
    for k, (n, o, w) in enumerate(zip(ns, os_, ws)):
        if (
            _integral(n)
            and _integral(w)
            and isinstance(o, torch.Tensor)
            and n.shape == w.shape == o.shape
            and n.dtype == o.dtype
            and (n.dtype == torch.bool) == (w.dtype == torch.bool)
        ):
            right = (o == w.to(n.dtype)) & _confirmed(w, None if xs is None else xs[k])
            n = torch.where(right, o, n)
        out.append(n)
    return pytree.tree_unflatten(out, spec)

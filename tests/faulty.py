"""Fault-injecting backends: the CPU with one realistic kernel bug each.

They measure conform's finding power: a backend that is wrong in a known way must get the
known outcome, through conform's normal path (``op.resolve()(*args)`` inside ``run_case``).

Mechanism. Each backend is a `CPUBackend` subclass with a distinct `name` and a
``device_context()`` hook, which ``conform.run.execute.run_case`` enters around everything it does
on the device side (materialising inputs, the op, synchronising, backward). The hook returns a
``TorchDispatchMode`` that sees every ATen call made in that window, after autograd, and hands
the calls of the faulty op to the bug's function; every other call runs untouched. The
reference and golden sides run outside the mode, so only the device side is wrong. Backward
kernels (``sigmoid_backward``, ...) are dispatched through the same mode, so a bug can be in
the gradient alone. A few bugs live in the backend itself instead (`to_device` rejecting
float64, the way MPS does).

Use: ``BACKENDS["alpha_ignored"]()`` is a backend; ``--device tests.faulty:AlphaIgnored``
works too once the runner exists (each class is also a module attribute).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conform.backends import CPUBackend, MPSBackend

aten = torch.ops.aten

BACKENDS: dict[str, type[CPUBackend]] = {}


class _FaultMode(TorchDispatchMode):
    def __init__(self, targets, bug):
        super().__init__()
        self.targets = targets
        self.bug = bug

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.targets:
            return self.bug(func, args, kwargs)
        return func(*args, **kwargs)


class FaultyBackend(CPUBackend):
    """The CPU, except for the bug in `bug` on the ops in `targets`."""

    name = "faulty"
    targets: frozenset = frozenset()
    bug: Callable | None = None

    def device_context(self):
        return _FaultMode(self.targets, type(self).bug)

    def describe(self) -> dict[str, str]:
        d = super().describe()
        d["fault"] = self.name
        return d


def fault_registry(registry: dict, namespace: dict, prefix: str = ""):
    """A `fault(name, *targets, **attrs)` decorator: it registers `fn(func, args, kwargs)` as the
    bug of a new backend named "faulty-<name>", in `registry` and as an attribute of the module
    whose globals are `namespace` (so that `--device module:Class` finds it)."""

    def fault(name: str, *targets, **attrs):
        def register(fn):
            cls_name = prefix + "".join(p.title() for p in name.split("_"))
            body = {
                "name": f"faulty-{name}",
                "targets": frozenset(targets),
                "bug": staticmethod(fn),
                "__doc__": fn.__doc__,
                "__module__": namespace["__name__"],
                **attrs,
            }
            cls = type(cls_name, (FaultyBackend,), body)
            registry[name] = cls
            namespace[cls_name] = cls
            return cls

        return register

    return fault


fault = fault_registry(BACKENDS, globals())


def _contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


# -- wrong values ---------------------------------------------------------------------------


@fault("ignores_strides", aten.add.Tensor, aten.mul.Tensor)
def _ignores_strides(func, args, kwargs):
    """Reads non-contiguous inputs as if they were contiguous (the kernel ignores strides)."""
    fixed = [
        torch.as_strided(a, a.shape, _contiguous_strides(a.shape), a.storage_offset())
        if isinstance(a, torch.Tensor) and not a.is_contiguous() and a.dim() >= 2 and 0 not in a.stride()
        else a
        for a in args
    ]
    return func(*fixed, **kwargs)


@fault("wrong_above_size", aten.sum.default, aten.sum.dim_IntList)
def _wrong_above_size(func, args, kwargs):
    """Above 1024 elements a second pass is needed; it drops the last partial block."""
    x = args[0]
    if x.numel() > 1024:
        flat = x.reshape(-1).clone()
        flat[1024:] = 0
        x = flat.view(x.shape)
    return func(x, *args[1:], **kwargs)


@fault("nan_not_propagated", aten.maximum.default)
def _nan_not_propagated(func, args, kwargs):
    """maximum as where(a > b, a, b): a NaN in `a` is silently replaced by `b`."""
    a, b = args
    return torch.where(a > b, a, b)


@fault("alpha_ignored", aten.add.Tensor, aten.sub.Tensor)
def _alpha_ignored(func, args, kwargs):
    """The `alpha` keyword never reaches the kernel."""
    kwargs = {k: v for k, v in kwargs.items() if k != "alpha"}
    return func(*args, **kwargs)


@fault("fp16_overflow", aten.linalg_vector_norm.default)
def _fp16_overflow(func, args, kwargs):
    """A half-precision p-norm keeps the powers |x|**p and their sum in half: for the 2-norm the
    squares overflow above 255 where the norm fits (the reference accumulates in float32).

    Any finite order but 0 takes that path (a generic p-norm kernel); 0, inf and -inf count and
    compare instead. Everything else about the call is honoured (dim, keepdim), so the fault
    shows as wrong values, not as a wrong shape. An explicit ``dtype=torch.float16`` is the same
    computation in half (only a wider dtype= moves the powers out of half)."""
    x = args[0]
    ord_, dim, keepdim = (list(args[1:]) + [None] * 3)[:3]
    ord_ = float(kwargs.get("ord", 2 if ord_ is None else ord_))
    dim = kwargs.get("dim", dim)
    keepdim = bool(kwargs.get("keepdim", keepdim))
    if x.dtype == torch.float16 and math.isfinite(ord_) and ord_ != 0 and kwargs.get("dtype") in (None, torch.float16):
        if ord_ == 2:
            return (x * x).sum(dim=dim or None, keepdim=keepdim).sqrt()
        return (x.abs() ** ord_).sum(dim=dim or None, keepdim=keepdim) ** (1 / ord_)
    return func(*args, **kwargs)


@fault("wrong_on_broadcast", aten.mul.Tensor)
def _wrong_on_broadcast(func, args, kwargs):
    """When `other` is broadcast, only its first element is used."""
    a, b = args[0], args[1]
    if isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor) and b.shape != a.shape and b.numel() > 1:
        return func(a, b.reshape(-1)[0], **kwargs)
    return func(*args, **kwargs)


@fault("inplace_view_not_written_back", aten.add_.Tensor, aten.mul_.Tensor)
def _inplace_view_not_written_back(func, args, kwargs):
    """In-place on a non-contiguous `self` runs on a contiguous copy that is never copied back."""
    self = args[0]
    if not self.is_contiguous():
        return func(self.contiguous(), *args[1:], **kwargs)
    return func(*args, **kwargs)


@fault("reduction_off_by_one", aten.sum.dim_IntList)
def _reduction_off_by_one(func, args, kwargs):
    """The loop over the reduced dimension stops one element short."""
    x, dims = args[0], args[1]
    if dims and len(dims) == 1 and x.dim() > 0 and x.shape[dims[0]] > 1:
        x = x.narrow(dims[0], 0, x.shape[dims[0]] - 1)
    return func(x, *args[1:], **kwargs)


@fault("sign_of_zero", aten.neg.default)
def _sign_of_zero(func, args, kwargs):
    """neg(x) as 0 - x: neg(0.0) is +0.0 instead of -0.0."""
    return torch.zeros_like(args[0]) - args[0]


@fault("product_zero_sign", aten.mul.Tensor)
def _product_zero_sign(func, args, kwargs):
    """x * y + 0.0 (a kernel that adds a zero bias): the product of 0 and -3 is +0.0, not -0.0."""
    return func(*args, **kwargs) + 0.0


@fault("empty_reduction", aten.sum.default, aten.sum.dim_IntList)
def _empty_reduction(func, args, kwargs):
    """The sum of nothing is NaN (0 / 0 in a mean-then-scale kernel) instead of 0."""
    out = func(*args, **kwargs)
    if args[0].numel() == 0 and out.is_floating_point():
        return torch.full_like(out, float("nan"))
    return out


@fault("last_element_wrong", aten.exp.default)
def _last_element_wrong(func, args, kwargs):
    """The vectorised loop's scalar tail is skipped: the last element is left at 0."""
    out = func(*args, **kwargs)
    if out.numel() > 1:
        out = out.clone()
        out.view(-1)[-1] = 0
    return out


@fault("integer_only_wrong", aten.div.Tensor_mode)
def _integer_only_wrong(func, args, kwargs):
    """For integer dtypes, floor division truncates toward zero (wrong for negative quotients).

    INT_MIN / -1 wraps to INT_MIN, as floor mode and ARM's sdiv give: the CPU's own trunc kernel
    traps there with SIGFPE (x86's idiv; a real CPU bug, docs/evaluation/real_bugs.md), and a fault
    that borrowed it would crash on conform's INT_MIN-over--1 edge cases before any rounding
    could be seen. The fault is the rounding, not the CPU's trap."""
    a, b = args[0], args[1]
    if kwargs.get("rounding_mode") == "floor" and not a.is_floating_point():
        minus_one = b == -1
        if isinstance(b, torch.Tensor) and bool(minus_one.any()):
            quotient = func(a, torch.where(minus_one, torch.ones_like(b), b), rounding_mode="trunc")
            return torch.where(minus_one, -a, quotient)
        return -a if minus_one is True else func(a, b, rounding_mode="trunc")
    return func(*args, **kwargs)


@fault("complex_wrong", aten.mul.Tensor)
def _complex_wrong(func, args, kwargs):
    """Complex multiply uses the conjugate of `other` (a sign error in the imaginary term)."""
    a, b = args[0], args[1]
    if isinstance(a, torch.Tensor) and a.is_complex():
        return func(a, b.conj_physical() if isinstance(b, torch.Tensor) else b, **kwargs)
    return func(*args, **kwargs)


@fault("inf_clamped", aten.exp.default)
def _inf_clamped(func, args, kwargs):
    """Overflow saturates to the dtype's largest finite value instead of +inf."""
    out = func(*args, **kwargs)
    return out.nan_to_num(nan=float("nan"), posinf=torch.finfo(out.dtype).max)


@fault("wrong_distribution", aten.uniform_.default, aten.rand_like.default)
def _wrong_distribution(func, args, kwargs):
    """The random generator's scale is doubled: rand gives [0, 2) instead of [0, 1)."""
    out = func(*args, **kwargs)
    return out.mul_(2)


@fault("ties_last_index", aten.argmax.default)
def _ties_last_index(func, args, kwargs):
    """argmax returns the last of tied maxima instead of the first: a bug, since the
    documentation promises the first occurrence."""
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    if dim is None:
        flipped = x.reshape(-1).flip(0)
        return (x.numel() - 1 - func(flipped)).reshape(())
    n = x.shape[dim]
    return n - 1 - func(x.flip(dim), dim, *args[2:], **kwargs)


@fault("topk_last_tie", aten.topk.default)
def _topk_last_tie(func, args, kwargs):
    """topk picks the last of tied values rather than the first: legitimate, since topk does not
    say which of equal elements it returns."""
    x, k = args[0], args[1]
    dim = args[2] if len(args) > 2 else kwargs.get("dim", -1)
    rest = args[3:]
    values, indices = func(x.flip(dim), k, dim, *rest, **{n: v for n, v in kwargs.items() if n != "dim"})
    return values, x.shape[dim] - 1 - indices


@fault("argmax_wrong", aten.argmax.default)
def _argmax_wrong(func, args, kwargs):
    """argmax returns the position of the minimum (a flipped comparison)."""
    return aten.argmin.default(*args, **kwargs)


@fault("other_random_stream", aten.uniform_.default, aten.rand_like.default)
def _other_random_stream(func, args, kwargs):
    """Not a bug: the device's generator gives a different stream of the same distribution."""
    torch.manual_seed(987654321)
    return func(*args, **kwargs)


# -- wrong metadata -------------------------------------------------------------------------


@fault("wrong_dtype_promotion", aten.add.Tensor)
def _wrong_dtype_promotion(func, args, kwargs):
    """int + float keeps the integer dtype of `self` (type promotion skipped)."""
    out = func(*args, **kwargs)
    return out.to(args[0].dtype) if isinstance(args[0], torch.Tensor) else out


@fault("sum_keeps_int32", aten.sum.default, aten.sum.dim_IntList)
def _sum_keeps_int32(func, args, kwargs):
    """The sum of int32 stays int32 (torch promotes integer sums to int64)."""
    out = func(*args, **kwargs)
    return out.to(torch.int32) if args[0].dtype == torch.int32 else out


@fault("keepdim_ignored", aten.sum.dim_IntList)
def _keepdim_ignored(func, args, kwargs):
    """keepdim=True is ignored: the reduced dimension is dropped."""
    args = list(args)
    if len(args) > 2:
        args[2] = False
    kwargs = {k: v for k, v in kwargs.items() if k != "keepdim"}
    return func(*args, **kwargs)


@fault("out_not_resized", aten.add.out)
def _out_not_resized(func, args, kwargs):
    """out= of the wrong shape is neither resized nor rejected: the result is dropped."""
    out = kwargs["out"]
    expected = torch.broadcast_shapes(args[0].shape, args[1].shape)
    if tuple(out.shape) != tuple(expected):
        return out
    return func(*args, **kwargs)


@fault("out_unsafe_cast", aten.add.out)
def _out_unsafe_cast(func, args, kwargs):
    """out= of a dtype the result cannot be safely cast into (a float sum into an int64 out) is
    written, truncated, instead of refused (OpInfo's test_out expected failures on MPS)."""
    out = kwargs["out"]
    result = aten.add.Tensor(*args, **{k: v for k, v in kwargs.items() if k != "out"})
    out.resize_(result.shape)
    return out.copy_(result)


# -- errors ----------------------------------------------------------------------------------


@fault("missing_bounds_check", aten.index_select.default)
def _missing_bounds_check(func, args, kwargs):
    """Out-of-range indices are clamped instead of rejected."""
    x, dim, index = args
    size = x.shape[dim] if x.dim() else 1  # a 0-d input indexes like a 1-element one
    return func(x, dim, index.clamp(0, size - 1), **kwargs)


@fault("missing_size_check", aten.dot.default)
def _missing_size_check(func, args, kwargs):
    """dot of vectors of different lengths sums over the shorter one instead of raising
    (a kernel that takes its loop count from one operand alone)."""
    a, b = args
    n = min(a.numel(), b.numel())
    return func(a[:n], b[:n], **kwargs)


@fault("bfloat16_not_implemented", aten.cos.default)
def _bfloat16_not_implemented(func, args, kwargs):
    """No bfloat16 kernel, with the message torch's dispatch macros give."""
    if args[0].dtype == torch.bfloat16:
        raise RuntimeError("\"cos_vml_cpu\" not implemented for 'BFloat16'")
    return func(*args, **kwargs)


@fault("no_kernel", aten.erfinv.default)
def _no_kernel(func, args, kwargs):
    """The op has no kernel at all on this device (NotImplementedError, as MPS raises)."""
    raise NotImplementedError(
        "The operator 'aten::erfinv.out' is not currently implemented for the MPS device. If you want this op to be "
        "considered for addition please comment on https://github.com/pytorch/pytorch/issues/141287"
    )


@fault("device_error", aten.cat.default)
def _device_error(func, args, kwargs):
    """The kernel fails for more than two inputs (a fixed-size argument buffer)."""
    if len(args[0]) > 2:
        raise RuntimeError("MPSGraph: failed to encode kernel: too many input tensors (3 > 2)")
    return func(*args, **kwargs)


@fault("grad_wrong", aten.sigmoid_backward.default)
def _grad_wrong(func, args, kwargs):
    """Only the gradient is wrong: sigmoid's backward forgets the (1 - y) factor."""
    grad_output, y = args
    return grad_output * y


@fault("backward_not_implemented", aten.tanh_backward.default)
def _backward_not_implemented(func, args, kwargs):
    """The forward works; the backward kernel is missing."""
    raise NotImplementedError("the derivative for 'tanh' is not implemented on this device")


@fault("fp16_intermediate_overflow", aten.hypot.default)
def _fp16_intermediate_overflow(func, args, kwargs):
    """A half-precision hypot squares and sums in half: x*x + y*y overflows above 65504, so the
    result is inf where it is finite (about 181 and up), though every input and output fits."""
    x, y = args[0], args[1]
    out = func(*args, **kwargs)
    if out.dtype == torch.float16:
        squares = x.to(torch.float32) ** 2 + y.to(torch.float32) ** 2
        out = torch.where(squares > torch.finfo(torch.float16).max, torch.full_like(out, float("inf")), out)
    return out


@fault("bf16_integer_off_by_one", aten.round.default)
def _bf16_integer_off_by_one(func, args, kwargs):
    """A bfloat16 round takes a fast path floor(x + 0.5) for |x| >= 64, with x + 0.5 rounded to
    bfloat16: between 128 and 256 that is a tie rounded to even, so odd integers come out one too
    large (129 -> 130). Within bfloat16's rtol of 1.6%: only an exact comparison sees it."""
    x = args[0]
    out = func(*args, **kwargs)
    if x.dtype == torch.bfloat16:
        out = torch.where(x.abs() >= 64, torch.floor(x + 0.5), out)
    return out


@fault("vector_tail_nan", aten.relu.default)
def _vector_tail_nan(func, args, kwargs):
    """relu's vectorised body (blocks of 8 along the innermost dim) propagates NaN; its scalar
    tail, after at least one full block, is max(x, 0) with the operands swapped and returns 0."""
    x = args[0]
    out = func(*args, **kwargs)
    n = x.shape[-1] if x.dim() else 0
    if n > 8 and n % 8 and x.is_floating_point():
        out = out.clone()
        tail = out[..., n - n % 8 :]
        tail.copy_(torch.where(tail.isnan(), torch.zeros_like(tail), tail))
    return out


def _reject_float64(self, t):
    if t.dtype == torch.float64:
        raise TypeError(
            "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
            "Please use float32 instead."
        )
    return t.clone()


class Float64Rejected(FaultyBackend):
    """Rejects float64 tensors on the way in, with MPS's message."""

    name = "faulty-float64_rejected"
    unsupported_dtype_patterns = MPSBackend.unsupported_dtype_patterns
    to_device = _reject_float64


BACKENDS["float64_rejected"] = Float64Rejected


class Healthy(FaultyBackend):
    """No bug at all, through the same dispatch-mode path: the control for false alarms."""

    name = "faulty-none"


BACKENDS["none"] = Healthy

"""How close is close enough (rule 8 of docs/verdict-rule.md): torch.testing's per-dtype table,
op-rule overrides, error growth with the number of terms summed, and an absolute floor per
output leaf bounded by what can cancel in it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import torch

from conform.judge.trees import bind_arguments, leaves
from opdb.hints import hint

# (rtol, atol), exactly torch.testing's defaults
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex32: (1e-3, 1e-5),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}

# Not in torch.testing's table: 8-bit floats get one unit of their own precision (eps), since
# a correct kernel may round once differently.
for _name, _rtol in (
    ("float8_e4m3fn", 0.125),
    ("float8_e4m3fnuz", 0.125),
    ("float8_e5m2", 0.25),
    ("float8_e5m2fnuz", 0.25),
):
    _dt = getattr(torch, _name, None)
    if isinstance(_dt, torch.dtype):
        DEFAULT_TOLERANCES[_dt] = (_rtol, 1e-3)

EXACT = (0.0, 0.0)


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    dt = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return dt


def is_inexact(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def default_tolerance(dtype: torch.dtype | str) -> tuple[float, float]:
    """(rtol, atol) of the table; (0, 0) for integer and bool dtypes."""
    dt = as_dtype(dtype)
    if not is_inexact(dt):
        return EXACT
    return DEFAULT_TOLERANCES.get(dt, DEFAULT_TOLERANCES[torch.float32])


def growth(reduction_size: int) -> float:
    """The factor by which tolerances grow for outputs that each sum `reduction_size` terms."""
    return math.sqrt(reduction_size) if reduction_size > 1 else 1.0


def override_for(op, dtype: torch.dtype | str) -> tuple[float, float] | None:
    """The op rule's (rtol, atol) for this dtype (by name, then "*"), or None."""
    rules = getattr(op, "rules", None)
    table = getattr(rules, "tolerances", None) or {}
    name = str(as_dtype(dtype)).removeprefix("torch.")
    tol = table.get(name, table.get("*"))
    if tol is None:
        return None
    if isinstance(tol, (tuple, list)):
        return float(tol[0]), float(tol[1])
    return float(tol.rtol), float(tol.atol)


def exactly_determined(op, case=None) -> bool:
    """opdb's exactness rule (`OpSpec.exact`) for one case: an op whose exactness depends on an
    argument (`hints.exact_only_with`: div's rounding_mode, true division when None) is exact only
    in the cases that give that argument."""
    if not getattr(op, "exact", False):
        return False
    arg = hint(op, "exact_only_with")
    if arg is None or case is None:
        return True
    return bind_arguments(op, case.args, case.kwargs).get(arg) is not None


def tolerance_for(
    op,
    dtype: torch.dtype | str,
    *,
    reduction_size: int = 1,
    input_scale: float = 0.0,
    output_scale: float = math.inf,
    second_scale: float = 0.0,
    gradient: bool = False,
    case=None,
) -> tuple[float, float]:
    """(rtol, atol) for comparing `op`'s results of `dtype` (rule 8). `op` may be None (table
    only). `input_scale` is the largest finite magnitude among the case's floating inputs,
    `second_scale` the second largest input tensor's, `output_scale` the judged output's own;
    `gradient` for a backward's results; `case` decides ops whose exactness depends on an
    argument (exactly_determined)."""
    dt = as_dtype(dtype)
    if not is_inexact(dt):  # rule (8a)
        return EXACT
    rule = override_for(op, dt) if op is not None else None
    if rule is not None:  # rule (8b)
        return rule
    if not gradient and exactly_determined(op, case):  # rule (8c)
        return EXACT
    rtol, atol = default_tolerance(dt)
    g = growth(reduction_size)  # rule (8d)
    return rtol * g, max(atol * g, rtol * g * min(input_scale, max(output_scale, second_scale)))  # rule (8e)


class LeafTolerance:
    """A tolerance that reads the output leaf it judges: `fn(dtype, output_scale)` -> (rtol, atol),
    `output_scale` the largest finite magnitude of the leaf's expectation (rule (8e)). compare()
    calls `at` for each tensor and scalar leaf; called with a dtype alone,
    it does not know the leaf (math.inf: the input-scale floor unbounded)."""

    def __init__(self, fn: Callable[[torch.dtype, float], tuple[float, float]]):
        self._fn = fn

    def __call__(self, dtype: torch.dtype) -> tuple[float, float]:
        return self._fn(dtype, math.inf)

    def at(self, dtype: torch.dtype, output_scale: float) -> tuple[float, float]:
        return self._fn(dtype, output_scale)


def tolerance_at(tol, dtype: torch.dtype, output_scale: float) -> tuple[float, float]:
    """`tol`'s (rtol, atol) for a leaf of `dtype` and scale `output_scale` (a plain per-dtype
    tolerance ignores the scale)."""
    return tol.at(dtype, output_scale) if isinstance(tol, LeafTolerance) else tol(dtype)


def leaf_scale(t: torch.Tensor) -> float:
    """The largest finite magnitude of an expected leaf (0.0 where none is finite); math.inf where
    the values cannot be read (meta, not floating), which leaves a floor unbounded."""
    if not is_inexact(t.dtype) or t.device.type == "meta" or t.is_quantized or t.is_nested:
        return math.inf
    if t.numel() == 0:
        return 0.0
    try:
        # a sparse tensor by its stored values: densifying one whose indices break its
        # invariants (the *_unsafe constructors) reads out of bounds
        a = t.detach()
        a = a if a.layout == torch.strided else a._values() if a.layout == torch.sparse_coo else a.values()
    except Exception:  # noqa: BLE001 - unreadable: the floor stays unbounded
        return math.inf
    # float8 (_scaled_mm's operands) has no isfinite kernel; float32 holds its values exactly
    # non-finite magnitudes as 0: one pass, no boolean-mask gather
    a = (a.float() if a.element_size() == 1 else a).abs().nan_to_num_(nan=0.0, posinf=0.0)
    return float(a.max()) if a.numel() else 0.0  # (a sparse tensor may store no values)


# -- tolerance policy of a case: error growth, input scale, mixed dtypes -----------------


def _integer_scale(t: torch.Tensor) -> float:
    if t.dtype == torch.bool or t.is_complex() or t.is_floating_point() or t.is_quantized:
        return math.inf
    if t.layout != torch.strided or t.device.type == "meta" or t.numel() == 0:
        return math.inf if t.numel() else 0.0
    return float(t.detach().abs().max().to(torch.float64))


def input_scales(inputs, skip: frozenset[str] = frozenset()) -> tuple[float, float]:
    """The largest finite magnitude among floating input tensors, and the second largest
    tensor's (0.0 for none; see tolerances.tolerance_for). Where no input but the keyword
    arguments in `skip` (the out= arguments) is floating, the integer inputs count: a floating
    result of integer inputs (fft of int64, mean of int32) is computed from them promoted to its
    dtype, and rounds at their scale."""
    tensors = [t for t in leaves(inputs) if isinstance(t, torch.Tensor)]
    scales = [leaf_scale(t) for t in tensors]
    args = inputs
    if isinstance(inputs, tuple) and len(inputs) == 2 and isinstance(inputs[1], dict):
        args = (inputs[0], {k: v for k, v in inputs[1].items() if k not in skip})
    own = [t for t in leaves(args) if isinstance(t, torch.Tensor)]
    if own and all(leaf_scale(t) == math.inf for t in own):
        scales += [_integer_scale(t) for t in own]
    top = sorted((s for s in scales if s != math.inf), reverse=True)[:2]
    return (top + [0.0, 0.0])[0], (top + [0.0, 0.0])[1]


# Families whose every output element sums many inputs (opdb.families names): their tolerance
# grows with the largest input's size, an upper bound on the terms per output.
GROWTH_FAMILIES = ("reduction", "linalg", "conv", "norm", "loss", "attention", "scan", "fft")


def numel_ratio(op, case, outputs) -> int:
    """How many input elements feed one output element: the error growth's `n` (at least 1)."""
    ins = [s.numel for s in case.tensor_specs() if is_inexact(s.torch_dtype)]
    outs_named = {a.name for a in getattr(op, "out_args", ())}
    own = dataclasses.replace(case, kwargs={k: v for k, v in case.kwargs.items() if k not in outs_named}).tensor_specs()
    if not any(is_inexact(s.torch_dtype) for s in own) and any(
        isinstance(t, torch.Tensor) and is_inexact(t.dtype) for t in leaves(outputs)
    ):
        # integer inputs of a floating result are its floating inputs (see input_scales)
        ins = [s.numel for s in own if s.torch_dtype != torch.bool] or ins
    outs = [t.numel() for t in leaves(outputs)]
    if not ins:
        return 1
    biggest_in = max(ins)
    if op.family in GROWTH_FAMILIES:
        return max(1, biggest_in)
    biggest_out = max(outs) if outs else 1
    return max(1, math.ceil(biggest_in / max(1, biggest_out)))


def gradient_tolerance(tol, want: torch.Tensor):
    """A gradient's absolute tolerance is at least rtol times its largest element.

    Backward formulas reuse the forward's *rounded* outputs (tanh' = 1 - y*y, sigmoid' =
    y * (1 - y)), so a small gradient element inherits an absolute error of a few ulps of the
    gradient's scale, not of its own size: elementwise relative checks would flag every
    correct half-precision backward. A wrong formula is off by the gradient's scale itself.
    """
    scale = leaf_scale(want)  # gather's sparse_grad=True gradient by its values
    rtol, atol = tolerance_at(tol, want.dtype, scale)
    if not is_inexact(want.dtype) or want.numel() == 0 or scale == math.inf:
        return (rtol, atol)
    return (rtol, max(atol, rtol * scale))


def loosest(tol, dtypes):
    """The per-dtype tolerance, no tighter than that of any dtype in `dtypes` (see _backward)."""

    def pick(dt, output_scale=math.inf):
        rtol, atol = tolerance_at(tol, dt, output_scale)
        if is_inexact(dt):
            for other in dtypes:
                r, a = tolerance_at(tol, other, output_scale)
                rtol, atol = max(rtol, r), max(atol, a)
        return rtol, atol

    return LeafTolerance(pick)

"""How close is close enough: one per-dtype table, op-rule overrides, and error growth.

The table is torch.testing's (``torch.testing._comparison.default_tolerances``), so a result
conform calls `pass` is one ``torch.testing.assert_close`` would also accept. A complex dtype
takes the tolerance of its real part; integers and bools compare exactly.

An op rule (``OpRules.tolerances``, keyed by dtype name or ``"*"``) overrides the table and is
taken as-is: it is the op owner's statement, with its reason in ``OpRules.tolerance_reason``.

Error growth. One output element of a reduction, a matmul or a convolution is the sum of
``n`` rounded products; the rounding errors of a recursive sum of ``n`` terms grow like
``sqrt(n)`` for random-sign errors (the worst case is ``n``; pairwise and blocked summation,
which most kernels use, stays near ``log2(n)``). ``sqrt(n)`` is the middle ground: it absorbs
the legitimate difference between two correct kernels that sum in different orders, and still
flags a wrong result (a dropped term, a wrong index, a half-precision accumulator) by orders
of magnitude. The table's tolerances are multiplied by ``sqrt(reduction_size)``; overrides are not.

The absolute floor, per output. A result computed from inputs of size S carries rounding error
of about rtol * S in absolute terms however small it is (cancellation: 1.5 - 1.4921875 in
bfloat16 is off by one input ulp, 100% of the result), so atol is at least rtol * sqrt(n) * S.
But an output that a later step scales back (layer_norm's y, a softmax, a sigmoid of x @ W, a
cosine) carries the rounding error of its own scale, whatever its inputs were: with S the
largest input, 1e21, the floor would pass any value of it. So each output leaf (each tensor
compare() judges: a result, a written argument, a gradient) bounds S by what can cancel in it:

    atol = max(atol_table * sqrt(n), rtol * sqrt(n) * min(S, max(O, S2)))

with O the leaf's own scale (the largest finite magnitude of its expectation) and S2 the
second largest input tensor's (`LeafTolerance`, `input_scales`; inputs as the op receives
them, before an out= or in-place write). Cancellation a - b leaves an
error of rtol * |a| only where |a| and |b| are close, so two tensors cancel no more than the
smaller one's scale, S2; one tensor's elements cancelling among themselves (a sum, a mean)
leave the leaf of their size somewhere, O. A gradient's S2 counts the forward's outputs among
its inputs, since its formula reads them (tanh' = 1 - y*y cancels against y of about 1,
logcumsumexp's exp(x - y) x against y). Cases whose tensors share one scale (most) keep the
floor of S. The bound bites where one input is far beyond the rest and the output is far below
it (the "huge" stress case): a saved mean of 2e18 from inputs of 1e21 keeps a floor of its own
scale; layer_norm's y of +-1 gets rtol * sqrt(n) times the scale of its weight, so 0 for +-1
(pytorch#162489) is a mismatch. What cancels below that (every element of a leaf far below
its one huge input) is left to the oracle's conditioning look (oracle._conditioning_excused:
golden again with the inputs moved by one unit), which excuses true cancellation element by
element.
"""

from __future__ import annotations

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
    """(rtol, atol) for comparing `op`'s results of `dtype`. `op` may be None (table only).

    Integer and bool results are always exact, whatever a rule says: an integer result is
    either right or wrong. So are the floating results of an op whose results are exactly
    determined (`OpSpec.exact`: moved, selected or rounded values), unless a tolerance rule says
    otherwise: 255 for 256 in bfloat16 is within rtol and still wrong. Not their gradients
    (`gradient=True`): where's gradient sums over broadcast dimensions. `case` decides ops whose
    exactness depends on an argument (see exactly_determined).

    `input_scale` is the largest finite magnitude among the case's floating inputs. A result
    computed from inputs of that size carries rounding error of about rtol * input_scale in
    absolute terms, however small the result: 1.5 - 1.4921875 in bfloat16 is off by one input
    ulp, which is 100% of the result. So atol is at least rtol * input_scale, bounded by
    `output_scale` (the largest finite magnitude of the output judged) or `second_scale` (the
    second largest input tensor's), whichever is larger: see the module docstring, an output
    scaled back to 1 from one input of 1e21 is not off by 1e21's ulps. A real kernel bug is off
    by the values' own scale, far beyond it.
    """
    dt = as_dtype(dtype)
    if not is_inexact(dt):
        return EXACT
    rule = override_for(op, dt) if op is not None else None
    if rule is not None:
        return rule
    if not gradient and exactly_determined(op, case):
        return EXACT
    rtol, atol = default_tolerance(dt)
    g = growth(reduction_size)
    return rtol * g, max(atol * g, rtol * g * min(input_scale, max(output_scale, second_scale)))


class LeafTolerance:
    """A tolerance that reads the output leaf it judges: `fn(dtype, output_scale)` -> (rtol, atol),
    `output_scale` the largest finite magnitude of the leaf's expectation (see the module
    docstring). compare() calls `at` for each tensor and scalar leaf; called with a dtype alone,
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
    a = (a.float() if a.element_size() == 1 else a).abs()
    a = a[torch.isfinite(a)]
    return float(a.max()) if a.numel() else 0.0


# -- tolerance policy of a case: error growth, input scale, mixed dtypes -----------------


def input_scales(inputs) -> tuple[float, float]:
    """The largest finite magnitude among floating input tensors, and the second largest
    tensor's (0.0 for none; see tolerances.tolerance_for)."""
    scales = (leaf_scale(t) for t in leaves(inputs) if isinstance(t, torch.Tensor))
    top = sorted((s for s in scales if s != math.inf), reverse=True)[:2]
    return (top + [0.0, 0.0])[0], (top + [0.0, 0.0])[1]


# Families whose every output element sums many inputs (opdb.families names): their tolerance
# grows with the largest input's size, an upper bound on the terms per output.
GROWTH_FAMILIES = ("reduction", "linalg", "conv", "norm", "loss", "attention", "scan", "fft")


def numel_ratio(op, case, outputs) -> int:
    """How many input elements feed one output element: the error growth's `n` (at least 1)."""
    ins = [s.numel for s in case.tensor_specs() if is_inexact(s.torch_dtype)]
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

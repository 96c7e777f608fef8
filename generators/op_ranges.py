"""Values relative to an op's own range, computed: inputs whose results lie just inside the dtype's
overflow or underflow threshold, found by inverting the op numerically.

A kernel that forms an intermediate bigger than its result (exp(x) before dividing by
sqrt(2 pi x) in i0, exp(beta x) in softplus) overflows early: i0(89.0) in float32 is inf though
its value, 1.9e37, fits. Drawn in the kind's own range (about +-3) or in the generic magnitude
bands, such inputs are met by chance only. For a unary elementwise op (one tensor argument,
nothing else), its float64 function (the independent reference where one exists, so that a
float64 kernel that overflows early does not set its own threshold; else the op itself in
float64) is read on a log-spaced grid of |x| from the dtype's smallest normal value to its
largest, each side of zero: where |f| crosses the dtype's largest value (or its smallest normal
one), bisection finds the inputs whose results lie between 2**-8 and 15/16 of the largest value
(between 2**-4 and 2**6 times the smallest normal one). That band of |x| is the tensor's
magnitude token, "range:<low>:<high>:<low>:<high>" (positive inputs, then negative ones; 0:0
where that side meets no threshold), so a stored case draws the same values whatever this module
computes later. Where the op's band is named in opdb/rules/ranges.toml (hint `op_range`) that
band is used instead; "none" there turns the computed one off.
"""

from __future__ import annotations

import math

import numpy
import torch
import torch.autograd.forward_ad as fwAD

PREFIX = "range:"
GRID = 2000  # points per side, log-spaced: neighbours about 4% apart in float32's range
OVER = (2.0**-8, 1 - 2.0**-4)  # results as fractions of the dtype's largest value
UNDER = (2.0**-4, 2.0**6)  # results as multiples of its smallest normal value
_BISECTIONS = 80


def token(bands: tuple[tuple[float, float] | None, tuple[float, float] | None]) -> str:
    """The magnitude token of (positive side, negative side) bands of |x|."""
    parts = []
    for band in bands:
        lo, hi = band if band is not None else (0.0, 0.0)
        parts += [repr(float(lo)), repr(float(hi))]
    return PREFIX + ":".join(parts)


def parse(magnitude: str) -> tuple[tuple[float, float] | None, tuple[float, float] | None] | None:
    """The bands of a "range:" token, or None where `magnitude` is not one (raises on a malformed one)."""
    if not magnitude.startswith(PREFIX):
        return None
    values = [float(v) for v in magnitude.removeprefix(PREFIX).split(":")]
    if len(values) != 4 or any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"malformed range {magnitude!r}")
    pos = (values[0], values[1]) if values[1] > values[0] > 0 else None
    neg = (values[2], values[3]) if values[3] > values[2] > 0 else None
    return pos, neg


def in_band(x: torch.Tensor, magnitude: str, g: torch.Generator) -> torch.Tensor:
    """`x` with each nonzero finite value moved, log-uniformly, into its side's band of |x|."""
    bands = parse(magnitude)
    out = x.to(torch.float64)
    for sign, band in zip((1.0, -1.0), bands):
        if band is None:
            continue
        lo, hi = math.log(band[0]), math.log(band[1])
        mag = torch.exp(torch.rand(x.shape, generator=g, dtype=torch.float64) * (hi - lo) + lo)
        on = (out * sign > 0) & torch.isfinite(out)
        out = torch.where(on, sign * mag, out)
    return out


def unary_input(op) -> str | None:
    """The name of a unary elementwise op's one tensor argument (out= aside), or None."""
    args = [a for a in op.arguments if not a.is_out]
    if len(args) != 1 or args[0].base_type != "Tensor" or args[0].name not in ("self", "input", "x"):
        return None
    if op.family in ("torchscript", "quantized", "sparse"):
        return None
    return args[0].name


def _float64_function(op, name: str, reference=None):
    """numpy float64 array -> numpy float64 array: the op's independent reference where the
    caller gives one (`reference(op, name)`, conform's references), else the op in float64."""
    f = reference(op, name) if reference is not None else None
    if f is not None:
        return f
    # the functional overload: an out= or in-place one computes the same values
    packet = getattr(torch.ops.aten, op.base_name.removesuffix("_"), None)
    call = packet.default if packet is not None and hasattr(packet, "default") else op.resolve()

    def golden(a):
        with torch.no_grad():
            out = call(torch.from_numpy(numpy.ascontiguousarray(a, dtype=numpy.float64)))
        if not isinstance(out, torch.Tensor) or out.dtype != torch.float64 or out.shape != a.shape:
            raise TypeError("not an elementwise float64 result")
        return out.numpy()

    return golden


def _classes(y: numpy.ndarray, top: float, low: float) -> numpy.ndarray:
    """1 above the dtype's largest value (inf too), -1 below its smallest normal one (0 too), 0
    inside, 2 for NaN."""
    a = numpy.abs(y)
    return numpy.where(numpy.isnan(y), 2, numpy.where(a > top, 1, numpy.where(a < low, -1, 0)))


def _where(f, a: float, b: float, target: float) -> float:
    """The x between a and b (|f(a)| and |f(b)| on either side of `target`) where |f| crosses it."""
    above_a = abs(float(f(numpy.array([a]))[0])) > target
    for _ in range(_BISECTIONS):
        m = (a + b) / 2
        if m in (a, b):
            break
        if (abs(float(f(numpy.array([m]))[0])) > target) == above_a:
            a = m
        else:
            b = m
    return (a + b) / 2


def _inward(f, xs, ys, cls, start: int, step: int, outside_x: float, target: float, rising: bool) -> float | None:
    """Walking the grid from `start` away from the threshold (`outside_x`, the grid point beyond
    it), the x where |f| passes `target` (drops below it where |f| rises toward the threshold,
    `rising`), by bisection between the grid points around it; None where the inside ends first."""
    prev, k = outside_x, start
    while 0 <= k < len(xs) and cls[k] == 0:
        if (ys[k] < target) if rising else (ys[k] > target):
            return _where(f, float(xs[k]), float(prev), target)
        prev, k = xs[k], k + step
    return None


def _side(f, xs: numpy.ndarray, top: float, low: float) -> tuple[float, float] | None:
    """The band of |x| on one side (xs: that side's grid, |x| rising) next to its first threshold."""
    with numpy.errstate(all="ignore"):
        ys = numpy.abs(f(xs))
    cls = _classes(ys, top, low)
    for i in range(len(xs) - 1):
        pair = {int(cls[i]), int(cls[i + 1])}
        if 2 in pair or len(pair) == 1 or pair == {1, -1}:
            continue
        if abs(xs[i]) >= top * OVER[0] or abs(xs[i + 1]) <= low * UNDER[1]:
            continue  # the input is at the dtype's own edge there (sin(x) ~ x): its generic bands reach it
        # the threshold lies between grid points i and i + 1: the inside is on one of them
        inside, step = (i, -1) if cls[i] == 0 else (i + 1, 1)
        outside_x = float(xs[i + 1] if cls[i] == 0 else xs[i])
        rising = 1 in pair  # |f| rises toward an overflow, falls toward an underflow
        near, far = (OVER[1] * top, OVER[0] * top) if rising else (UNDER[0] * low, UNDER[1] * low)
        with numpy.errstate(all="ignore"):
            x_near = _inward(f, xs, ys, cls, inside, step, outside_x, near, rising)
            x_far = _inward(f, xs, ys, cls, inside, step, outside_x, far, rising)
        if x_near is None or x_far is None:
            return None
        lo, hi = sorted((abs(x_near), abs(x_far)))
        if not (math.isfinite(hi) and lo > 0 and hi > lo * (1 + 1e-6)):
            return None  # a pole (lgamma at -1): no band of inputs to draw from
        return lo, hi
    return None


_COMPUTED: dict[tuple, str] = {}


def computed(op, dtype: str, reference=None) -> str:
    """The "range:" token of `op` in `dtype` (a floating dtype), or "" where it has none; computed
    once a process. `reference(op, name)` gives the op's independent float64 function, or None."""
    # an in-place or out= overload computes the functional one's values: one search for all three
    key = (op.base_name.removesuffix("_"), unary_input(op), dtype, reference)
    if key not in _COMPUTED:
        _COMPUTED[key] = _compute(op, dtype, reference)
    return _COMPUTED[key]


def _compute(op, dtype: str, reference) -> str:
    name = unary_input(op)
    if name is None:
        return ""
    info = torch.finfo(getattr(torch, dtype))
    top, low = float(info.max), float(info.smallest_normal)
    with numpy.errstate(all="ignore"):
        grid = numpy.geomspace(low, top, GRID)
    try:
        f = _float64_function(op, name, reference)
        bands = (_side(f, grid, top, low), _side(f, -grid, top, low))
    except Exception:  # noqa: BLE001 - an op that rejects its float64 inputs has no computed range
        return ""
    eps = float(info.eps)
    with numpy.errstate(all="ignore"):
        tails = [_tail(f, side, eps, low) for side in (grid, -grid)]
    bands = tuple(_merge(b, t) for b, t in zip(bands, tails))
    df = _float64_derivative(op)
    if df is not None:
        try:
            with numpy.errstate(all="ignore"):
                more = [
                    (_side(df, side, top, 0.0), _flat(f, df, side, eps))  # only the derivative's overflow
                    for side in (grid, -grid)
                ]
        except Exception:  # noqa: BLE001 - no derivative to read: the forward's bands alone
            more = [(None, None), (None, None)]
        bands = tuple(_merge(b, *extra) for b, extra in zip(bands, more))
    return token(bands) if any(b is not None for b in bands) else ""


# -- where the gradient is at stake -------------------------------------------------------------
#
# A backward formula written in terms of the result breaks where the result saturates:
# sigmoid's y (1 - y) is 0 once y rounds to 1 (x > 17 in float32), tanh's 1 - y**2 once y rounds
# to +-1, expm1's y + 1 once y rounds to -1, while the derivative is a normal number of the
# dtype. And a formula that forms an intermediate bigger than the derivative overflows early
# (exp2's grad * 2**x before ln 2). Each side's band grows to take in, beside the forward's
# threshold, (a) the inputs where the derivative crosses the dtype's largest value, and (b) the
# first run of inputs (|x| >= 1) where the result saturates in the dtype and not in float64: the
# relative derivative |f'(x)| max(1, |x|) / |f(x)| between 2**8 float64 units and a quarter of
# the dtype's unit (the float64 reference still resolves what the dtype has lost). A band far
# from the forward's on the same side is left out (see _merge).

NEAR = 4.0  # a derivative band within this factor of the forward's joins it
TAIL_SPAN = 1e3  # the widest tail band: from its start to where results near underflow
FLAT_RUN = 2  # grid points in a row (about 9% of |x| apart): a saturation, not an isolated root of f'


def _float64_derivative(op):
    """numpy float64 array -> f'(x) elementwise, by the op's own derivative formula (forward
    mode) in float64, or None where the op has no functional overload to differentiate."""
    packet = getattr(torch.ops.aten, op.base_name.removesuffix("_"), None)
    call = packet.default if packet is not None and hasattr(packet, "default") else None
    if call is None:
        return None

    def derivative(a):
        # forward-mode AD: no autograd engine, whose per-device queues are sized once, at a
        # process's first backward (a device registered later, as tests register the emulated
        # one, would then fail its own first backward)
        x = torch.from_numpy(numpy.ascontiguousarray(a, dtype=numpy.float64))
        with fwAD.dual_level():
            y = call(fwAD.make_dual(x, torch.ones_like(x)))
            if not isinstance(y, torch.Tensor) or y.shape != x.shape:
                raise TypeError("not an elementwise float64 result")
            t = fwAD.unpack_dual(y).tangent
        if t is None:
            raise TypeError("no forward-mode derivative")
        return t.detach().numpy()

    return derivative


def _flat(f, df, xs: numpy.ndarray, eps: float) -> tuple[float, float] | None:
    """The first band of |x| (xs: one side's grid) where the result saturates in a dtype of unit
    `eps` but not in float64, at least FLAT_RUN grid points long; None where there is none."""
    y, d = numpy.abs(f(xs)), numpy.abs(df(xs))
    with numpy.errstate(all="ignore"):
        rel = d * numpy.maximum(1.0, numpy.abs(xs)) / y
    lo_rel = 2.0**8 * numpy.finfo(numpy.float64).eps
    # |x| >= 1: a result that tends to a limit, not one flat at a point (i0 and cos at 0)
    flat = numpy.isfinite(rel) & (y > 0) & numpy.isfinite(y) & (rel > lo_rel) & (rel < eps / 4)
    flat &= numpy.abs(xs) >= 1
    return _first_run(xs, flat)


def _tail(f, xs: numpy.ndarray, eps: float, low: float) -> tuple[float, float] | None:
    """The first band of |x| >= 1 (xs: one side's grid) where the result is a normal number far
    from underflow yet below a quarter of the dtype's unit: the tail where a formula written as
    a difference of O(1) terms cancels (ndtr's (1 + erf(x / sqrt 2)) / 2 below -5.5 in float32);
    None where there is none (float16's normal range is too short for one)."""
    y = numpy.abs(f(xs))
    tail = (numpy.abs(xs) >= 1) & numpy.isfinite(y) & (y >= 2.0**24 * low) & (y <= eps / 4)
    band = _first_run(xs, tail)
    # an exponential tail spans a factor of a few in |x|; a slow decay (1 / x, airy_ai's
    # |x|**-0.25) spans decades up to the huge magnitudes the generic bands already draw
    return band if band is not None and band[1] <= band[0] * TAIL_SPAN else None


def _first_run(xs: numpy.ndarray, on: numpy.ndarray) -> tuple[float, float] | None:
    run = 0
    for i, here in enumerate(on):
        run = run + 1 if here else 0
        if run and (i + 1 == len(on) or not on[i + 1]) and run >= FLAT_RUN:
            return float(abs(xs[i - run + 1])), float(abs(xs[i]))
    return None


def _merge(forward, *more):
    """The forward's band grown to take in the derivative's bands that lie within a factor
    NEAR of it (a side draws one band, log-uniformly: one far away would thin it out); the
    derivative's alone where the forward has none."""
    band = forward
    for b in more:
        if b is None:
            continue
        if band is None:
            band = b
        elif b[0] <= band[1] * NEAR and band[0] <= b[1] * NEAR:
            band = (min(band[0], b[0]), max(band[1], b[1]))
    return band

"""Values at infinity: an elementwise op whose float64 result has saturated at the top of its
dtype's range takes the saturated value at +-inf.

Golden runs the op's own formula at inf and shares what the formula meets there: silu(-inf) is
x * sigmoid(x) = -inf * 0, NaN in float64 as in float32, while silu(x) is -0.0 for every finite
x below -750. The finite points do not share it. So where float64 gives one and the same finite
value, bit for bit, at +-max, +-max/2, ... +-max/16 of the case's dtype (PROBE), the function is
flat there and its value at infinity is that value; a result at +-inf that is NaN, or not close
to it, is wrong. A function that oscillates or decays (sin, a Bessel function, 1/x) gives other
values at those points and has no opinion here, nor does one that is NaN or infinite there
(digamma at its poles, log of a negative number). Ops periodic in the integers are left out by
the opdb hint `limit_at_infinity = false`: frac is 0 at every large float (they are integers),
yet it has no limit. Ops of one floating tensor only: at (inf, inf) the value along the diagonal
is not the value along other rays, so no single limit decides a two-tensor op there.
"""

from __future__ import annotations

import math

import torch

PROBE = (1, 2, 4, 8, 16)  # divisors of the dtype's largest value: exact in every floating dtype
# Moderate inputs: an op that takes its saturated value there too is constant on that side (mul by
# a scalar 0, xlogy(x, 1)), and IEEE arithmetic, not a limit, defines it at inf (inf * 0 is NaN)
MODERATE = (0.5, 1.0, 2.0)


def probe(dtype: torch.dtype) -> torch.Tensor:
    """A (2, len(PROBE) + len(MODERATE)) float64 tensor: +max/k then MODERATE in row 0, their
    negatives in row 1."""
    top = torch.finfo(dtype).max
    row = torch.tensor([top / k for k in PROBE] + list(MODERATE), dtype=torch.float64)
    return torch.stack([row, -row])


def _same(row: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return (row == value) & (torch.signbit(row) == torch.signbit(value))


def saturated(values: torch.Tensor) -> dict[float, float]:
    """{+inf: value, -inf: value} for each row of float64 `values` (the op at `probe`) that is
    one finite value bit for bit over PROBE and is not that value all over MODERATE."""
    out = {}
    for sign, row in zip((math.inf, -math.inf), values.reshape(2, -1)):
        top, moderate = row[: len(PROBE)], row[len(PROBE) :]
        first = top[0]
        if bool(torch.isfinite(top).all()) and bool(_same(top, first).all()) and not bool(_same(moderate, first).all()):
            out[sign] = float(first)
    return out


def off_at_infinity(x: torch.Tensor, got: torch.Tensor, limit: dict[float, float], dtype: torch.dtype, scale=None):
    """A boolean mask of `got`'s elements at an input +-inf whose side has a saturated value
    that `got` does not hold: NaN, or beyond a few units of dtype (signed zeros alike). With
    `scale` (the grad_outputs of a gradient `got`), the value is the limit times the scale."""
    x, got = x.detach().cpu().to(torch.float64), got.detach().cpu().to(torch.float64)
    mask = torch.zeros(got.shape, dtype=torch.bool)
    if x.shape != got.shape or (scale is not None and tuple(scale.shape) != tuple(got.shape)):
        return mask
    factor = torch.ones_like(got) if scale is None else scale.detach().cpu().to(torch.float64)
    eps, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).smallest_normal
    for sign, value in limit.items():
        want = float(torch.tensor(value, dtype=dtype)) * factor
        at = x == sign
        close = (got == want) | ((got - want).abs() <= 4 * eps * want.abs() + tiny)  # an overflowed limit too
        mask |= at & ~close
    return mask


def at_infinity(x: torch.Tensor, want: torch.Tensor, limit: dict[float, float]) -> torch.Tensor:
    """`want` (an expectation of the result) with the op's saturated value at each infinite input."""
    out = want.detach().clone()
    xs = x.detach().cpu().to(out.device)
    for sign, value in limit.items():
        out[xs == sign] = value
    return out


def message(what: str, x: torch.Tensor, got: torch.Tensor, mask: torch.Tensor, limit: dict[float, float], dtype) -> str:
    k = tuple(int(i) for i in mask.nonzero()[0]) if mask.dim() else ()
    at = float(x.detach().cpu()[k]) if x.dim() else float(x)
    name = str(dtype).removeprefix("torch.")
    value = "the op's derivative" if what.startswith("grad") else "the op"
    points = f"{'-' if at < 0 else ''}max/{{{', '.join(map(str, PROBE))}}} of {name}"
    times = " (times grad_output)" if what.startswith("grad") else ""
    found = float(got.detach().cpu()[k])
    kind = "NaN mismatch" if math.isnan(found) else "infinity mismatch" if math.isinf(found) else "mismatch"
    return (
        f"{what}: {kind} at {k}: {found!r} for an input {at!r}, where float64 gives {value} "
        f"{limit[at]!r}{times} at every one of {points} (saturated: its value at infinity); "
        f"{int(mask.sum())} of {mask.numel()} elements at an infinite input off it"
    )

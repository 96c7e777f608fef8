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

Any other op (several tensors, reductions, softmax, losses, norms) is held to the same standard
element by element, where its limit exists whatever the rates at which its infinite inputs grow:
float64 runs it with every infinite input replaced by +-2**e beyond the case's dtype's range
(`at_probe`), with one e for all of them, another, and four draws of e for each element apart
(SPREAD), then at +-MODERATE in their place. A result element that is one finite value bit for
bit over the six large probes and not that value at both moderate ones
is the op's value there: softmax([inf, 1]) is [1, 0] (the CPU's exp(inf - inf) makes it NaN),
while softmax([inf, inf]) or x - y at (inf, inf) differ between the spread probes (no limit: NaN
is right), and lerp(a, inf, 0) or x * 0 take it at the moderate probes too (constant: IEEE
arithmetic defines it at inf). There only a NaN, or an infinity where the value is finite in the
dtype, is judged (`off_infinity`): finite values stay golden's to judge.
"""

from __future__ import annotations

import math

import torch

PROBE = (1, 2, 4, 8, 16)  # divisors of the dtype's largest value: exact in every floating dtype
# Moderate inputs: an op that takes its saturated value there too is constant on that side (mul by
# a scalar 0, xlogy(x, 1)), and IEEE arithmetic, not a limit, defines it at inf (inf * 0 is NaN)
MODERATE = (0.5, 1.0, 2.0)


SPREAD = 6  # probes of large values: two with one power of two for all, four with one per element
LEVELS = 16  # the powers of two an infinite input takes: 2**e for e from the dtype's maxexp up


def at_probe(x: torch.Tensor, n: int, j: int, dtype: torch.dtype) -> torch.Tensor:
    """float64 `x` (the n-th floating input of a case, counting from 0) with each infinite element
    replaced for probe `j`: +-2**e, e from the exponent of the dtype's largest finite value up
    (beyond it, so beyond every finite input): the lowest e everywhere (j 0), the highest (1), an e
    drawn for each element from a generator seeded by (j, n) (2 to SPREAD - 1); then +-0.5 and +-2
    (SPREAD, SPREAD + 1: MODERATE's ends). Powers of two, so that a ratio of them is exact: a
    result that depends only on ratios is bit for bit the same at each probe."""
    inf = torch.isinf(x)
    if not bool(inf.any()):
        return x
    if j >= SPREAD:
        mag = torch.full(x.shape, MODERATE[(j - SPREAD) * 2], dtype=torch.float64)
    else:
        if j < 2:
            e = torch.full(x.shape, j * (LEVELS - 1))
        else:
            e = torch.randint(LEVELS, x.shape, generator=torch.Generator().manual_seed(1000 * j + n))
        mag = torch.pow(2.0, (e + math.frexp(torch.finfo(dtype).max)[1]).to(torch.float64))
    return torch.where(inf, torch.copysign(mag, x), x)


def saturated_elements(runs: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    """For each leaf of float64 results `runs[j]` (probe j of at_probe, SPREAD + 2 of them), the
    elements that are one finite value bit for bit over the large probes and not that value (a
    zero of either sign for a zero) at both moderate ones."""
    masks = []
    for k, first in enumerate(runs[0]):
        mask = torch.isfinite(first)
        for run in runs[1:SPREAD]:
            mask &= _same(run[k], first)
        constant = torch.ones_like(mask)
        for run in runs[SPREAD:]:
            constant &= run[k] == first  # a zero of either sign: a product with an exact zero
        masks.append(mask & ~constant)
    return masks


def off_infinity(got: torch.Tensor, value: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The elements of `got` (a result in its dtype) where `mask` says the op has a value at
    infinity (float64 `value`) that `got` misses: NaN, or infinite where the value is finite in
    got's dtype."""
    if got.shape != value.shape or not got.is_floating_point():
        return torch.zeros(mask.shape, dtype=torch.bool)
    finite = torch.isfinite(value.to(got.dtype))
    return mask & (torch.isnan(got) | torch.isinf(got) & finite)


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


def infinity_message(what: str, got: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, dtype) -> str:
    k = tuple(int(i) for i in mask.nonzero()[0]) if mask.dim() else ()
    name = str(dtype).removeprefix("torch.")
    found = float(got.detach().cpu()[k])
    kind = "NaN mismatch" if math.isnan(found) else "infinity mismatch"
    seed = " (for the case's grad_output)" if what.startswith("grad") else ""
    return (
        f"{what}: {kind} at {k}: {found!r} where float64 gives {float(value[k])!r}{seed} with every "
        f"infinite input at +-2**e beyond {name}'s range, one e for all or a drawn e for each "
        f"(its value there, whatever rates the infinite inputs grow at); "
        f"{int(mask.sum())} of {mask.numel()} elements off it"
    )

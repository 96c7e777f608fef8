"""Basic hypothesis strategies: dtypes, shapes, layouts, tensor specs and Python scalars.

Everything here produces *specs* (`TensorSpec`, plain Python values), never real tensors: specs
are cheap to draw, shrink well and serialise to JSON. `Case.materialize` builds the tensors.
Orderings matter for shrinking: the first element of every `sampled_from` is the simplest choice
(contiguous layout, plain real values), so a failing case shrinks towards it.
"""

from __future__ import annotations

import contextvars
import functools
import math

from generators import memo
from generators.case import (
    LAYOUTS,
    PER_CHANNEL_LAYOUTS,
    QUANTIZED_DTYPES,
    QUANTIZED_STORAGE,
    STRUCTURED_KINDS,
    TensorSpec,
)
from generators.tensor import EDGE_KINDS

# the dtype cells conform tests by default, simplest first
DTYPE_NAMES = (
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "complex64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
)
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")
COMPLEX_DTYPES = ("complex64", "complex128")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")

DEFAULT_MAX_NUMEL = 4096

# Innermost lengths that straddle SIMD widths: a vectorised loop handles full blocks (8 float32
# with AVX2, 16 with AVX-512, 4 with NEON; 2 or 4 blocks unrolled) and a scalar or masked tail
# the rest, and the two paths disagree where a kernel is wrong.
VECTOR_LENGTHS = (1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65)


# -- stress cases ---------------------------------------------------------------------------------
# Real kernel bugs sit where several input dimensions meet: a NaN inside a full vector block *and*
# in the scalar tail of a row, a finite value over a subnormal divisor at the same position inside
# a block, INT_MIN over -1, values whose squares overflow while the results fit. Drawn
# independently (a vector length for one shape in seven, specials for half the tensors, a band
# for a third) they rarely meet within a cell's five examples. A *stress* case sets them together
# for every tensor of the case:
#
# - "edges": each row's innermost length is a STRESS_LENGTHS value and every tensor carries the
#   aligned edge pattern (generators.tensor.EDGE_PERIOD) its value kind admits, with its role
#   (order among the case's tensors) choosing its column;
# - "huge": the same rows (half of the tensors in a strided layout), finite values of ONE floating tensor in the
#   "beyond_sqrt" band (every square overflows the dtype while the values and most results fit;
#   the others keep their kind's own range; a complex tensor in both parts, where a product's
#   re * re - im * im is inf - inf and |z| must not square its parts) or at the integer type's limits, where
#   intermediates and accumulations in the dtype itself overflow. One, because a product of two
#   such tensors (x @ W, q . k, lr * g) is beyond the range by the op's own definition: golden
#   float64 holds it and a later sigmoid or softmax brings golden back, which no evaluation in
#   the dtype can. Which tensor is drawn (`huge_role`), so it shrinks. For float32 and bfloat16
#   this is the only way into large magnitudes (random draws keep them for float16, see
#   _plain_bands): one example in a few, on purpose, since on the plain CPU the float64
#   expectation judges what the CPU's own intermediate overflow does to a representable result.
#
# Hypothesis's first example is the one made of the simplest choices, and the shrinker only lowers
# choices towards it: so the plain case ("" below) stays the simplest, and the first example of a
# cell stays the small plain one, while each later example is a stress case five times in six.
# A failure shrinks out of stress wherever a plain case still fails: a stress case also draws
# STRESS_PADDING trivial choices, so the plain case that replaces it is shorter, hence simpler to
# the shrinker (which compares choice sequences by length first). What still needs the stress
# keeps it, with everything else (scalars, dtypes, layouts, seeds) shrunk.
STRESS_VARIANTS = ("", "edges", "edges", "edges", "huge", "huge")
STRESS_PADDING = 40
# The layout of an "edges" case's tensors, one for the whole case. The edge pattern is about
# vector blocks, which a vectorised loop walks in memory order, so each row stays contiguous:
# contiguous 3 cases in 5 (a kernel's fast path is often for contiguous input alone, and a
# contiguous tensor's rows coalesce into one loop long enough for 64-element vector steps, which
# a 57-element row alone never fills), every second row of a base twice as tall 1 in 5
# ("sliced": rows apart in memory, what a kernel that ignores strides or writes an in-place
# result to a copy gets wrong; 1-d tensors stay contiguous), one element into the storage 1 in 5
# ("offset": contiguous, but no vector-aligned data pointer). A transposed row would reach the
# scalar path only. With every edges case contiguous, three cases in four of a cell were, and
# aten::add.Tensor's cells found a kernel that ignores strides in 3 to 6 seeds of 10
# (finding_reach.py); with sliced rows in 2 edges cases of 5, gelu bfloat16's vectorised NaN
# (a published CPU bug) was found in 29 seeds of 60 against 42 (37 at 1 in 5).
EDGES_LAYOUTS = ("contiguous", "contiguous", "contiguous", "sliced", "offset")
# Innermost lengths whose full-vector bodies end at a different element for each loop step
# (vectorised loops take 2 vectors per step: 8, 16, 32, 64, 128 elements with AVX2 / AVX-512 and
# 4- to 1-byte dtypes): 57 ends 8- and 16-element bodies at 56 and 48, 32-element ones at 32 and
# leaves a 64-element one none, so the same position is body for one dtype and tail for another
# (golden's float64 against float32, float32 against half precision). The first is the default.
STRESS_LENGTHS = (57, 41, 25)
STRESS_ROWS = 3  # rows of the outer dims: successive rows' tails meet different pattern slots
# A "huge" case's rows: 48 in about one case of four (hypothesis leans to the first choice), so
# that each of its tensors holds more than 1024 elements (1200 to 2736) where the element cap
# allows: kernels change algorithm above a size (a second reduction pass, another block or
# threadgroup, a tiled edge), and plain cases, one later example in six, drew a tensor that
# large in 1 case of 200 (aten::sum; 21 of 200 now)
STRESS_ROWS_HUGE = (STRESS_ROWS, 48)
_stress_rows_huge = memo.sampled_from(STRESS_ROWS_HUGE)
_stress = contextvars.ContextVar("conform_stress", default=None)
# the op's own range band (opdb hint `op_range`, generators.tensor.OP_RANGES) while its case is drawn
_op_range = contextvars.ContextVar("conform_op_range", default="")
# whether the op's result jumps where a matrix loses rank (opdb hint `full_rank`) while its case is
# drawn: no tensor of rows of one repeated value (the expanded_last layout)
_full_rank = contextvars.ContextVar("conform_full_rank", default=False)
_stress_variants = memo.sampled_from(STRESS_VARIANTS)
_edges_layouts = memo.sampled_from(EDGES_LAYOUTS)


class _Padding(memo.SearchStrategy):
    """STRESS_PADDING boolean choices in one span: what makes a stress case longer to the shrinker.
    Drawn as a list of booleans, each was a span of its own, and hypothesis's mutator (which
    copies a span over another of the same label) spent most of its attempts copying one padding
    boolean over another: the same case run again, over half of a cell's examples. In one span
    they cost a third of the time and leave the mutator the case's real choices. Needs
    ConjectureData.draw_boolean (hypothesis 6.1xx); without it, the list of booleans."""

    def do_draw(self, data):
        draw_boolean = getattr(data, "draw_boolean", None)
        if draw_boolean is None:
            return data.draw(_padding_list)
        for _ in range(STRESS_PADDING):
            draw_boolean()
        return None


_padding_list = memo.lists(memo.booleans(), min_size=STRESS_PADDING, max_size=STRESS_PADDING)
_stress_padding = _Padding()
_stress_empty = memo.sampled_from(range(6))  # empty from EMPTY_FROM (EMPTY_FROM_REDUCING for a reduction)
# An empty outer dim in one stress shape of 6, of 3 for a reduction (plain shapes: 1 of 8): most
# examples after a cell's first are stress cases, and without it an empty reduction (a NaN sum of
# nothing) was reached in 3 of 60 cells; at 1 in 6, aten::sum's four floating cells reached it in
# 4 to 7 seeds of 10 each (finding_reach.py), so that a run over the op missed it one time in 25.
EMPTY_FROM, EMPTY_FROM_REDUCING = 5, 4


def huge_role(tensors: int) -> memo.SearchStrategy[int]:
    """The role (order among the case's tensors) of the one huge tensor, for an op with `tensors`
    tensor arguments: the first (by PyTorch's convention the data, `self`/`input`, which a norm
    layer's overflow needs) three times in four, any other the rest. The first is simplest."""
    if tensors <= 1:
        return memo.just(0)
    return memo.sampled_from((0,) * (3 * (tensors - 1)) + tuple(range(1, tensors)))


# The reductions whose result is an average or a statistic of the values (a mean, a variance, a
# trapezoid's area, a histogram's bins), which fits where the values' sum does not; a sum's own
# partial sums overflowing where the total fits is the order of a float summation, not a bug
AVERAGING = frozenset(
    ("mean", "nanmean", "var", "std", "var_mean", "std_mean", "trapezoid", "trapz", "histc", "cov", "corrcoef")
)
# An averaging reduction's huge tensor: beyond the square root of the dtype's maximum or near the
# maximum itself, random or one value repeated (generators.tensor.EQUAL_PREFIX); a norm layer's
# (family "norm", whose statistics are a mean and a variance) beyond the square root, random or
# one value repeated: a variance of 0 computed as E[x**2] - E[x]**2 is inf - inf there
AVERAGING_BANDS = "beyond_sqrt|near_max|equal_beyond_sqrt|equal_near_max"
NORM_BANDS = "beyond_sqrt|equal_beyond_sqrt"
_band_choices = {bands: memo.sampled_from(tuple(bands.split("|"))) for bands in (AVERAGING_BANDS, NORM_BANDS)}


def stressed(
    cases: memo.SearchStrategy,
    *,
    tensors: int = 1,
    huge_band: str = "beyond_sqrt",
    reduces: bool = False,
    op_range: str = "",
    full_rank: bool = False,
) -> memo.SearchStrategy:
    """`cases` (a case strategy) with the stress variant drawn first and in force while the rest
    of the case is drawn: shapes() and draw_tensor() read it. `tensors`: how many tensor
    arguments the op takes (see huge_role). `huge_band`: the band of a "huge" case's one large
    tensor (see huge_band_for). `reduces`: the op is a reduction, whose stress shapes are empty
    more often (see EMPTY_FROM). `op_range`: the band of the op's own range. `full_rank`: the
    op's result jumps where a matrix loses rank (see _full_rank)."""

    @memo.composite
    def build(draw):
        variant = draw(_stress_variants, label="stress")
        if variant:
            draw(_stress_padding, label="stress padding")
        state = {"variant": variant, "role": 0, "reduces": reduces} if variant else None
        if variant == "edges":
            state["layout"] = draw(_edges_layouts, label="edges layout")
        if variant == "huge":
            state["huge_role"] = draw(huge_role(tensors), label="huge tensor")
            state["huge_band"] = huge_band
            if huge_band in _band_choices:
                # an averaging reduction's huge tensor, one case in two, near the dtype's largest
                # value: its sum overflows where its mean fits (pytorch#44350); an averaging
                # reduction's or a norm layer's, one case in two, one value repeated
                state["huge_band"] = draw(_band_choices[huge_band], label="huge band")
            state["huge_drawn"] = not huge_band
        token = _stress.set(state)
        range_token = _op_range.set(op_range)
        rank_token = _full_rank.set(full_rank)
        try:
            return draw(cases)
        finally:
            _full_rank.reset(rank_token)
            _op_range.reset(range_token)
            _stress.reset(token)

    return build()


def huge_band_for(op) -> str:
    """The band of a "huge" stress case's large tensor for `op`: beyond the square root of the
    dtype's maximum ("beyond_sqrt": squares and products overflow there while the result fits:
    norm layers' variances, 2-norms), except
    - none for an op whose definition multiplies input values with each other (opdb hint
      `input_products`): every such product is beyond the range by definition, where no
      evaluation in the dtype has golden's value; the case keeps its strided layouts;
    - "moderate" for an op whose results are exactly determined (opdb's exactness rule:
      rounding, floor division, selection): where half precision's integer resolution ends
      (bfloat16 256, float16 2048) a rounding or a floor division goes one off, while huge
      values are all integers already and round to themselves."""
    hints = getattr(getattr(op, "rules", None), "hints", None) or {}
    if hints.get("input_products"):
        return ""
    if op.family == "reduction" and op.base_name in AVERAGING:
        return AVERAGING_BANDS  # beyond_sqrt or near_max, random or one value (see stressed)
    if op.family == "norm":
        return NORM_BANDS
    return "moderate" if getattr(op, "exact", False) else "beyond_sqrt"


def stress_variant() -> str:
    """The stress variant of the case being drawn ("" for none)."""
    state = _stress.get()
    return state["variant"] if state else ""


def _stress_shapes(min_dims: int, max_dims: int, max_side: int, max_numel: int):
    """Stress shapes: STRESS_ROWS rows (in the outer dims the rank asks for) of a STRESS_LENGTHS
    length, or None where the element cap has no room for one."""
    lengths = [n for n in STRESS_LENGTHS if n <= max_numel]
    if not lengths or max_dims < 1:
        return None
    rank = max(min_dims, min(2, max_dims), 1)
    outer = [min(STRESS_ROWS, max_side)] + [min(2, max_side)] * (rank - 2)
    lo = 1 if max_side >= 1 else 0
    if rank < 2:
        return memo.sampled_from(lengths).map(lambda n: tuple(_cap_outer(outer, n, max_numel, lo, rank - 1)))

    def shape(length: int, empty_slot: int, rows: int) -> tuple[int, ...]:
        # the rows drawn count in a "huge" case only (drawn in every case, so the choices line
        # up), and like the lengths they may pass max_side unless a family keeps sides tiny
        state = _stress.get() or {}
        first = rows if state.get("variant") == "huge" and max_side >= STRESS_ROWS else outer[0]
        empty = int(empty_slot >= (EMPTY_FROM_REDUCING if state.get("reduces") else EMPTY_FROM))
        return tuple([0] * empty + _cap_outer([first, *outer[1:]], length, max_numel, lo, rank - 1)[empty:])

    return memo.tuples(memo.sampled_from(lengths), _stress_empty, _stress_rows_huge).map(lambda t: shape(*t))


def is_floating(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES or dtype in COMPLEX_DTYPES or dtype == "float8_e4m3fn"


def is_quantized(dtype: str) -> bool:
    return dtype in QUANTIZED_DTYPES


def is_complex(dtype: str) -> bool:
    return dtype.startswith("complex")


def dtypes(*, kinds: tuple[str, ...] = ("float", "complex", "int", "bool")) -> memo.SearchStrategy[str]:
    """Dtype names, restricted to the given kinds ("float", "complex", "int", "bool")."""
    unknown = set(kinds) - {"float", "complex", "int", "bool"}
    if unknown:
        raise ValueError(f"unknown dtype kinds {sorted(unknown)}")
    names = [
        n
        for n in DTYPE_NAMES
        if ("float" in kinds and n in FLOAT_DTYPES)
        or ("complex" in kinds and n in COMPLEX_DTYPES)
        or ("int" in kinds and n in INT_DTYPES)
        or ("bool" in kinds and n == "bool")
    ]
    return memo.sampled_from(names)


def _cap(shape: list[int], max_numel: int) -> tuple[int, ...]:
    """Shrink the largest sides until the shape holds at most `max_numel` elements."""
    shape = list(shape)
    while math.prod(shape) > max_numel:
        i = max(range(len(shape)), key=lambda j: shape[j])
        shape[i] = max(1, shape[i] // 2) if shape[i] > 1 else 0
    return tuple(shape)


def _vector_lengths(lo: int, min_outer: int, max_numel: int) -> memo.SearchStrategy[int]:
    """The VECTOR_LENGTHS a shape can end in: at least the least side, and fitting under the
    element cap with `min_outer` outer sides of the least size."""
    return memo.sampled_from([n for n in VECTOR_LENGTHS if n >= lo and n * lo**min_outer <= max_numel] or [lo])


def _cap_outer(outer: list[int], last: int, max_numel: int, lo: int, min_outer: int) -> list[int]:
    """`outer + [last]` with the outer sides halved (not below `lo`), then outer dims beyond
    `min_outer` dropped, until the shape fits: the innermost length is the point of the draw."""
    outer = list(outer)
    while math.prod(outer) * last > max_numel and any(s > lo for s in outer):
        i = max(range(len(outer)), key=lambda j: outer[j])
        outer[i] = max(lo, outer[i] // 2)
    while math.prod(outer) * last > max_numel and len(outer) > min_outer:
        outer.pop(0)
    return outer + [last]


@functools.lru_cache(maxsize=1024)
def shapes(
    *,
    min_dims: int = 0,
    max_dims: int = 4,
    min_side: int = 0,
    max_side: int = 5,
    max_numel: int = DEFAULT_MAX_NUMEL,
) -> memo.SearchStrategy[tuple[int, ...]]:
    """Small shapes: 0-d, empty (a zero-size dim) and size-1 dims included; at most `max_numel` elements.

    Sides shrink towards 1 rather than 0 (`min_side` permitting): an empty tensor is a special
    case worth drawing, not the minimal one.
    """
    if not 0 <= min_dims <= max_dims:
        raise ValueError(f"need 0 <= min_dims <= max_dims, got {min_dims}, {max_dims}")
    if not 0 <= min_side <= max_side:
        raise ValueError(f"need 0 <= min_side <= max_side, got {min_side}, {max_side}")
    if max_numel < 1:
        raise ValueError("max_numel must be positive")
    lo = max(min_side, 1) if max_side >= 1 else 0
    sides = memo.lists(memo.integers(lo, max_side), min_size=min_dims, max_size=max_dims)
    if max_dims >= 1 and max_numel > max_side ** max(max_dims, 1):
        # now and then a large tensor, up to the element cap: bugs that start above a size
        # (a second pass, a tiled kernel's edge) need one; shrinking still heads for small
        large = memo.lists(
            memo.integers(lo, max(max_side, max_numel)), min_size=max(min_dims, 1), max_size=max(min(max_dims, 2), 1)
        )
        # and now and then an innermost length at a vector width's edge (see VECTOR_LENGTHS)
        min_outer = max(min_dims - 1, 0)
        outer = memo.lists(memo.integers(lo, max_side), min_size=min_outer, max_size=max_dims - 1)
        vector = memo.tuples(outer, _vector_lengths(lo, min_outer, max_numel)).map(
            lambda t: _cap_outer(t[0], t[1], max_numel, lo, min_outer)
        )
        sides = memo.one_of(sides, sides, sides, sides, sides, large, vector)
    if min_side == 0 and lo > 0:
        # a zero-size dim in about one draw of 8 (empty reductions are a classic bug); "no zero"
        # is what shrinks
        zero_at = memo.one_of(memo.none(), memo.none(), memo.none(), memo.integers(0, max(max_dims - 1, 0)))
        base = memo.tuples(sides, memo.integers(0, 3), zero_at).map(
            lambda t: [
                0 if t[1] >= 2 and t[2] is not None and t[0] and i == t[2] % len(t[0]) else s
                for i, s in enumerate(t[0])
            ]
        )
    else:
        base = sides
    plain = base.map(lambda s: _cap(s, max_numel))
    stress = (
        _stress_shapes(min_dims, max_dims, max_side, max_numel)
        if max_dims >= 1 and max_numel > max_side ** max(max_dims, 1)
        else None
    )
    if stress is None:
        return plain

    @memo.composite
    def either(draw):
        # the stress shape where the family allows long shapes at all (as for VECTOR_LENGTHS)
        return draw(stress if stress_variant() else plain)

    return either()


def layouts(shape: tuple[int, ...], *, writable: bool = False) -> memo.SearchStrategy[str]:
    """The strided layouts that make sense for `shape` ("contiguous" first, the simplest).

    `writable`: the tensor will be written to, so no expanded (stride-0) layout, whose aliasing
    elements a write rejects.
    """
    return memo.sampled_from(valid_layouts(shape, writable=writable))


def valid_layouts(shape: tuple[int, ...], *, writable: bool = False, rows_vary: bool = False) -> list[str]:
    """`rows_vary`: the values need rows that are not one value repeated (an invertible matrix),
    so no expanded_last layout."""
    rank = len(shape)
    out = ["contiguous"]
    if rank >= 2 and shape[-1] != shape[-2] or rank >= 2 and shape[-1] > 1:
        out.append("transposed")
    if rank >= 1:
        out.append("sliced")
    if rank >= 1 and shape[0] > 1 and not writable:
        out.append("expanded")
    if rank in (4, 5):
        # twice: the layout of a vision model's activations, and the one 4-d and 5-d kernels
        # (convolution, pooling, norms, their meta functions) have separate paths for; among eight
        # layouts it was one in eight, and a meta kernel that loses it was missed (seed 11)
        out += ["channels_last", "channels_last"]
    out.append("offset")
    if rank >= 2 and shape[-1] > 1 and not writable and not rows_vary:
        out.append("expanded_last")
    if rank >= 2 and shape[-1] > 1:
        out.append("sliced_last")
    assert all(x in LAYOUTS for x in out)
    return out


# value kinds a "real"-domain tensor may draw, simplest first
_REAL_VALUE_KINDS = ("real", "special")
_real_value_kinds = memo.sampled_from(_REAL_VALUE_KINDS)
_seeds = memo.integers(0, 2**31 - 1)

# Domains whose values may be drawn in a magnitude band (generators.tensor.MAGNITUDES): those
# unbounded above. Bounded domains (unit, probability) and "small" (exp-like ops, and ops that
# loop as many times as an input says) keep their ranges; so do explicit low/high ranges.
# The structured kinds (invertible, SPD) too: TensorSpec scales a whole matrix into the band, so
# it stays invertible (SPD). A half-precision kernel squaring such a matrix's entries in half (a
# 2-norm) overflows where its result fits; on the plain CPU that is a finding about the CPU's
# own intermediate, by the one rule for large magnitudes (see STRESS_VARIANTS).
MAGNITUDE_DOMAINS = (
    "real",
    "nonzero",
    "positive",
    "nonnegative",
    "above_one",
    "above_minus_one",
    "no_poles",
    "invertible",
    "spd",
)
# Integer magnitudes only where negative values are allowed: an integer drawn "positive" is often
# a count or a size, and near the type's limit it would ask for billions of elements.
INT_MAGNITUDE_DOMAINS = ("real", "nonzero")
# About one tensor in three gets a band; "" (the kind's own range) first, so failures shrink to it.
# Real floating dtypes only: for complex ones, |z| in the hundreds overflows exp inside the
# kernels, and where inf meets a zero part (inf * sin(0)) the NaN that follows is no contract.
# The large bands (near sqrt(max) and a fraction of max) only for float16: its range is where a
# half-precision kernel's intermediates overflow while the CPU's float32 arithmetic does not.
# For float32 and bfloat16 the CPU computes in the dtype's own range, so values near 1e19 or
# 1e38 mostly measure how the CPU's own intermediates overflow (x * x in a norm, inf - inf in a
# matrix exponential): on a sample of 68 ops they doubled the CPU sweep's alarm cells (19 -> 43).
# The "tiny" band (generators.tensor.MAGNITUDES) where values near 0 are in the domain: also for the
# bounded domains around 0 (unit, open_unit, and "small": expm1, sinh and atanh are where it
# matters most), not above one (acosh's domain) nor near the poles of the gamma family (there
# |f| grows as 1 / x**(n+1) and overflows float32 where float64 does not), nor for matrices.
TINY_DOMAINS = ("real", "nonzero", "positive", "nonnegative", "above_minus_one", "small", "unit", "open_unit")
_tiny_magnitudes = memo.sampled_from(("",) * 6 + ("tiny",))
_int_magnitudes = memo.sampled_from(("",) * 9 + ("moderate", "moderate", "int_extreme"))
_byte_magnitudes = memo.sampled_from(("",) * 9 + ("int_extreme",))


def _magnitudes(dtype: str, values: str):
    """The magnitude bands a tensor of `dtype` in domain `values` may draw, or None."""
    op_range = _op_range.get()
    if op_range and dtype in FLOAT_DTYPES and values == "small":
        # an exp-like op keeps its inputs small, except in its own range band (four tensors in
        # seven) and the tiny band (one in seven)
        return _op_range_bands(op_range)
    if op_range.startswith("range:") and dtype in FLOAT_DTYPES and values in MAGNITUDE_DOMAINS:
        # a computed range (generators.op_ranges) beside the dtype's own bands: one tensor in two
        return _computed_bands(op_range, dtype == "float16", values in TINY_DOMAINS)
    if dtype in FLOAT_DTYPES and values in MAGNITUDE_DOMAINS:  # not complex, not float8 (max 448)
        return _float_bands(dtype == "float16", values in TINY_DOMAINS)
    if dtype in FLOAT_DTYPES and values in TINY_DOMAINS:
        return _tiny_magnitudes
    if dtype in INT_DTYPES and values in INT_MAGNITUDE_DOMAINS:
        return _byte_magnitudes if dtype in ("int8", "uint8") else _int_magnitudes
    return None


@functools.cache
def _op_range_bands(op_range: str) -> memo.SearchStrategy[str]:
    return memo.sampled_from(("", "") + (op_range,) * 4 + ("tiny",))


def _plain_bands(half: bool, tiny: bool, breakpoints: bool = True) -> tuple[str, ...]:
    """A plain floating tensor's bands, the kind's own range ("") first: float16's large ones
    (`half`), the tiny one where its domain holds values near 0, the grid of halves (`breakpoints`)."""
    return (
        ("",) * 6
        + ("moderate",) * 3
        + (("half_integers",) if breakpoints else ())
        + (("tiny",) if tiny else ())
        + (("sqrt_max", "near_max") if half else ())
    )


@functools.cache
def _float_bands(half: bool, tiny: bool) -> memo.SearchStrategy[str]:
    return memo.sampled_from(_plain_bands(half, tiny))


@functools.cache
def _computed_bands(op_range: str, half: bool, tiny: bool) -> memo.SearchStrategy[str]:
    plain = _plain_bands(half, tiny, breakpoints=False)
    return memo.sampled_from(plain + (op_range,) * len(plain))


@functools.cache
def _layout_choices(shape: tuple[int, ...], writable: bool, rows_vary: bool) -> memo.SearchStrategy[str]:
    return memo.sampled_from(valid_layouts(shape, writable=writable, rows_vary=rows_vary))


def draw_tensor(
    draw,
    *,
    dtype: str,
    shape: tuple[int, ...],
    values: str = "real",
    layout: str | None = None,
    writable: bool = False,
    low: float | None = None,
    high: float | None = None,
    qscheme: str = "per_tensor",
    label: str = "tensor",
    magnitude: str | None = None,
) -> TensorSpec:
    """Draw one TensorSpec of a known shape with `draw` (a composite's or `memo.data()`'s).

    This is `tensors()` without building a strategy per call: generators draw hundreds of
    tensors per op, and strategy construction dominated their cost. A quantized `dtype` (quint8,
    qint8, qint32) also draws the scale and zero point; `qscheme` ("per_tensor", "per_channel"
    or "any") says whether they are per tensor or per channel along a drawn axis. `magnitude`
    (one of generators.tensor.MAGNITUDES) sets the band instead of drawing one: an argument's
    role (an exponent and its mantissas, generators.argtypes) decides it for the whole case.
    """
    shape = tuple(shape)
    if dtype in QUANTIZED_DTYPES:
        return _draw_quantized(
            draw, dtype=dtype, shape=shape, values=values, layout=layout, qscheme=qscheme, label=label
        )
    if values in STRUCTURED_KINDS and len(shape) == 2:
        # expanding a single matrix repeats its first row: no longer SPD or invertible
        writable = True
    # a matrix whose rows are each one value repeated is singular
    rows_vary = values in STRUCTURED_KINDS or _full_rank.get()
    stress = _stress.get()
    if layout is None and stress is not None and stress["variant"] == "edges" and low is None and high is None:
        layout = _edges_layout(stress["layout"], shape, writable)
    if layout is None and stress is not None and stress["variant"] == "huge":
        # large values meet a strided layout half the time: kernels that ignore strides or read
        # an expanded input's memory (median along dim 0, private norm kernels) show it whatever
        # the values; and contiguous the other half, since a kernel's fast path is often for
        # contiguous input alone (native_batch_norm's float32 variance overflows there,
        # pytorch#162489, while a sliced input takes an accurate generic path)
        strided = [x for x in valid_layouts(shape, writable=writable, rows_vary=rows_vary) if x != "contiguous"]
        choices = ("contiguous",) * len(strided) + tuple(strided) if strided else ("contiguous",)
        layout = draw(memo.sampled_from(choices), label=f"{label} layout")
    if layout is None:
        layout = draw(_layout_choices(shape, writable, rows_vary), label=f"{label} layout")
    if stress is not None and low is None and high is None and layout in LAYOUTS:
        return _draw_stressed(
            draw, stress, dtype=dtype, shape=shape, values=values, layout=layout, label=label, magnitude=magnitude
        )
    # "small" (exp-like ops) keeps finite inputs small but still meets NaN and +-inf
    kind = (
        draw(_real_value_kinds, label=f"{label} values")
        if values in ("real", "small") and is_floating(dtype)
        else values
    )
    bands = _magnitudes(dtype, values) if low is None and high is None and magnitude is None else None
    magnitude = draw(bands, label=f"{label} magnitude") if bands is not None else magnitude or ""
    seed = draw(_seeds, label=f"{label} seed")
    return TensorSpec(
        shape=shape, dtype=dtype, layout=layout, values=kind, seed=seed, low=low, high=high, magnitude=magnitude
    )


def _square(shape: tuple[int, ...]) -> bool:
    return len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 0


def _edges_layout(layout: str, shape: tuple[int, ...], writable: bool) -> str:
    """The layout of a tensor of an "edges" case whose layout the case drew (see EDGES_LAYOUTS)."""
    if layout == "sliced" and (len(shape) < 2 or "sliced" not in valid_layouts(shape, writable=writable)):
        return "contiguous"
    return layout


def _draw_stressed(draw, stress: dict, *, dtype, shape, values, layout, label, magnitude=None) -> TensorSpec:
    """A tensor of a stress case (see STRESS_VARIANTS): its role is its order in the case. A
    given `magnitude` (an argument's role band) replaces the variant's own."""
    role = stress["role"]
    stress["role"] += 1
    real_float = dtype in FLOAT_DTYPES  # not complex, not float8 (no masked_fill, a max of 448)
    edges = None
    given = magnitude
    if stress["variant"] == "edges":
        # an exponent in its band keeps it everywhere: the pattern's specials at 10 slots in 13
        # would leave it one slot where both it and its mantissa are finite
        edge_kinds = given != "exponent"
        if edge_kinds and (
            (real_float or dtype in COMPLEX_DTYPES)
            and values in EDGE_KINDS
            or dtype in INT_DTYPES
            and values in INT_MAGNITUDE_DOMAINS
        ):
            edges = role
        if (real_float or dtype in COMPLEX_DTYPES) and values in STRUCTURED_KINDS and _square(shape):
            # a structured matrix, one case in two: one non-finite entry (generators.tensor.STRUCTURED_EDGES)
            if "nonfinite_matrix" not in stress:
                stress["nonfinite_matrix"] = draw(memo.booleans(), label="non-finite matrix")
            edges = role if stress["nonfinite_matrix"] else None
        if real_float and values in MAGNITUDE_DOMAINS and "apart" not in stress:
            stress["apart"] = draw(memo.booleans(), label="apart")
        if real_float and values in MAGNITUDE_DOMAINS and stress["apart"] and given is None:
            # half the edge cases set the tensors apart in magnitude, column by column and role by role
            # (generators.tensor.MAGNITUDES): a tensor's own band draw rarely gives one tensor
            # large values while the other keeps small ones at the same positions
            magnitude = "apart_even" if role % 2 == 0 else "apart_odd"
    elif (real_float or dtype in COMPLEX_DTYPES) and values in MAGNITUDE_DOMAINS and given is None:
        # the tensor of the drawn role, or the first one that can be huge after it
        huge = role >= stress["huge_role"] and not stress.get("huge_drawn")
        stress["huge_drawn"] = stress.get("huge_drawn") or huge
        magnitude = stress.get("huge_band", "beyond_sqrt") if huge else ""
    elif dtype in INT_DTYPES and values in INT_MAGNITUDE_DOMAINS and given is None:
        magnitude = "int_extreme"
    if magnitude is None:
        # the finite values between the edge pattern's specials (or of a tensor with nothing of
        # its kind to stress) in the bands a plain tensor draws
        bands = _magnitudes(dtype, values)
        magnitude = draw(bands, label=f"{label} magnitude") if bands is not None else ""
    seed = draw(_seeds, label=f"{label} seed")
    # a reduction's case: the pattern in the first row only (TensorSpec.edge_rows)
    edge_rows = 1 if edges is not None and stress.get("reduces") and len(shape) >= 2 else None
    return TensorSpec(shape, dtype, layout, values, seed, magnitude=magnitude, edges=edges, edge_rows=edge_rows)


QSCHEMES = ("per_tensor", "per_channel", "any")
_scales = memo.sampled_from((0.1, 0.02, 0.5, 1.0))
_zero_points = {
    q: memo.integers(*_range) for q, _range in (("quint8", (0, 255)), ("qint8", (-128, 127)), ("qint32", (-1000, 1000)))
}


def _draw_quantized(draw, *, dtype, shape, values, layout, qscheme, label) -> TensorSpec:
    if qscheme not in QSCHEMES:
        raise ValueError(f"unknown qscheme {qscheme!r}, expected one of {QSCHEMES}")
    assert dtype in QUANTIZED_STORAGE
    per_channel = len(shape) >= 1 and (
        qscheme == "per_channel" or qscheme == "any" and draw(memo.booleans(), label=f"{label} per channel")
    )
    axis = draw(memo.integers(0, len(shape) - 1), label=f"{label} axis") if per_channel else None
    if layout is None:
        choices = _layout_choices(shape, False, False)
        layout = draw(
            memo.sampled_from([x for x in PER_CHANNEL_LAYOUTS if x in valid_layouts(shape)])
            if per_channel
            else choices,
            label=f"{label} layout",
        )
    scale = draw(_scales, label=f"{label} scale")
    zero_point = draw(_zero_points[dtype], label=f"{label} zero point")
    seed = draw(_seeds, label=f"{label} seed")
    kind = "real" if values in ("index",) else values
    return TensorSpec(
        shape=shape, dtype=dtype, layout=layout, values=kind, seed=seed, scale=scale, zero_point=zero_point, axis=axis
    )


def tensors(
    *,
    dtype: str,
    shape: memo.SearchStrategy[tuple[int, ...]] | tuple[int, ...] | None = None,
    values: str = "real",
    layout: str | None = None,
    writable: bool = False,
    low: float | None = None,
    high: float | None = None,
) -> memo.SearchStrategy[TensorSpec]:
    """TensorSpecs of one dtype. `values` is an op domain ("real", "positive", ...) or "index".

    A "real" domain sometimes draws "special" values (NaN, +-inf, -0.0, subnormals) for floating
    dtypes; a restricted domain never does.
    """
    shape_st = shapes() if shape is None else (memo.just(tuple(shape)) if isinstance(shape, tuple) else shape)

    @memo.composite
    def build(draw):
        sh = draw(shape_st, label="shape")
        return draw_tensor(
            draw, dtype=dtype, shape=sh, values=values, layout=layout, writable=writable, low=low, high=high
        )

    return build()


@functools.lru_cache(maxsize=256)
def from_dtype(dtype: str, *, min_value: float = -3, max_value: float = 3) -> memo.SearchStrategy:
    """Python scalars fit for a tensor of `dtype`: bool, int or float (a Scalar argument)."""
    if dtype == "bool":
        return memo.booleans()
    if dtype in INT_DTYPES:
        lo = 0 if dtype == "uint8" else int(min_value)
        return memo.integers(max(lo, int(min_value)), int(max_value))
    return memo.one_of(
        memo.integers(int(min_value), int(max_value)),
        memo.floats(min_value, max_value, allow_nan=False, width=32).map(lambda x: round(x, 3)),
    )

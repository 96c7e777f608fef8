"""A tensor to build: shape, dtype, strided layout and values, made identically on any device.

Values are made on the CPU from the spec's seed, so the device under test and the reference see
the same numbers; the base tensor is then copied to the target device and the strided layout
(transposed, sliced, expanded, channels_last, storage offset) is built *there*, because copying a
strided CPU tensor to MPS or CUDA yields a contiguous one and the layout would be lost.

This module needs torch and the standard library only: reproduction scripts (conform.report.repro)
embed its source verbatim, so a pasted script rebuilds exactly the tensors conform tested.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from generators import op_ranges
from opdb.rules import DOMAINS

# "expanded": dim 0 of stride 0 (every batch element the same matrix); "expanded_last": the last
# dim of stride 0 (each row one value repeated, a column broadcast: x[:, None].expand(n, m)),
# which a vectorised loop meets as a scalar operand and a kernel that reads its input's memory
# in order reads past each row's one value; "sliced_last": every second element of rows twice as
# long (x[..., ::2]: an innermost stride of 2, what a kernel with a fast path for unit inner
# strides alone, or one that reads rows as contiguous, gets wrong)
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded", "channels_last", "offset", "expanded_last", "sliced_last")
# the strided layouts that hold any values (every element its own memory), which explicit values
# may take; the expanded ones repeat a row or a batch element
VALUE_LAYOUTS = ("contiguous", "transposed", "sliced", "sliced_last", "offset", "channels_last")
# sparse layouts: the dense values converted on the target device (only ops that need them draw these)
SPARSE_LAYOUTS = ("sparse_coo", "sparse_csr", "sparse_csc", "sparse_coo_uncoalesced", "sparse_bsr", "sparse_bsc")
# the block-compressed layouts, whose spec names a block size (TensorSpec.blocksize)
BLOCK_LAYOUTS = ("sparse_bsr", "sparse_bsc")
# opaque layouts: the dense values converted into a library's own blocked format, with no strides
# (an mkldnn tensor: what to_mkldnn.out writes into; aten/src/ATen/native/mkldnn/MKLDNNConversions.cpp)
OPAQUE_LAYOUTS = ("mkldnn",)
# layouts without strides: an out of one of these can be wrong only in its size
STRIDELESS_LAYOUTS = SPARSE_LAYOUTS + OPAQUE_LAYOUTS
# the layout a traced tensor had, given as explicit strides and storage offset (TensorSpec.stride):
# a model's tensors take views no drawn layout names (a permuted attention head, a stepped slice);
# never drawn by the strategies, only replayed
EXPLICIT_LAYOUT = "strided"

# value kinds understood by `_make_values`: the op domains opdb's rules name (opdb.rules.DOMAINS:
# "above_minus_one" is log1p's, "no_poles" the gamma family's), and these
VALUE_KINDS = (
    *DOMAINS,
    "sign",  # -1 and 1 only: the labels of the margin and embedding losses (opdb hints argument_values)
    "special",  # real values with NaN, +-inf, -0.0 and subnormals mixed in
    "index",  # integers in [0, high), for index tensors; `high` in TensorSpec.high
    "past_end",  # integers in [low, high) past the end of the dim they index (low: its size): out of range
    "invertible",  # square matrices (last two dims) made diagonally dominant: well-conditioned
    "spd",  # symmetric (Hermitian) positive definite matrices: M @ M^H + n * I
    # matrices a factorisation must refuse: exactly, in every dtype (no pivot that rounding decides)
    "indefinite",  # an SPD matrix with its last diagonal entry negated: Cholesky stops at the last pivot
    "singular",  # an invertible matrix with its last row zeroed: LU meets an exact zero pivot
    # sampling coordinates (a grid_sampler's grid): drawn in [-1, 1], the input's extent, but any
    # value is a valid coordinate (outside the extent the padding mode decides), so its stress
    # cases take every special value and magnitude: +-inf, NaN, the dtype's largest values
    "coordinate",
)


# Magnitude bands a tensor's finite values may be drawn in, instead of the value kind's default
# range (about +-3). Bugs live at scales the default never reaches: bfloat16/float16 lose integer
# precision above 256/2048 ("moderate"), a product or square overflows near the square root of
# the dtype's largest value ("sqrt_max"), a sum or a doubling near a fraction of it ("near_max"),
# and integer accumulations wrap near the integer type's limits ("int_extreme"). A band keeps the
# sign the kind drew (so positive domains stay positive and zeros stay zero).
MAGNITUDES = (
    "",
    "moderate",
    "half_integers",
    "tiny",
    "sqrt_max",
    "near_max",
    "int_extreme",
    "beyond_sqrt",
    "apart_even",
    "apart_odd",
    "exponent",
    "mantissa",
    "exp_range",
    "exp2_range",
    "cosh_range",
    "equal_beyond_sqrt",
    "equal_near_max",
)
# "equal_beyond_sqrt" / "equal_near_max": the whole tensor one value, a power of two in the band
# (with the sign the kind drew for its first element): degenerate data, whose statistics are
# exact (a variance of 0, a mean equal to the value, a normalisation's 0) and which every correct
# evaluation gets exactly, since n * 2**e, its quotient by n and (x - mean) are exact in the dtype;
# a kernel that squares in the dtype (E[x**2] - E[x]**2, inf - inf) or sums before it divides
# overflows there, where random values in the band give the expectation an overflowed statistic
# too (the variance of values near 1e38 is beyond any dtype's range but float64's): the variance
# of equal values near float32's maximum is inf (pytorch#44350), a layer norm of one repeated value
# near 1e20 NaN (pytorch#162489). A power of two, not any value: a sum of n equal values that
# rounds puts the mean an ulp or more from them, and cancellation makes the rest of that error
# (a variance of (n * ulp)**2), which is rounding, not a bug.
EQUAL_PREFIX = "equal_"
# "half_integers": the kind's own range on the grid of halves (-3, -2.5, ..., 3 for a real
# tensor): where the breakpoints of piecewise ops lie (hardsigmoid's and hardswish's +-3,
# hardtanh's +-1, the shrink ops' 0.5, relu's 0) and the ties of rounding (x.5), which a uniform
# draw never meets; every value exact in every floating dtype.
# "tiny": values log-uniform in [max(eps**2, sqrt(smallest normal)), sqrt(eps)] of the dtype, with
# the sign the kind drew: where f(x) is about x or 1 (log1p, expm1, asinh, atanh, sin, erf, tanh)
# and a kernel computing through 1 + x, exp(x) - 1 or a fast-math approximation loses most of x's
# digits (all of them below eps), while every square stays a normal number (no underflow that the
# CPU's own float32 or half arithmetic would share). MPS's log1p was such a kernel until
# pytorch#154936 rewrote it (its regression test now checks small values). The default range
# (about +-3) never goes below 1e-2 but at its edge pattern's subnormals, where a result may flush
# to zero.
# "exp_range" / "exp2_range" / "cosh_range": values relative to an op's own range, found by
# inverting the op where it is monotone: x whose exp (2**x, cosh) lies within a few binades of the
# dtype's largest value, and, with the sign the kind drew, of its smallest (exp in float16 between
# 8 and 11.1: a half-precision kernel overflows or flushes to zero early there; pytorch's own
# OpInfos reach it rarely). The band is log(max) - 3 to just below log(max), through the op's inverse.
OP_RANGES = {
    "exp_range": lambda top: math.log(top),
    "exp2_range": lambda top: math.log2(top),
    "cosh_range": lambda top: math.log(2 * top),
}
MODERATE_BAND = (100.0, 4000.0)
# "apart_even" / "apart_odd": the moderate band on the even (odd) columns of the innermost dim and
# the kind's own range on the others, so that two tensors of a case given one each are apart in
# magnitude at the same positions, both ways round: a large dividend over a small divisor (whose
# quotient loses half precision's integers, pytorch#193754) in one column, a small mantissa under
# a large exponent (ldexp's power of two overflowing, pytorch#133265) in the next.
# "beyond_sqrt": values in [4 sqrt(max), 64 sqrt(max)], far inside the dtype's range but every
# square (and product of two) beyond it. A kernel that squares in the dtype itself (a norm layer's
# variance, a 2-norm) overflows there, however few the elements, while its result is finite and
# representable; an elementwise product overflows in the float64 expectation too, so it agrees.
# "exponent" / "mantissa": a pair for ops whose argument acts as an exponent or a shift count
# (opdb hints `exponent_args`, generators.argtypes): the exponent tensor holds integers just past its
# dtype's exponent range (EXPONENT_BAND: 2**e overflows, as ldexp's power of two does,
# pytorch#133265), or shift counts at the integer widths (SHIFT_COUNTS); its partners hold, at
# three elements in four, mantissas log-uniform in [smallest normal, 2], so that m * 2**e is finite
# there while 2**e alone is not, and their own range at the others (|x|**e overflows there).


# An aligned edge pattern (TensorSpec.edges): special values at fixed positions of the logical
# tensor's flattened elements, chosen by position modulo EDGE_PERIOD and by the tensor's role (its
# order among the case's tensors, so a[i] and b[i] are extremes together: a finite value over a
# subnormal, INT_MIN over -1, NaN over NaN, +0 against -0). The period is prime, so along a row of
# a vector-width length the specials fall in every lane of the full vector blocks and in the
# scalar tail, and successive rows' tails meet different slots. None: the drawn value stays.
EDGE_PERIOD = 13
_FLOAT_EDGES = (  # (role 0, role 1 and later) per slot
    ("nan", None),
    ("nan", "nan"),
    ("inf", None),
    (None, "sub"),
    ("-inf", None),
    ("inf", "inf"),
    ("sub", "-0"),
    (None, "nan"),
    ("-0", "-inf"),
    (None, "0"),
    ("0", "-0"),  # +0 as well as -0 in the first tensor: neg(+0) must be -0 (sign-of-zero bugs)
    # zeros of opposite signs at the same position of two operands (minimum(+0, -0), clamp(-0,
    # min=+0): the sign IEEE leaves to the kernel must not depend on where the element sits), and
    # an exact multiple of mixed signs, whose remainder is an exact zero of a defined sign
    ("-0", "0"),
    (-2, 1),
)
_INT_EDGES = (
    ("min", -1),
    ("max", 1),
    (-1, "min"),
    (None, None),
    ("min", "min"),
    ("max", -1),
    (None, None),
    (-1, "max"),
    (None, None),
    ("min", 2),
    (None, None),
    (None, None),
    (None, None),
)
# the edge tokens each value kind admits (a restricted domain keeps its contract)
_EDGE_TOKENS = {
    "real": None,  # all
    "small": None,
    "special": None,
    "coordinate": None,
    "nonzero": ("nan", "inf", "-inf", "sub", "min", "max", -2, -1, 1, 2),
    # +inf is in the domain (log(inf) = inf), and so are both zeros, its closed boundary: the
    # positive-domain ops are finite on (0, inf) and IEEE defines them at 0 (log(+-0) = -inf,
    # rsqrt(-0) = -inf, xlogy(0, 0) = 0), where a kernel's fast path meets 0 * inf or log of 0
    "positive": ("sub", "inf", "0", "-0"),
    "nonnegative": ("sub", "0"),
    "above_minus_one": ("sub", "inf", "0"),
    # the poles themselves too (0, -0, -2): finite nowhere, defined by convention (lgamma's +inf,
    # digamma's +-inf at +-0 and NaN at -2, polygamma's signed infinities, as SciPy gives them),
    # which a kernel's reflection or recurrence may miss (polygamma(1, -2) is 1.6e32 in float64)
    "no_poles": ("sub", "inf", "0", "-0", -2),
}
EDGE_KINDS = tuple(_EDGE_TOKENS)
# A structured matrix (STRUCTURED_KINDS) in an edge case: one non-finite entry, the [0, 0] element
# of the first matrix of the batch, by role (NaN, +inf, -inf), the rest of the batch finite. An
# elementwise pattern would leave no matrix to factorise; one entry is what a LAPACK routine meets
# when a model's activations overflow, and where it crashes (linalg_eigvals on a NaN entry
# segfaults in torch 2.13's CPU kernel, pytorch#93124) or loops, while float64 of the same routine
# gives the same NaNs or the same refusal wherever it does not.
STRUCTURED_EDGES = (math.nan, math.inf, -math.inf)
# A complex tensor's imaginary part takes the slot after its real part's: the pattern's pairs
# then meet in one number (nan+nanj, nan+infj, -inf+infj, inf+subj, 0-0j against -0+0j), where
# C99's special values live (a number with one infinite part is an infinity, even beside a NaN),
# and two operands' numbers meet at the same position: (-inf+infj) + (x+infj) is an infinity,
# 0j ** 0j is 1. With the imaginary part left drawn, no complex case put a special value in it.
COMPLEX_EDGE_SHIFT = 1


# quantized dtypes: the values are drawn as float32 and quantized on the target device
QUANTIZED_DTYPES = ("quint8", "qint8", "qint32")
# the integer cell whose storage each quantized dtype shares (int_repr's dtype)
QUANTIZED_STORAGE = {"quint8": "uint8", "qint8": "int8", "qint32": "int32"}
PER_CHANNEL_LAYOUTS = ("contiguous", "channels_last")


# value kinds that constrain whole matrices (the last two dims), not single elements
STRUCTURED_KINDS = ("invertible", "spd", "indefinite", "singular")


QUANTIZED_STORAGE_DTYPES = {q: getattr(torch, s) for q, s in QUANTIZED_STORAGE.items()}


def dtype_name(dtype: torch.dtype) -> str:
    """ "float32" for torch.float32."""
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


@dataclass(frozen=True)
class TensorSpec:
    """A tensor to build: logical shape, dtype, strided layout and how to draw its values."""

    shape: tuple[int, ...]
    dtype: str  # dtype name, e.g. "float32"
    layout: str = "contiguous"  # one of LAYOUTS
    values: str = "real"  # one of VALUE_KINDS
    seed: int = 0
    low: float | None = None  # optional explicit range, overrides the value kind's default
    high: float | None = None
    requires_grad: bool = False
    # quantized dtypes only: affine quantization parameters; per channel along `axis` when it is
    # set, with channel i's scale scale * (1 + i / 4) and zero point zero_point + i % 2
    scale: float | None = None
    zero_point: int = 0
    axis: int | None = None
    # explicit values (flattened, row-major) instead of drawn ones: for arguments that must come
    # from another op's result, such as the indices a max-pooling backward takes from its forward
    data: tuple | None = None
    # one of MAGNITUDES: the band the finite values are drawn in ("" for the kind's own range)
    magnitude: str = ""
    # the tensor's role in an aligned edge pattern (see EDGE_PERIOD), or None for none
    edges: int | None = None
    # the pattern in the first rows only (of the tensor as rows of its last dim), or None for all:
    # a reduction's row that holds a NaN reduces to NaN, so its other rows keep finite values,
    # where a wrong formula shows
    edge_rows: int | None = None
    # the block-compressed layouts only: (rows, cols) of a block, which divide the last two dims
    blocksize: tuple[int, int] | None = None
    # the explicit layout only (EXPLICIT_LAYOUT): the view's strides and storage offset
    stride: tuple[int, ...] | None = None
    storage_offset: int = 0

    def __post_init__(self):
        if self.blocksize is not None:
            object.__setattr__(self, "blocksize", tuple(self.blocksize))  # read back from JSON as a list
        if self.stride is not None:
            object.__setattr__(self, "stride", tuple(self.stride))
        if (self.layout == EXPLICIT_LAYOUT) != (self.stride is not None):
            raise ValueError(f"strides go with the {EXPLICIT_LAYOUT} layout, not {self.layout}")
        if self.stride is not None and (
            len(self.stride) != len(self.shape) or min(self.stride, default=0) < 0 or self.storage_offset < 0
        ):
            raise ValueError(f"strides {self.stride} (offset {self.storage_offset}) do not fit shape {self.shape}")
        if (self.layout in BLOCK_LAYOUTS) != (self.blocksize is not None):
            raise ValueError(f"a blocksize goes with the {'/'.join(BLOCK_LAYOUTS)} layouts, not {self.layout}")
        if self.blocksize is not None and (
            len(self.shape) < 2 or any(b < 1 or s % b for s, b in zip(self.shape[-2:], self.blocksize))
        ):
            raise ValueError(f"blocksize {self.blocksize} does not divide the matrices of shape {self.shape}")
        if self.layout not in LAYOUTS and self.layout not in STRIDELESS_LAYOUTS and self.layout != EXPLICIT_LAYOUT:
            raise ValueError(f"unknown layout {self.layout!r}")
        if self.values not in VALUE_KINDS:
            raise ValueError(f"unknown value kind {self.values!r}")
        if self.magnitude not in MAGNITUDES and op_ranges.parse(self.magnitude) is None:
            raise ValueError(f"unknown magnitude {self.magnitude!r}")
        if self.quantized:
            if self.scale is None or not self.scale > 0:
                raise ValueError(f"a {self.dtype} tensor needs a positive scale, got {self.scale!r}")
            if self.axis is not None and not -len(self.shape) <= self.axis < len(self.shape):
                raise ValueError(f"axis {self.axis} out of range for shape {self.shape}")
            if self.axis is not None and self.layout not in PER_CHANNEL_LAYOUTS:
                # the channels are those of the base tensor: other layouts view a base of another shape
                raise ValueError(
                    f"a per-channel quantized tensor has layout contiguous or channels_last, not {self.layout}"
                )
        elif self.scale is not None or self.axis is not None:
            raise ValueError(f"scale and axis are for quantized dtypes, not {self.dtype}")
        square = len(self.shape) >= 2 and self.shape[-1] == self.shape[-2]
        edge_kinds = EDGE_KINDS + (STRUCTURED_KINDS if square else ())
        if self.edges is not None and (self.values not in edge_kinds or self.quantized or self.dtype == "bool"):
            raise ValueError(f"no edge pattern for {self.values} values of {self.dtype}")
        if self.data is not None:
            if len(self.data) != self.numel:
                raise ValueError(f"{len(self.data)} values given for shape {self.shape}")
            if self.layout not in (*VALUE_LAYOUTS, EXPLICIT_LAYOUT):
                raise ValueError(f"explicit values cannot take the {self.layout} layout")
            if self.layout == EXPLICIT_LAYOUT and _overlapping(self.shape, self.stride):
                raise ValueError(f"explicit values cannot fill the overlapping strides {self.stride}")

    @property
    def quantized(self) -> bool:
        return self.dtype in QUANTIZED_DTYPES

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def torch_dtype(self) -> torch.dtype:
        return dtype_from_name(self.dtype)

    # -- building ---------------------------------------------------------------------------

    def base_shape(self) -> tuple[int, ...]:
        """The shape of the contiguous tensor from which the layout is viewed."""
        s = list(self.shape)
        if self.layout == "transposed" and len(s) >= 2:
            s[-1], s[-2] = s[-2], s[-1]
        elif self.layout == "sliced" and len(s) >= 1:
            s[0] = 2 * s[0]
        elif self.layout == "expanded" and len(s) >= 1:
            s[0] = 1 if s[0] > 0 else 0
        elif self.layout == "expanded_last" and len(s) >= 1:
            s[-1] = 1 if s[-1] > 0 else 0
        elif self.layout == "sliced_last" and len(s) >= 1:
            s[-1] = 2 * s[-1]
        elif self.layout == "offset":
            return (self.numel + 1,)
        elif self.layout == EXPLICIT_LAYOUT:
            extent = 1 + sum((n - 1) * st for n, st in zip(s, self.stride)) if self.numel else 0
            return (self.storage_offset + extent,)
        return tuple(s)

    @property
    def value_dtype(self) -> torch.dtype:
        """The dtype the values are drawn in: float32 for a quantized tensor (quantized later)."""
        return torch.float32 if self.quantized else self.torch_dtype

    def make_cpu_base(self) -> torch.Tensor:
        """The base values on the CPU, a pure function of the spec (same on every call)."""
        if self.data is not None:
            return self._explicit_base()
        if self.values in STRUCTURED_KINDS and len(self.shape) >= 2 and self.shape[-1] == self.shape[-2]:
            return self._structured_base()
        if self.edges is not None:
            # the pattern is by logical position: built on the logical tensor, then the base around it
            logical = _make_values(
                self.shape, self.value_dtype, self.values, self.seed, self.low, self.high, self.magnitude
            )
            return _base_around(_with_edges(logical, self.values, self.edges, self.edge_rows), self)
        return _make_values(
            self.base_shape(), self.value_dtype, self.values, self.seed, self.low, self.high, self.magnitude
        )

    def quantize(self, base: torch.Tensor) -> torch.Tensor:
        """`base` (float, on its final device) quantized with this spec's parameters."""
        qdtype = self.torch_dtype
        if self.axis is None:
            return torch.quantize_per_tensor(base, self.scale, self.zero_point, qdtype)
        axis = self.axis % base.dim()
        n = base.shape[axis]
        info = torch.iinfo(QUANTIZED_STORAGE_DTYPES[self.dtype])
        scales = torch.tensor([self.scale * (1 + i / 4) for i in range(n)], dtype=torch.float64, device=base.device)
        points = torch.tensor(
            [min(self.zero_point + i % 2, info.max) for i in range(n)], dtype=torch.int64, device=base.device
        )
        return torch.quantize_per_channel(base, scales, points, axis, qdtype)

    def _explicit_base(self) -> torch.Tensor:
        logical = torch.tensor(self.data, dtype=self.value_dtype).reshape(self.shape)
        return _base_around(logical, self)

    def _structured_base(self) -> torch.Tensor:
        """A base whose layout view holds the structured matrices (SPD, invertible) themselves.

        Elementwise kinds can fill any base; a matrix property must hold for the *logical*
        tensor, so the logical values are made first and the base is built around them.
        """
        logical = _make_values(
            self.shape, self.value_dtype, self.values, self.seed, self.low, self.high, self.magnitude
        )
        if self.edges is not None and logical.numel():
            logical.view(-1)[0] = STRUCTURED_EDGES[self.edges % len(STRUCTURED_EDGES)]
        return _base_around(logical, self)

    def apply_layout(self, base: torch.Tensor) -> torch.Tensor:
        """View `base` (already on its final device) into this spec's layout and logical shape."""
        t = base
        if self.layout == "transposed" and t.dim() >= 2:
            t = t.transpose(-1, -2)
        elif self.layout == "sliced" and t.dim() >= 1:
            t = t[::2]
        elif self.layout == "sliced_last" and t.dim() >= 1:
            t = t[..., ::2]
        elif self.layout in ("expanded", "expanded_last") and t.dim() >= 1:
            t = t.expand(self.shape)
        elif self.layout == "channels_last" and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        elif self.layout == "channels_last" and t.dim() == 5:
            t = t.contiguous(memory_format=torch.channels_last_3d)
        elif self.layout == "offset":
            t = t[1:].view(self.shape)
        elif self.layout == EXPLICIT_LAYOUT:
            t = t.as_strided(self.shape, self.stride, self.storage_offset)
        elif self.layout == "sparse_coo":
            t = t.to_sparse()
        elif self.layout == "sparse_coo_uncoalesced":
            # every entry twice, the second time as a zero: the same tensor, not coalesced
            # (what _coalesce sums; it asserts its input is not coalesced)
            s = t.to_sparse()
            t = torch.sparse_coo_tensor(
                torch.cat([s.indices(), s.indices()], 1), torch.cat([s.values(), torch.zeros_like(s.values())]), s.shape
            )
        elif self.layout == "sparse_csr":
            t = t.to_sparse_csr()
        elif self.layout == "sparse_csc":
            t = t.to_sparse_csc()
        elif self.layout == "sparse_bsr":
            t = t.to_sparse_bsr(self.blocksize)
        elif self.layout == "sparse_bsc":
            t = t.to_sparse_bsc(self.blocksize)
        elif self.layout == "mkldnn":
            t = t.to_mkldnn()
        return t

    def materialize(
        self, to_device: Callable[[torch.Tensor], torch.Tensor], *, dtype: torch.dtype | None = None
    ) -> torch.Tensor:
        """Build the tensor on a device. `dtype` overrides the spec's (used for the float64 golden run)."""
        base = _recent_base(self)
        if dtype is not None and base.dtype != dtype:
            base = base.to(dtype)
        t = to_device(base)
        if t.device.type == "cpu" and t.layout == torch.strided and _same_memory(t, base):
            t = t.clone()  # the base is kept for the next side: never handed out to be written to
        if self.quantized:
            t = self.quantize(t)
        t = self.apply_layout(t)
        if self.requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex) and t.layout == torch.strided:
            t = t.detach().requires_grad_(True)
        return t

    def describe(self) -> str:
        extra = "" if self.layout == "contiguous" else f", {self.layout}"
        if self.stride is not None:
            extra += f" {list(self.stride)}" + (f"+{self.storage_offset}" if self.storage_offset else "")
        if self.quantized:
            extra += f", scale {self.scale:g}, zero point {self.zero_point}" + (
                "" if self.axis is None else f", per channel along {self.axis}"
            )
        mag = f", {self.magnitude} magnitudes" if self.magnitude else ""
        if self.magnitude.startswith(EQUAL_PREFIX):
            mag = f", one value repeated ({base_magnitude(self.magnitude)} magnitude)"
        if self.edges is not None and self.values in STRUCTURED_KINDS:
            mag += f", {STRUCTURED_EDGES[self.edges % len(STRUCTURED_EDGES)]} at [0, 0]"
        elif self.edges is not None:
            mag += f", edge pattern {self.edges}" + (f" in {self.edge_rows} row(s)" if self.edge_rows else "")
        return f"{self.dtype}{list(self.shape)}{extra}, {self.values}{mag}"


# The bases of the last few specs made. A case is materialised three times or more (the CPU
# reference, float64 golden, the inputs' scales, the oracle's reruns), and making its values each
# time was a tenth of a case's cost. Keyed by the spec and the sign of its bounds (0.0 == -0.0);
# specs with explicit values are not kept (their -0.0 and 0.0 compare equal too).
_BASES: dict = {}
_BASES_KEPT = 16


def _recent_base(spec: TensorSpec) -> torch.Tensor:
    if spec.data is not None:
        return spec.make_cpu_base()
    key = (spec, repr(spec.low), repr(spec.high))
    base = _BASES.get(key)
    if base is None:
        base = spec.make_cpu_base()
        if len(_BASES) >= _BASES_KEPT:
            del _BASES[next(iter(_BASES))]
        _BASES[key] = base
    return base


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a is b:
        return True
    try:
        return a.numel() > 0 and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage: not the base's memory
        return False


def _base_around(logical: torch.Tensor, spec: TensorSpec) -> torch.Tensor:
    """The base tensor whose view in `spec`'s layout is `logical`."""
    if spec.layout == "transposed" and logical.dim() >= 2:
        return logical.transpose(-1, -2).contiguous()
    if spec.layout == "sliced" and logical.dim() >= 1:
        base = torch.zeros(spec.base_shape(), dtype=logical.dtype)
        base[::2] = logical
        return base
    if spec.layout == "expanded" and logical.dim() >= 1:
        return logical[:1].clone()  # every batch element the same matrix
    if spec.layout == "expanded_last" and logical.dim() >= 1:
        return logical[..., :1].clone()  # each row its first value
    if spec.layout == "sliced_last" and logical.dim() >= 1:
        base = torch.zeros(spec.base_shape(), dtype=logical.dtype)
        base[..., ::2] = logical
        return base
    if spec.layout == "offset":
        return torch.cat([torch.zeros(1, dtype=logical.dtype), logical.flatten()])
    if spec.layout == EXPLICIT_LAYOUT:
        base = torch.zeros(spec.base_shape(), dtype=logical.dtype)
        base.as_strided(spec.shape, spec.stride, spec.storage_offset).copy_(logical)
        return base
    return logical


def _overlapping(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Two logical positions of a view with these strides share an element of its storage."""
    extent = 1
    for n, st in sorted(((n, st) for n, st in zip(shape, stride) if n > 1), key=lambda d: d[1]):
        if st < extent:
            return True
        extent = st * n
    return False


def _make_values(shape, dtype: torch.dtype, kind: str, seed: int, low, high, magnitude: str = "") -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        if kind in ("positive", "nonzero", "above_one", "no_poles") or (
            kind in ("index", "past_end") and low is not None and low >= 1
        ):
            return torch.ones(shape, dtype=torch.bool)  # the domain holds one bool: True
        return torch.rand(shape, generator=g) < 0.5
    if kind == "sign":
        return (torch.randint(0, 2, shape, generator=g) * 2 - 1).to(dtype)
    if kind in ("index", "past_end"):
        hi = int(high if high is not None else 1)
        lo = int(low if low is not None else 0)
        return torch.randint(lo, max(hi, lo + 1), shape, generator=g, dtype=torch.int64).to(dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        info = torch.iinfo(dtype)
        lo = int(low) if low is not None else max(info.min, -9 if info.min < 0 else 0)
        hi = int(high) if high is not None else min(info.max, 9)
        if magnitude == "moderate":
            lo, hi = max(info.min, -int(MODERATE_BAND[1])), min(info.max, int(MODERATE_BAND[1]))
        if kind in ("positive", "above_one", "no_poles"):
            lo = max(lo, 1)
        if kind == "above_minus_one":
            lo = max(lo, 0)
        x = torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int64)
        if magnitude == "int_extreme":
            x = _int_extremes(x, info, g)
        if magnitude == "exponent":
            counts = torch.tensor([c for c in SHIFT_COUNTS if c <= info.max])
            x = counts[torch.randint(0, len(counts), shape, generator=g)]
        if kind == "nonzero":  # both signs: integer division's rounding differs for negatives
            x = torch.where(x == 0, torch.ones_like(x), x)
        return x.to(dtype)
    real_dtype = dtype.to_real() if dtype.is_complex else dtype
    if kind in STRUCTURED_KINDS and len(shape) >= 2 and shape[-1] == shape[-2]:
        m = _make_matrices(shape, torch.float64 if not dtype.is_complex else torch.complex128, kind, g)
        # apart_even: the whole matrix in the moderate band, apart_odd: its own range, so two
        # matrices of a case are apart role by role (columns scaled apart would wreck conditioning)
        band = magnitude_band("moderate" if magnitude == "apart_even" else magnitude, real_dtype)
        if band is not None and m.numel():
            # the whole matrix scaled, so it stays invertible (SPD): its largest entry in the band
            top = math.exp(
                math.log(band[0])
                + float(torch.rand((), generator=g, dtype=torch.float64)) * (math.log(band[1]) - math.log(band[0]))
            )
            m = m * (top / float(m.abs().max()))
        return m.to(dtype)
    lo, hi = _RANGES.get(kind, (-3.0, 3.0))
    lo = low if low is not None else lo
    hi = high if high is not None else hi
    gen_dtype = torch.float64
    x = torch.rand(shape, generator=g, dtype=gen_dtype) * (hi - lo) + lo
    if magnitude == "half_integers":
        # the kind's range snapped to multiples of 1/2 where they stay inside it (see MAGNITUDES)
        snapped = torch.round(x * 2) / 2
        inside = (snapped >= lo) & (snapped <= hi)
        if kind in ("nonzero", "positive"):
            inside &= snapped != 0
        if kind == "no_poles":  # the gamma family's poles: 0 and the negative integers
            inside &= (snapped > 0) | (snapped != snapped.round())
        x = torch.where(inside, snapped, x)
    if kind == "nonzero":
        x = torch.where(x.abs() < 0.1, torch.full_like(x, 0.5), x)
    if dtype.is_complex:
        y = torch.rand(shape, generator=g, dtype=gen_dtype) * (hi - lo) + lo
        x = torch.complex(_in_band(x, magnitude, real_dtype, g), _in_band(y, magnitude, real_dtype, g))
    else:
        x = _in_band(x, magnitude, real_dtype, g)
        x = _in_domain(x, kind, dtype)
    if kind == "special" and x.numel() > 0:
        specials = torch.tensor(
            [float("nan"), float("inf"), -float("inf"), -0.0, _subnormal(real_dtype), 0.0], dtype=gen_dtype
        )
        mask = torch.rand(shape, generator=g) < 0.25
        pick = torch.randint(0, len(specials), shape, generator=g)
        if len(shape) >= 1 and shape[-1] >= 2:
            # the head and the tail of each innermost row, where a vectorised loop's scalar
            # prologue and epilogue live, get special values more often than the middle
            edges = torch.rand((*shape[:-1], 2), generator=g) < 0.5
            mask[..., 0] |= edges[..., 0]
            mask[..., -1] |= edges[..., 1]
        repl = specials[pick]
        if dtype.is_complex:
            # the imaginary part a zero, a special value of its own or the drawn part, a third
            # each: C99's special values are pairs (nan+infj is an infinity, 0j ** 0j is 1)
            coin = torch.rand(shape, generator=g)
            other = specials[torch.randint(0, len(specials), shape, generator=g)]
            im = torch.where(coin < 1 / 3, torch.zeros_like(repl), torch.where(coin < 2 / 3, other, x.imag))
            repl = torch.complex(repl, im)
        x = torch.where(mask, repl, x)
    return x.to(dtype)


def _in_domain(x: torch.Tensor, kind: str, dtype: torch.dtype) -> torch.Tensor:
    """`x` (float64) kept in the domains whose edge a band or the dtype's rounding could cross:
    above -1 (a negative value scaled into a band flips to positive), and away from the poles at 0
    and the negative integers (a value within 0.1 of one, in the dtype, moves half a unit down;
    where the dtype cannot hold that, as every large value of a half type, it flips to positive)."""
    if kind == "above_minus_one":
        x = torch.where(x <= -1, -x, x)
        return torch.where(x.to(dtype).to(torch.float64) <= -1, torch.zeros_like(x), x)
    if kind != "no_poles" or x.numel() == 0:
        return x
    y = x.to(dtype).to(torch.float64)
    near = (y <= 0.1) & ((y - y.round()).abs() < 0.1)
    y = torch.where(near, y - 0.5, y)
    z = y.to(dtype).to(torch.float64)
    return torch.where((z <= 0) & (z == z.round()), z.abs() + 1, y)


def _subnormal(dtype: torch.dtype) -> float:
    """The subnormal that special values and edge patterns draw: halfway (in bits) between the
    dtype's smallest subnormal and its smallest normal (2**-138 in float32, 2**-19 in float16,
    2**-130 in bfloat16). The largest subnormals (tiny / 4 put 1/x at 2**128, one step past
    float32's maximum) make x / sub land within a factor of a few of the maximum, where a kernel's
    harmless intermediate (x * (1 / sub), digamma ~ -1/x, y1 ~ -2/(pi x)) overflows while float64
    golden still fits: range-edge alarms, not kernel bugs (seed-12 sweep: lgamma, bessel_y1,
    addcdiv, complex division). From here such quotients leave the range in golden too. The
    smallest subnormal would not do: one unit below it is zero, so the conditioning rule (inputs
    moved by one unit) would read every element it touches as sitting on a domain edge."""
    info = torch.finfo(dtype)
    return info.tiny * 2.0 ** round(math.log2(info.eps) / 2)


def _edge_value(token, dtype: torch.dtype):
    if isinstance(token, int):
        return token
    if token in ("min", "max"):
        return getattr(torch.iinfo(dtype), token)
    if token == "sub":
        return _subnormal(dtype)
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0": -0.0, "0": 0.0}[token]


def _edge_slots(kind: str, role: int, dtype: torch.dtype) -> list:
    """The value the aligned edge pattern of `role` puts at each slot (see EDGE_PERIOD), or None."""
    floating = dtype.is_floating_point
    table = _FLOAT_EDGES if floating else _INT_EDGES
    allowed = _EDGE_TOKENS[kind]
    out = []
    for tokens in table:
        token = tokens[min(role, 1)]
        if token is None or allowed is not None and token not in allowed:
            out.append(None)
            continue
        value = _edge_value(token, dtype)
        if not floating:
            info = torch.iinfo(dtype)
            value = min(max(value, info.min), info.max)  # -1 in uint8 is its low end
            if value == 0 and kind == "nonzero":
                value = 1
        out.append(value)
    return out


def _with_edges(x: torch.Tensor, kind: str, role: int, rows: int | None = None) -> torch.Tensor:
    """`x` (logical, final dtype) with the aligned edge pattern of `role` (see EDGE_PERIOD). A
    complex tensor takes the pattern in its real part and, in its imaginary part, the pattern of
    the next slot (COMPLEX_EDGE_SHIFT). With `rows`, only the first `rows` rows of the tensor (as
    rows of its last dim) take it."""
    if x.numel() == 0:
        return x
    parts = (x.real, x.imag) if x.dtype.is_complex else (x,)
    slots = _edge_slots(kind, role, parts[0].dtype)
    index = torch.arange(x.numel())
    position = index % EDGE_PERIOD
    if rows is not None and x.dim() >= 2:
        position = torch.where(index < rows * x.shape[-1], position, -1)  # -1: no slot, the drawn value
    out = []
    for shift, part in zip((0, COMPLEX_EDGE_SHIFT), parts):
        flat = part.reshape(-1).clone()
        for s in range(EDGE_PERIOD):
            value = slots[(s + shift) % EDGE_PERIOD]
            if value is not None:
                flat[position == s] = value
        out.append(flat.reshape(x.shape))
    return torch.complex(*out) if x.dtype.is_complex else out[0]


# shift counts at the edges of every integer width (a 64-bit kernel may work in 32-bit lanes)
SHIFT_COUNTS = (7, 8, 15, 16, 31, 32, 63, 64)


def exponent_band(dtype: torch.dtype) -> tuple[int, int]:
    """(low, high) of the integer exponents the "exponent" band draws for a floating dtype: from
    0.6 of the largest binary exponent to that plus the smallest subnormal's: float16 10..40,
    bfloat16 77..261, float32 77..277, float64 614..2098. Above the largest exponent 2**e
    overflows the dtype, while m * 2**e still fits for a small enough mantissa m."""
    info = torch.finfo(dtype)
    emax = math.ceil(math.log2(info.max))
    esub = round(-math.log2(info.smallest_normal * info.eps))
    return round(0.6 * emax), emax + esub


def base_magnitude(magnitude: str) -> str:
    """The band a magnitude draws in: "near_max" for "equal_near_max" (one value repeated)."""
    return magnitude.removeprefix(EQUAL_PREFIX)


def magnitude_band(magnitude: str, dtype: torch.dtype) -> tuple[float, float] | None:
    """(low, high) of the absolute values a floating band draws, or None for the kind's own range."""
    magnitude = base_magnitude(magnitude)
    if magnitude == "moderate":
        return MODERATE_BAND
    if magnitude == "small_mantissa":
        return torch.finfo(dtype).smallest_normal, 2.0
    if magnitude == "tiny":
        info = torch.finfo(dtype)
        return max(info.eps**2, math.sqrt(info.smallest_normal)), math.sqrt(info.eps)
    top = torch.finfo(dtype).max
    if magnitude in OP_RANGES:
        # just below the threshold: a result the dtype holds (beyond it the overflow is right,
        # and a gradient formula that reads the overflowed result is no bug); the margin keeps x
        # below it once rounded to the dtype (float16's spacing is 1/128 at 11, 1/64 at 16)
        edge = OP_RANGES[magnitude](top)
        return edge - 3.0, edge - 0.05
    if magnitude == "beyond_sqrt":
        return math.sqrt(top) * 4, math.sqrt(top) * 64
    if magnitude == "sqrt_max":
        return math.sqrt(top) / 4, math.sqrt(top) * 2
    if magnitude == "near_max":
        return top / 64, top / 2
    return None


def _in_band(x: torch.Tensor, magnitude: str, dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """`x` with each nonzero value moved into the band, log-uniformly, keeping its sign."""
    if magnitude.startswith(op_ranges.PREFIX) and x.numel():
        return op_ranges.in_band(x, magnitude, g)  # an op's computed range (generators.op_ranges)
    if magnitude in ("apart_even", "apart_odd") and x.numel():
        # by column, not row: a broadcast operand ((n,) against (rows, n)) keeps its alternation
        cols = torch.arange(x.numel()).reshape(x.shape) % (x.shape[-1] if x.dim() else 1)
        on = cols % 2 == (0 if magnitude == "apart_even" else 1)
        return torch.where(on, _in_band(x, "moderate", dtype, g), x)
    if magnitude.startswith(EQUAL_PREFIX) and x.numel():
        return _one_power_of_two(x, magnitude_band(magnitude, dtype), g)
    if magnitude == "exponent" and x.numel():
        lo, hi = exponent_band(dtype)
        return torch.randint(lo, hi + 1, x.shape, generator=g).to(x.dtype)
    if magnitude == "mantissa" and x.numel():
        # a quarter of the elements keep the kind's own range (|x| ** e overflows there, as a
        # p-norm's largest terms do; one such element is enough)
        small = torch.rand(x.shape, generator=g) < 0.75
        return torch.where(small, _in_band(x, "small_mantissa", dtype, g), x)
    band = magnitude_band(magnitude, dtype)
    if band is None or x.numel() == 0:
        return x
    mag = _log_uniform(x.shape, band, g)
    octaves = _integer_octaves(dtype) if magnitude == "moderate" else None
    if octaves is not None:
        # half the elements in the two octaves where the dtype's unit reaches 1 and 2: only
        # integers there, x + 0.5 not representable, odd integers lost above: where a rounding,
        # a floor division or an integer conversion of a half type goes one off (else the
        # band's log-uniform draw leaves them 1 element in 5, and an edge pattern's 3 finite
        # slots in 13 rarely hold one)
        in_octaves = _log_uniform(x.shape, octaves, g)
        mag = torch.where(torch.rand(x.shape, generator=g) < 0.5, in_octaves, mag)
    return torch.sign(x) * mag


def _one_power_of_two(x: torch.Tensor, band: tuple[float, float], g: torch.Generator) -> torch.Tensor:
    """`x` made one value: +-2**e for an e drawn uniformly among the powers of two in `band`, with
    the sign of x's first nonzero element (so a positive domain stays positive)."""
    lo, hi = math.ceil(math.log2(band[0])), math.floor(math.log2(band[1]))
    e = int(torch.randint(lo, max(hi, lo) + 1, (), generator=g))
    nonzero = x[x != 0]
    sign = -1.0 if nonzero.numel() and float(nonzero[0]) < 0 else 1.0
    return torch.full_like(x, sign * 2.0**e)


def _log_uniform(shape, band: tuple[float, float], g: torch.Generator) -> torch.Tensor:
    """float64 values log-uniform in [band[0], band[1])."""
    lo, hi = math.log(band[0]), math.log(band[1])
    return torch.exp(torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo)


def _integer_octaves(dtype: torch.dtype) -> tuple[float, float] | None:
    """[2**p, 2**(p + 2)) for a dtype of p explicit mantissa bits, where it lies inside the
    moderate band (bfloat16: 128..512, float16: 1024..4000, the band's top), else None."""
    if not dtype.is_floating_point:
        return None
    p = round(-math.log2(torch.finfo(dtype).eps))
    lo, hi = 2.0**p, min(2.0 ** (p + 2), MODERATE_BAND[1])
    return (lo, hi) if MODERATE_BAND[0] <= lo < MODERATE_BAND[1] else None


def _int_extremes(x: torch.Tensor, info, g: torch.Generator) -> torch.Tensor:
    """Integers within 16 of the type's limits, of either sign. The first element is always at the
    low end, so an op that reads integers as sizes or counts (bincount, repeat_interleave) rejects
    the tensor instead of allocating billions of elements."""
    near = torch.randint(0, 17, x.shape, generator=g, dtype=torch.int64)
    top = torch.rand(x.shape, generator=g) < 0.5
    out = torch.where(top, info.max - near, info.min + near)
    if out.numel():
        out.view(-1)[0] = info.min + int(near.view(-1)[0])
    return out


def _make_matrices(shape, dtype: torch.dtype, kind: str, g: torch.Generator) -> torch.Tensor:
    """Well-conditioned square matrices: diagonally dominant, or SPD (Hermitian for complex); or
    one of those made exactly indefinite or singular (see VALUE_KINDS)."""
    n = shape[-1]
    cdt = torch.complex128 if dtype.is_complex else torch.float64
    m = torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1
    if dtype.is_complex:
        m = torch.complex(m, torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1)
    eye = torch.eye(n, dtype=cdt)
    if kind in ("spd", "indefinite"):
        m = m @ m.mT.conj() + n * eye
    else:
        m = m + (n + 1) * eye
    if kind == "indefinite" and n:
        m[..., -1, -1] = -m[..., -1, -1]  # still Hermitian; a negative diagonal entry: not definite
    if kind == "singular" and n:
        m[..., -1, :] = 0
    return m.to(dtype)


_RANGES = {
    "real": (-3.0, 3.0),
    "special": (-3.0, 3.0),
    "positive": (0.05, 4.0),
    "nonnegative": (0.0, 4.0),
    "unit": (-1.0, 1.0),
    "coordinate": (-1.0, 1.0),
    "open_unit": (-0.95, 0.95),
    "above_one": (1.05, 4.0),
    "above_minus_one": (-0.95, 3.0),
    "no_poles": (-4.0, 4.0),
    "probability": (0.0, 1.0),
    "nonzero": (-3.0, 3.0),
    "small": (-2.0, 2.0),
}


# Elements of guard band on either side of a guarded copy (see guarded_copy)
GUARD_ELEMENTS = 64


def guarded_copy(fill: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """A `to_device` for TensorSpec.materialize on the CPU: each floating tensor copied into the
    middle of a buffer whose GUARD_ELEMENTS on either side hold `fill`, so that a kernel reading
    past its input's ends (a shape it did not check) reads the fill; two runs with two fills then
    tell those reads apart from the values it was given. Other tensors are copied as they are."""

    def copy(t: torch.Tensor) -> torch.Tensor:
        if t.layout != torch.strided or t.is_quantized or not (t.is_floating_point() or t.is_complex()):
            return t.clone()
        buf = torch.full((t.numel() + 2 * GUARD_ELEMENTS,), fill, dtype=t.dtype)
        inner = buf[GUARD_ELEMENTS : GUARD_ELEMENTS + t.numel()].view(t.shape)
        inner.copy_(t)
        return inner

    return copy

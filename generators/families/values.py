"""Ops whose inputs are of another dtype than the cell's, or of one value range (counts, ...)."""

from __future__ import annotations

from generators import memo
from generators.argtypes import dims
from generators.case import TensorSpec
from generators.families.common import _arg_names, _tensor
from generators.families.indexing import _numel
from generators.families.registry import family
from generators.strategies import draw_tensor, stress_variant


@family("sobol_engine_draw", "sobol_engine_ff", "sobol_engine_scramble")
def sobol_engine(ctx):
    """The state SobolEngine keeps: direction numbers from _sobol_engine_initialize_state_
    (dimension, 30), the last point (dimension,), a lower-triangular binary scrambling matrix."""
    import torch

    dimension = ctx.draw(memo.integers(1, 4), label="dimension")
    state = torch.zeros(dimension, 30, dtype=torch.long)
    torch._sobol_engine_initialize_state_(state, dimension)
    state_spec = TensorSpec(shape=(dimension, 30), dtype="int64", data=tuple(state.flatten().tolist()))
    ctx.fixed["dimension"] = dimension
    if ctx.op.base_name.endswith("scramble_"):
        bits = ctx.draw(memo.lists(memo.booleans(), min_size=30 * 30, max_size=30 * 30), label="ltm bits")
        ltm = [int(bits[i] or i // 30 == i % 30) if i % 30 <= i // 30 else 0 for i in range(900)]
        ctx.fixed["self"] = state_spec
        ctx.fixed["ltm"] = TensorSpec(shape=(dimension, 30, 30), dtype="int64", data=tuple(ltm) * dimension)
        return
    ctx.shape = (dimension,)
    points = TensorSpec(shape=(dimension,), dtype="int64", data=(0,) * dimension)
    ctx.fixed["quasi" if "quasi" in _arg_names(ctx) else "self"] = points
    ctx.fixed["sobolstate"] = state_spec
    ctx.fixed["n"] = ctx.draw(memo.integers(1, 4), label="n")
    ctx.fixed["num_generated"] = 0
    if "dtype" in _arg_names(ctx):
        ctx.fixed["dtype"] = {"dtype": ctx.dtype} if ctx.dtype in ("float32", "float64") else None


# -- ops whose inputs are of another dtype than the cell's, or of one value range ---------------------


@family("float_power")
def float_power(ctx):
    """The result is float64 (complex128 for complex inputs) whatever the inputs: the in-place
    overloads write it into self, which must already be of that dtype."""
    if ctx.op.variant == "inplace":
        wide = "complex128" if ctx.dtype.startswith("complex") else "float64"
        ctx.fixed["self"] = _tensor(ctx, ctx.shape, dtype=wide, label="self", writable=True)


def _counts(ctx, n: int, *, label: str, high: int = 4, dtype: str | None = None) -> TensorSpec:
    """n non-negative integers below `high`, of the cell's dtype (only integer cells are valid)."""
    return draw_tensor(ctx.draw, dtype=dtype or ctx.dtype, shape=(n,), values="index", low=0, high=high, label=label)


@family("bincount")
def bincount(ctx):
    """A 1-d tensor of non-negative integers (the integer cells; the others are rejected), float
    weights of the same length or none, and a minimum length."""
    n = ctx.draw(memo.integers(0, 6), label="length")
    ctx.shape = (n,)
    ctx.fixed["self"] = _counts(ctx, n, label="self", high=6)
    ctx.fixed["weights"] = (
        None if ctx.draw(memo.booleans(), label="no weights") else _tensor(ctx, (n,), dtype="float32", label="weights")
    )
    ctx.fixed["minlength"] = ctx.draw(memo.integers(0, 3), label="minlength")


@family("repeat_interleave")
def repeat_interleave(ctx):
    """Tensor repeats: 1-d non-negative integers, one per element of self along dim (of the
    flattened self without dim), or a single one; output_size, when given, is their total."""
    names = _arg_names(ctx)
    repeats = next((a for a in ctx.op.arguments if a.name == "repeats"), None)
    if repeats is None or not repeats.type.startswith("Tensor"):
        return
    if "self" in names:
        dim = ctx.draw(memo.none() | dims(ctx), label="dim") if ctx.rank else None
        ctx.fixed["dim"] = dim
        n = _numel(ctx.shape) if dim is None else ctx.size(dim)
        n = 1 if ctx.draw(memo.booleans(), label="one repeat") else n
    else:
        n = ctx.draw(memo.integers(0, 5), label="length")
        ctx.shape = (n,)
    # with self, the repeats are an index-like argument: int64 in every cell
    ctx.fixed["repeats"] = _counts(ctx, n, label="repeats", dtype="int64" if "self" in names else None)
    ctx.fixed["output_size"] = None


@family("renorm")
def renorm(ctx):
    """A positive norm order and a positive max norm (renorm rejects non-positive ones), over the
    sub-tensors along dim of an input of two dims or more."""
    ctx.fixed["p"] = ctx.draw(memo.sampled_from((2.0, 1.0, 3.0)), label="p")
    ctx.fixed["maxnorm"] = ctx.draw(memo.sampled_from((1.0, 0.5, 2.0)), label="maxnorm")
    if ctx.rank < 2:
        ctx.shape = tuple(ctx.draw(memo.integers(1, 4), label=f"side[{i}]") for i in range(2))
    ctx.fixed["dim"] = ctx.draw(dims(ctx), label="dim")


@family("histogramdd", "histogramdd_bin_edges", "histogramdd_from_bin_cts", "histogramdd_from_bin_tensors")
def histogramdd(ctx):
    """Points (n, d) and one bins entry per coordinate: d counts, or d increasing edge tensors
    (histogramdd checks "expected d sequences of bin edges for a d-dimensional histogram"), two
    edges or more each (one bin or more); a
    range of d (low, high) pairs. Drawn d, not a fixed 2, so every overload is valid every time."""
    names = {a.name: a for a in ctx.op.arguments}
    n, d = ctx.draw(memo.integers(1, 4), label="points"), ctx.draw(memo.integers(1, 3), label="coordinates")
    ctx.shape = (n, d)
    bins = names.get("bins")
    ranges = "range" in names and ctx.draw(memo.booleans(), label="range given")
    edges_given = bins is not None and bins.type.startswith("Tensor")
    # without a range or bin edges, the bins span the points' min and max, which must be finite
    # ("dimension 0's range [nan, nan] is not finite"): finite points then, special values otherwise
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self", values=None if ranges or edges_given else "unit")
    if bins is not None and bins.type.startswith("Tensor"):
        ctx.fixed["bins"] = [
            TensorSpec(shape=(k,), dtype=ctx.dtype, data=tuple(float(x - k // 2) for x in range(k)))
            for k in (ctx.draw(memo.integers(2, 4), label=f"edges {i}") for i in range(d))
        ]
    elif bins is not None and "[]" in bins.type:
        ctx.fixed["bins"] = [ctx.draw(memo.integers(1, 3), label=f"bins {i}") for i in range(d)]
    if "range" in names:
        ctx.fixed["range"] = [v for i in range(d) for v in (-1.0 - i, 1.0 + i)] if ranges else None
    if "weight" in names:
        ctx.fixed["weight"] = (
            _tensor(ctx, (n,), label="weight") if ctx.draw(memo.booleans(), label="weighted") else None
        )


@family("sobol_engine_initialize_state")
def sobol_initial_state(ctx):
    """The zeroed (dimension, 30) int64 state SobolEngine fills in place (torch/quasirandom.py)."""
    dimension = ctx.draw(memo.integers(1, 4), label="dimension")
    ctx.shape = (dimension, 30)
    ctx.fixed["self"] = TensorSpec(shape=(dimension, 30), dtype="int64", data=(0,) * (dimension * 30))
    ctx.fixed["dimension"] = dimension


@family("one_hot")
def one_hot(ctx):
    """Class indices in [0, num_classes) (Onehot.cpp: "Class values must be non-negative" and
    "smaller than num_classes"); num_classes -1 infers it from the largest index, which an empty
    tensor has not. The kernel takes int64 only: the other cells stay rejected."""
    classes = ctx.draw(memo.integers(1, 4), label="classes")
    ctx.fixed["self"] = draw_tensor(
        ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values="index", low=0, high=classes, label="self"
    )
    infer = _numel(ctx.shape) > 0 and ctx.draw(memo.booleans(), label="infer classes")
    ctx.fixed["num_classes"] = -1 if infer else classes


@family("vander")
def vander(ctx):
    """x is one-dimensional ("x must be a one-dimensional tensor"); N columns or none (len(x))."""
    n = ctx.draw(memo.integers(0, 5), label="length")
    ctx.shape = (n,)
    ctx.fixed["x"] = _tensor(ctx, ctx.shape, label="x")
    ctx.fixed["N"] = ctx.draw(memo.none() | memo.integers(0, 4), label="N")


def _increasing(ctx, n: int, *, label: str) -> TensorSpec:
    """n strictly increasing values of the cell's dtype: bin edges, or sample coordinates."""
    start = ctx.draw(memo.integers(-2, 1), label=f"{label} start")
    steps = ctx.draw(memo.lists(memo.integers(1, 3), min_size=n, max_size=n), label=f"{label} steps")
    return TensorSpec(shape=(n,), dtype=ctx.dtype, data=tuple(start + sum(steps[:i]) for i in range(n)))


@family("histogram")
def histogram(ctx):
    """The bins_tensor overloads: 1-d increasing bin edges of self's dtype (HistogramKernel.cpp,
    "bins tensor should have one dimension"), two or more (one bin or more); a weight of self's
    shape or none. The CPU kernel is floating only: the other cells are its kernel gaps."""
    bins = next((a for a in ctx.op.arguments if a.name == "bins"), None)
    if bins is None or not bins.type.startswith("Tensor"):
        return
    ctx.fixed["bins"] = _increasing(ctx, ctx.draw(memo.integers(2, 4), label="edges"), label="bins")
    ctx.fixed["weight"] = (
        _tensor(ctx, ctx.shape, label="weight") if ctx.draw(memo.booleans(), label="weighted") else None
    )


@family("gradient")
def gradient(ctx):
    """The overloads whose spacing is a list of coordinate tensors: one 1-d tensor per dim the
    gradient is taken along, as long as that dim (ReduceOps.cpp, pre_check_gradient), and each
    such dim at least edge_order + 1 long; dim a list as long as spacing (tensorarray), or one
    dim with one tensor, or none with one tensor per dim of self (tensorarrayint). A list of
    numbers follows the same rule ("torch.gradient expected spacing to be unspecified, a scalar,
    or a list of length equal to 'self.dim()'": scalarrayint was valid by luck); one number fits
    any dims. Every overload gets an edge_order of 1 or 2 and dims at least that long."""
    names = {a.name: a for a in ctx.op.arguments}
    spacing = names.get("spacing")
    edge = ctx.draw(memo.integers(1, 2), label="edge_order")
    rank = ctx.draw(memo.integers(1, 3), label="rank")
    ctx.shape = tuple(ctx.draw(memo.integers(edge + 1, 4), label=f"side[{i}]") for i in range(rank))
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["edge_order"] = edge
    if names["dim"].type.startswith("int["):
        along = ctx.draw(memo.lists(memo.integers(0, rank - 1), min_size=1, max_size=rank, unique=True), label="dim")
        ctx.fixed["dim"] = along
    elif ctx.draw(memo.booleans(), label="one dim"):
        along = [ctx.draw(memo.integers(0, rank - 1), label="dim")]
        ctx.fixed["dim"] = along[0]
    else:
        along = list(range(rank))
        ctx.fixed["dim"] = None
    if spacing is None:
        return
    steps = memo.sampled_from((1, 2, 0.5, -1.5))
    if spacing.type.startswith("Scalar[]"):
        ctx.fixed["spacing"] = [ctx.draw(steps, label=f"spacing[{i}]") for i in range(len(along))]
        return
    if spacing.type.startswith("Scalar"):
        ctx.fixed["spacing"] = ctx.draw(steps, label="spacing")
        return
    ctx.fixed["spacing"] = [_increasing(ctx, ctx.shape[d], label=f"spacing[{i}]") for i, d in enumerate(along)]


@family("binomial")
def binomial(ctx):
    """Counts are whole numbers of trials and prob a probability (Distributions.cpp samples
    count Bernoulli trials, so a huge or infinite count from a stress case ran past the 60 s
    case timeout); prob broadcasts against count. Floating cells only: the others are rejected
    ("binomial only supports floating-point dtypes for count")."""
    if stress_variant() == "edges":
        # the edge pattern in the counts too: NaN, +-inf, subnormal and large counts have a
        # defined result (NaN, inf, 0 for a negative count), and the CPU's sampler never returns
        # for a NaN count (docs/evaluation/audit/other.toml, binomial-nan-count-hang), which a sweep
        # then reports as the cell's timeout
        ctx.fixed["count"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values="real", label="count")
    else:
        ctx.fixed["count"] = draw_tensor(
            ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values="index", low=0, high=8, label="count"
        )
    ctx.fixed["prob"] = draw_tensor(ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values="probability", label="prob")


@family("clamp", "clip")
def clamp_bounds(ctx):
    """At least one bound: "torch.clamp: At least one of 'min' or 'max' must not be None"
    (TensorCompare.cpp's clamp checks); each optional bound drawn on its own was None in one
    case in four, both in one in sixteen or so, and a cell that drew that first saw no valid case
    (seed 14: clamp.Tensor_out float16). One bound is always given, the other drawn as before; a
    tensor bound broadcasts to self (the in-place and out= forms keep self's shape)."""
    from generators.argtypes import _draw_scalar, broadcast_shapes

    names = {a.name: a for a in ctx.op.arguments}
    if "min" not in names or "max" not in names:
        return
    given = ctx.draw(memo.sampled_from(("min", "max")), label="bound given")
    arg = names[given]
    if arg.type.startswith("Tensor"):
        shape = ctx.draw(broadcast_shapes(ctx.shape), label=f"{given} shape")
        ctx.fixed[given] = _tensor(ctx, shape, label=given)
    else:
        ctx.fixed[given] = _draw_scalar(arg, ctx, f"arg {given}")

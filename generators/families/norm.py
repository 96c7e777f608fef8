"""Normalisation: batch, layer, group and RMS norms, their running stats and output masks."""

from __future__ import annotations

from generators import memo
from generators.families.common import _arg_names, _tensor
from generators.families.registry import family
from generators.strategies import draw_tensor, stress_variant

# -- normalisation ---------------------------------------------------------------------------------


@family(
    "batch_norm",
    "native_batch_norm",
    "native_batch_norm_legit",
    "native_batch_norm_legit_functional",
    "native_batch_norm_legit_no_training",
    "batch_norm_impl_index",
    "instance_norm",
    "cudnn_batch_norm",
    "miopen_batch_norm",
    "batch_norm_with_update",
    "batch_norm_no_update",
    "batch_norm_with_update_functional",
    "batch_norm_update_stats",
)
def batch_norm(ctx):
    """(N, C, *) input with per-channel weight, bias and running stats (running_var > 0).

    Running stats are always given when `training` is False: without them some CPU kernels
    crash the process instead of raising.
    """
    names = _arg_names(ctx)
    n = ctx.draw(memo.integers(2, 3), label="batch")
    c = ctx.draw(memo.integers(1, 3), label="channels")
    _channel_input(ctx, names, n, c)
    if "running_mean" in names:
        ctx.fixed["running_mean"] = _tensor(ctx, (c,), label="running_mean", writable=True)
        ctx.fixed["running_var"] = _tensor(ctx, (c,), values="positive", label="running_var", writable=True)
    elif "training" in names:
        # no running stats to use: evaluation mode would read absent stats (a segfault on CPU)
        ctx.fixed["training"] = True
    if "training" in names and stress_variant() == "huge":
        # only training computes the statistics from the input, where huge values overflow an
        # intermediate (the variance, pytorch#162489); evaluation scales by the given stats
        ctx.fixed["training"] = True
    for name in ("save_mean", "save_invstd", "save_var"):
        if name in names:
            ctx.fixed[name] = _tensor(ctx, (c,), values="positive", label=name)
    for name in ("momentum", "exponential_average_factor"):
        if name in names:
            ctx.fixed[name] = 0.1
    for name in ("eps", "epsilon"):
        if name in names:
            ctx.fixed[name] = 1e-5


@family("quantized_batch_norm")
def quantized_batch_norm(ctx):
    """A quantized (N, C, *) input; float per-channel weight, bias and statistics (var > 0); the
    output's quantization parameters."""
    n = ctx.draw(memo.integers(1, 3), label="batch")
    c = ctx.draw(memo.integers(1, 3), label="channels")
    spatial = ctx.draw(memo.lists(memo.integers(1, 3), max_size=3), label="spatial")
    ctx.shape = (n, c, *spatial)
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    for name in ("weight", "bias", "mean"):
        ctx.fixed[name] = _tensor(ctx, (c,), dtype="float32", label=name)
    ctx.fixed["var"] = _tensor(ctx, (c,), dtype="float32", values="positive", label="var")
    ctx.fixed["eps"] = 1e-5
    ctx.fixed["output_scale"] = ctx.draw(memo.sampled_from((0.1, 0.05, 0.5)), label="output_scale")
    ctx.fixed["output_zero_point"] = ctx.draw(memo.integers(0, 10), label="output_zero_point")


def _channel_input(ctx, names, n: int, c: int) -> list[int]:
    """An (N, C, *spatial) input with per-channel weight and bias where the op takes them; returns
    the spatial extents drawn."""
    spatial = ctx.draw(memo.lists(memo.integers(1, 3), max_size=2), label="spatial")
    ctx.shape = (n, c, *spatial)
    if ctx.op.base_name.startswith("native_group_norm"):
        # the kernel (and its backward) take a contiguous input: group_norm makes it so first
        ctx.fixed["input"] = draw_tensor(
            ctx.draw, dtype=ctx.dtype, shape=ctx.shape, values=ctx.values or "real", layout="contiguous", label="input"
        )
    else:
        ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    for name in ("weight", "bias"):
        if name in names:
            ctx.fixed[name] = None if _leave_out(ctx, name) else _tensor(ctx, (c,), label=name)
    return spatial


def _forward_eps(ctx) -> None:
    """A backward takes the forward's mean and rstd, which generators.backward computes by running
    the forward; that needs the eps the backward does not take."""
    if "_backward" in ctx.op.base_name:
        ctx.fixed["eps"] = 1e-5


def _leave_out(ctx, name) -> bool:
    """Whether an optional weight or bias is None. Never in a backward's out= overload: without a
    weight its gradient is an undefined tensor, which the out= wrapper cannot copy into its out
    ("tensor does not have a device", native_layer_norm_backward.out, torch 2.13)."""
    if ctx.op.variant == "out" and "output_mask" in _arg_names(ctx):
        return False
    return ctx.draw(memo.booleans(), label=f"no {name}")


@family("layer_norm", "native_layer_norm", "rms_norm", "fused_rms_norm", "fused_layer_norm")
def layer_norm(ctx):
    names = _arg_names(ctx)
    k = ctx.draw(memo.integers(1, max(1, ctx.rank)), label="normalized dims") if ctx.rank else 0
    if ctx.rank == 0:
        ctx.shape = (ctx.draw(memo.integers(1, 4), label="size"),)
        k = 1
    normalized = list(ctx.shape[ctx.rank - k :])
    ctx.fixed["input"] = _tensor(ctx, ctx.shape, label="input")
    ctx.fixed["normalized_shape"] = normalized
    _forward_eps(ctx)
    for name in ("weight", "bias"):
        if name in names:
            ctx.fixed[name] = None if _leave_out(ctx, name) else _tensor(ctx, tuple(normalized), label=name)


@family("group_norm", "native_group_norm")
def group_norm(ctx):
    names = _arg_names(ctx)
    g = ctx.draw(memo.integers(1, 2), label="groups")
    c = g * ctx.draw(memo.integers(1, 2), label="channels per group")
    n = ctx.draw(memo.integers(1, 2), label="batch")
    spatial = _channel_input(ctx, names, n, c)
    _forward_eps(ctx)
    if "num_groups" in names:
        ctx.fixed["num_groups"] = g
    if "group" in names:
        hxw = 1
        for s in spatial:
            hxw *= s
        ctx.fixed.update({"N": n, "C": c, "HxW": hxw, "group": g})


@family("ncf_view")
def ncf_view(ctx):
    """Per-row statistics viewed against the input they normalise: self holds one value per
    entry of input_shape's leading dims, and is viewed as those dims followed by
    normalized_ndim ones (what a norm's decomposition passes; other sizes cannot be viewed)."""
    rank = ctx.draw(memo.integers(1, 4), label="input rank")
    input_shape = [ctx.draw(memo.integers(1, 3), label=f"input size {i}") for i in range(rank)]
    normalized = ctx.draw(memo.integers(0, rank), label="normalized_ndim")
    ctx.shape = tuple(input_shape[: rank - normalized])
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["input_shape"] = input_shape
    ctx.fixed["normalized_ndim"] = normalized


@family("ncf_unsqueeze")
def ncf_unsqueeze(ctx):
    """Per-channel statistics viewed against an (N, C, *spatial) input, as batch norm's
    decomposition calls it (torch/_decomp/decompositions.py): a 1-d self of C values and the
    input's ndim of 2 or more (the view is (1, C, 1, ...); an ndim below 2 cannot hold C)."""
    c = ctx.draw(memo.integers(1, 5), label="channels")
    ctx.shape = (c,)
    ctx.fixed["self"] = _tensor(ctx, ctx.shape, label="self")
    ctx.fixed["ndim"] = ctx.draw(memo.integers(2, 5), label="ndim")

"""Fused optimizers: parameter, gradient and state lists of one length and shape."""

from __future__ import annotations

from generators import memo
from generators.families.common import _arg_names
from generators.families.registry import family
from generators.strategies import draw_tensor


@family("fused_adam", "fused_adamw", "fused_adagrad", "fused_sgd")
def fused_optimizer(ctx):
    """A step of a fused optimizer over a list of parameters: state_steps holds one step count per
    parameter, each a one-element float32 tensor (it is read as a number); no gradient scaling."""
    names = _arg_names(ctx)
    if ctx.dtype in ("float16", "bfloat16", "float32", "float64") and ctx.draw(
        memo.booleans(), label="parameters past a vector"
    ):
        # one flat parameter longer than a CPU vector (16-bit: 16 or 32 lanes), so the kernel runs
        # its vector blocks and then a tail; a published bug of the 16-bit fused steps skipped
        # whole vector blocks, which parameters shorter than one vector never reach
        n = ctx.draw(memo.integers(17, 65), label="parameter length")
        ctx.shape = (n,)
        ctx.list_shapes = [(n,)] * len(ctx.list_shapes)
    if "state_steps" in names:
        ctx.fixed["state_steps"] = [
            draw_tensor(
                ctx.draw,
                dtype="float32",
                shape=(),
                values="index",
                low=1,
                high=5,
                layout="contiguous",
                label=f"state_steps[{i}]",
            )
            for i in range(len(ctx.list_shapes))
        ]
    for name in ("grad_scale", "found_inf"):
        if name in names:
            ctx.fixed[name] = None
    if "amsgrad" in names:
        # max_exp_avg_sqs is used with amsgrad only, and must be empty without it
        amsgrad = ctx.draw(memo.booleans(), label="amsgrad")
        ctx.fixed["amsgrad"] = amsgrad
        if not amsgrad:
            ctx.fixed["max_exp_avg_sqs"] = []


def _flag(ctx, name: str):
    """A 0-d float32 found_inf: 0.0 or 1.0, as the gradient scaler keeps it."""
    from generators.case import TensorSpec

    return TensorSpec(shape=(), dtype="float32", data=(float(ctx.draw(memo.integers(0, 1), label=name)),))


@family("amp_foreach_non_finite_check_and_unscale")
def amp_unscale(ctx):
    """What torch.amp.GradScaler._unscale_grads_ passes (torch/amp/grad_scaler.py): the gradients, a
    0-d float32 found_inf flag and a 0-d float32 inverse scale (the kernel checks "must be a
    1-element tensor" and "must be a float tensor"); the gradients are the cell's dtype."""
    ctx.fixed["found_inf"] = _flag(ctx, "found_inf")
    ctx.fixed["inv_scale"] = draw_tensor(
        ctx.draw, dtype="float32", shape=(), values="positive", layout="contiguous", label="inv_scale"
    )


@family("amp_update_scale")
def amp_update_scale(ctx):
    """What GradScaler.update passes (torch/amp/grad_scaler.py): the 0-d scale (float32 by contract:
    "current_scale must be a float tensor", so the other cells are rejected), a 0-d int32
    growth tracker, the 0-d float32 found_inf flag, a growth factor above 1, a backoff factor
    below 1 and a positive growth interval."""
    ctx.fixed["self"] = draw_tensor(
        ctx.draw, dtype=ctx.dtype, shape=(), values="positive", layout="contiguous", writable=True, label="scale"
    )
    ctx.fixed["growth_tracker"] = draw_tensor(
        ctx.draw, dtype="int32", shape=(), values="index", low=0, high=4, layout="contiguous", label="growth_tracker"
    )
    ctx.fixed["found_inf"] = _flag(ctx, "found_inf")
    ctx.fixed["scale_growth_factor"] = ctx.draw(memo.sampled_from((2.0, 1.5)), label="growth factor")
    ctx.fixed["scale_backoff_factor"] = ctx.draw(memo.sampled_from((0.5, 0.25)), label="backoff factor")
    ctx.fixed["growth_interval"] = ctx.draw(memo.integers(1, 3), label="growth_interval")

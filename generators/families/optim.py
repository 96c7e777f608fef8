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
    if "state_steps" in names:
        ctx.fixed["state_steps"] = [
            draw_tensor(ctx.draw, dtype="float32", shape=(), values="index", low=1, high=5, layout="contiguous", label=f"state_steps[{i}]")
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

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

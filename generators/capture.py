"""Internal ops drawn as their public caller calls them (opdb hint `caller`, contracts.toml).

A helper or backward kernel that a public op reaches only through autograd takes what its caller
computed: weight norm's backward gets the norms its forward saved, of the v it gets, and the
gradient autograd hands it. Drawn apart, those disagree (norms that are not v's, a stride-0
gradient) and the kernel is judged on inputs it is never given. Here the caller's own case is
drawn (its schema and family builder), run forward and backward on the CPU under a
TorchDispatchMode, and the internal op's call is captured: once in the case's dtype (which
dtypes and shapes the caller passes) and once with the inputs in float64 (the values a right
forward passes: a float32 norm of 1e20s that overflows is the forward's bug, which the backward
must not inherit). The captured float64 values, rounded to the captured dtypes, are the case.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from generators.case import TensorSpec
from generators.contracts import as_spec
from generators.strategies import draw_tensor


class _Capture(TorchDispatchMode):
    def __init__(self, packet):
        super().__init__()
        self.packet = packet
        self.call: tuple | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.call is None and func.overloadpacket is self.packet:
            self.call = torch.utils._pytree.tree_map(_detached, (args, kwargs))
        return func(*args, **kwargs)


def _detached(x):
    return x.detach().clone() if isinstance(x, torch.Tensor) else x


def captured_call(run, packet) -> tuple[tuple, dict] | None:
    """(args, kwargs) of the first call of aten op `packet` while `run()` runs, or None."""
    mode = _Capture(packet)
    with mode:
        run()
    return mode.call


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def from_caller(ctx, cases) -> bool:
    """Fill `ctx.fixed` with what the op's caller (hint `caller`) passes it, drawing the caller's
    case with `cases(op, cell, max_numel, builder)` (the schema's strategy); False (nothing
    filled) where the caller rejects its drawn case or never calls the op for it."""
    import opdb
    from generators import families

    caller = opdb.lookup(ctx.hints["caller"])
    case = ctx.draw(
        cases(caller, ctx.cell, ctx.max_numel, families.builder_for(caller)), label=f"caller {caller.qualname}"
    )
    packet = getattr(torch.ops.aten, ctx.op.base_name)
    try:
        args, kwargs = case.materialize(_same, torch.device("cpu"))
        low = _run_caller(caller, args, kwargs, packet, None, ctx)
        if low is None:
            return False
        exact = _run_caller(caller, args, kwargs, packet, torch.float64, ctx, grad=low[1])
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
        return False
    if exact is None:
        return False
    (low_args, low_kwargs), _ = low
    (exact_args, exact_kwargs), _ = exact
    names = [a.name for a in ctx.op.arguments if not a.is_out]
    given = {**dict(zip(names, low_args)), **low_kwargs}
    values = {**dict(zip(names, exact_args)), **exact_kwargs}
    for name in names:
        if name not in given:
            continue
        v = given[name]
        if isinstance(v, torch.Tensor):
            exact_v = values[name]
            v = exact_v.to(v.dtype) if exact_v.is_floating_point() and v.is_floating_point() else v
            ctx.fixed[name] = as_spec(v, layout=_layout_of(given[name]))
        else:
            ctx.fixed[name] = v
    first = next((v for v in ctx.fixed.values() if isinstance(v, TensorSpec)), None)
    if first is not None:
        ctx.shape = first.shape
    return True


def _layout_of(t: torch.Tensor) -> str:
    return "transposed" if t.dim() >= 2 and not t.is_contiguous() and t.mT.is_contiguous() else "contiguous"


def _run_caller(caller, args, kwargs, packet, dtype, ctx, grad=None):
    """Run `caller` forward and backward (with floating inputs cast to `dtype` when given) under
    a capture of `packet`: ((args, kwargs) of its call, the gradient used), or None."""

    def cast(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x = x.detach().to(dtype) if dtype is not None else x.detach().clone()
            return x.requires_grad_(True)
        return x

    args = [cast(a) for a in args]
    kwargs = {k: cast(v) for k, v in kwargs.items()}
    leaves = [x for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor) and x.requires_grad]
    state = {}

    def run():
        out = caller.resolve()(*args, **kwargs)
        first = out[0] if isinstance(out, (tuple, list)) else out
        if not isinstance(first, torch.Tensor) or not first.requires_grad:
            return
        g = grad
        if g is None:
            spec = draw_tensor(
                ctx.draw,
                dtype=str(first.dtype).removeprefix("torch."),
                shape=first.shape,
                layout="contiguous",
                label="caller's gradient",
            )
            g = spec.materialize(_same)
        state["grad"] = g
        torch.autograd.grad(first, leaves, g.to(first.dtype), allow_unused=True)

    call = captured_call(run, packet)
    return None if call is None else (call, state.get("grad"))

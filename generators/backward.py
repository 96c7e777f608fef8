"""Backward ops: the incoming gradient must have the shape of the forward op's output.

A schema says `grad_output` is a Tensor, not which shape. For an op named `<fwd>_backward` the
other arguments (input, weight, kernel sizes, ...) are drawn first; then the forward op is run
on the CPU with the arguments it shares by name (cases are small; the meta device would be
cheaper per call but routes many ops through Python decompositions that import torch._dynamo,
seconds per process), and the gradient takes its output shape. When that fails (no forward op, arguments it cannot take) the gradient takes the main
shape, which is right for the pointwise backwards.
"""

from __future__ import annotations

import functools

import torch

from generators import memo
from generators.argtypes import draw_arg
from generators.case import Case, TensorSpec
from generators.strategies import draw_tensor

GRAD_NAMES = ("grad_output", "grad_out", "grad", "gO", "grad_y")
_CPU = torch.device("cpu")


def is_backward(op) -> bool:
    return "_backward" in op.base_name


def forward_name(op) -> str:
    return op.base_name.split("_backward", 1)[0]


# arguments of a backward op that hold one of its forward's results, by name: the index in the
# forward's outputs (max pooling's argmax indices, CTC loss's loss and alphas)
FORWARD_RESULT_NAMES = {
    "indices": 1,
    "neg_log_likelihood": 0,
    "log_alpha": 1,
    "is_target": 1,
    "mean": 1,
    "rstd": 2,
    "pdist": 0,
    "cdist": 0,
}
# forwards whose public op hides a result that the backward takes (_pdist_backward's pdist, _cdist_backward's cdist: a
# drawn one, unrelated to self, put subnormal distances under |x_i - x_j| of hundreds: sweep seed 13)
_FORWARDS = {
    "multilabel_margin_loss": "multilabel_margin_loss_forward",
    "_pdist": "_pdist_forward",
    "_cdist": "_cdist_forward",
}


def deferred_args(op) -> tuple[str, ...]:
    """The arguments drawn after all others: incoming gradients, and forward results."""
    grads = tuple(a.name for a in op.arguments if a.name in GRAD_NAMES and not a.is_out)
    names = tuple(
        a.name for a in op.arguments if a.name in FORWARD_RESULT_NAMES and not a.is_out and a.type.startswith("Tensor")
    )
    return grads + (_forward_results(op.base_name, names) if names else ())


@functools.cache
def _forward_results(base_name: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """Of `names`, those that the forward of `base_name` does not take as an input (embedding's
    backward takes the forward's input `indices`, max pooling's backward its result)."""
    packet = _forward_packet(base_name)
    inputs = {
        a.name
        for o in (packet.overloads() if packet else ())
        for a in getattr(packet, o)._schema.arguments
        if not a.is_out
    }
    return tuple(n for n in names if n not in inputs) if packet else ()


def draw_deferred(arg, ctx):
    if arg.name in FORWARD_RESULT_NAMES:
        return forward_result(arg, ctx)
    return draw_grad(arg, ctx)


def forward_result(arg, ctx):
    """The forward's result that `arg` stands for (max pooling's indices), as explicit values;
    None when the forward rejects the drawn arguments (the backward then will too)."""
    outs = forward_outputs(ctx.op, _forward_arguments(ctx))
    i = FORWARD_RESULT_NAMES[arg.name]
    if outs is None or len(outs) <= i or not isinstance(outs[i], torch.Tensor):
        return draw_arg(arg, ctx)
    t = outs[i]
    return TensorSpec(shape=tuple(t.shape), dtype=str(t.dtype).removeprefix("torch."), data=tuple(t.flatten().tolist()))


def _forward_arguments(ctx) -> dict:
    # family builders may pre-draw forward arguments that the backward does not take
    # (adaptive pooling's output_size, fractional pooling's random samples)
    return {**ctx.fixed, **ctx.drawn}


def draw_grad(arg, ctx):
    drawn = ctx.drawn
    if isinstance(drawn.get("input_size"), list) and isinstance(drawn.get("output_size"), list):
        # resampling backwards: (N, C, *output_size)
        shape = tuple(drawn["input_size"][: len(drawn["input_size"]) - len(drawn["output_size"])]) + tuple(
            drawn["output_size"]
        )
    else:
        shape = forward_output_shape(ctx.op, _forward_arguments(ctx))
    if shape is None:
        shape = ctx.shape
    if arg.type.endswith("?") and ctx.draw(memo.integers(0, 5), label=f"{arg.name} none") == 0:
        return None
    return draw_tensor(ctx.draw, dtype=ctx.dtype, shape=shape, label=arg.name)


def _identity(t: torch.Tensor) -> torch.Tensor:
    return t


def forward_output_shape(op, drawn: dict) -> tuple[int, ...] | None:
    """The shape of the forward op's (first) output for the drawn arguments, run on the CPU."""
    outs = forward_outputs(op, drawn)
    if outs and isinstance(outs[0], torch.Tensor):
        return tuple(outs[0].shape)
    return None


def _forward_packet(base_name: str):
    name = base_name.split("_backward", 1)[0]
    name = _FORWARDS.get(name, name)
    return getattr(torch.ops.aten, name, None) or getattr(torch.ops.aten, name.lstrip("_"), None)


def forward_outputs(op, drawn: dict) -> list | None:
    """The forward op's outputs for the drawn arguments, run on the CPU (None if it rejects them)."""
    packet = _forward_packet(op.base_name)
    if packet is None:
        return None
    for overload in ["default"] + [o for o in packet.overloads() if o != "default"]:
        fwd = getattr(packet, overload, None)
        if fwd is None:
            continue
        schema = fwd._schema
        if any(a.is_out for a in schema.arguments):
            continue
        kwargs = {}
        ok = True
        sizes = drawn.get("input_sizes", drawn.get("sizes"))
        if "self" not in drawn and isinstance(sizes, list) and all(isinstance(x, int) for x in sizes):
            # view backwards (select, slice, diagonal, ...) take the input's sizes, not the input
            drawn = {**drawn, "self": TensorSpec(shape=tuple(sizes), dtype="float32")}
        for a in schema.arguments:
            if a.name in drawn:
                kwargs[a.name] = drawn[a.name]
            elif a.has_default_value():
                continue
            elif str(a.type).startswith("Optional"):
                kwargs[a.name] = None
            else:
                ok = False
                break
        if not ok:
            continue
        case = _call_case(fwd, kwargs)
        try:
            _, real = case.materialize(_identity, _CPU)
            if on_functional is not None:
                on_functional(case)
            with torch.no_grad():
                out = fwd(**real)
        except Exception:  # this overload does not take these arguments: try the next
            continue
        finally:
            if on_functional is not None:
                on_functional(None)
        return list(out) if isinstance(out, (tuple, list)) else [out]
    return None


# -- out= dtypes -----------------------------------------------------------------------------------

_FUNCTIONAL_CACHE: dict[str, object] = {}
# Called with the Case of a call the generator makes itself just before it runs (and None after):
# an out= op's functional sizing its outs, a backward's forward sizing its gradient or giving a
# forward result. A process that dies or hangs in there is recorded with that case and gets a
# script (conform.run.cell arms its watchdog); seed 15's rrelu_with_noise_backward crash had none.
on_functional = None


def _call_case(fn, kwargs: dict) -> Case:
    """The Case of the generator's own call of aten overload `fn` with `kwargs`."""
    name = fn._schema.name.split("::")[-1]
    return Case(op=f"aten::{name}" + (f".{fn._overloadname}" if fn._overloadname != "default" else ""), kwargs=kwargs)


def functional_of(op):
    """The functional overload with the same inputs as the out= overload `op`, or None."""
    if op.qualname in _FUNCTIONAL_CACHE:
        return _FUNCTIONAL_CACHE[op.qualname]
    found = None
    packet = getattr(torch.ops.aten, op.base_name, None)
    wanted = [a.name for a in op.arguments if not a.is_out]
    # names alone are ambiguous: float_power.Scalar_out (Scalar self, Tensor exponent) would find
    # float_power.Tensor_Tensor first, which rejects a number for self; the types must agree too
    own = getattr(packet, op.overload or "default", None) if packet is not None else None
    wanted_types = [str(a.type) for a in own._schema.arguments if not a.is_out] if own is not None else None
    candidates = []
    for overload in packet.overloads() if packet is not None else ():
        fn = getattr(packet, overload, None)
        args = fn._schema.arguments if fn is not None else []
        if any(a.is_out for a in args):
            continue
        head, rest = args[: len(wanted)], args[len(wanted) :]
        # the functional may take more arguments, with defaults: tril_indices.out (row, col,
        # offset) and tril_indices (row, col, offset, dtype=long, ...) give the same result
        if rest and not all(a.has_default_value() for a in rest):
            continue
        if [a.name for a in head] == wanted and (wanted_types is None or [str(a.type) for a in head] == wanted_types):
            candidates.append((len(rest), fn))
    found = min(candidates, key=lambda c: c[0])[1] if candidates else None
    _FUNCTIONAL_CACHE[op.qualname] = found
    return found


def out_dtypes(op, drawn: dict) -> list[str] | None:
    """Result dtypes of the functional counterpart of out= op `op`, run on the CPU, in order."""
    results = out_results(op, drawn)
    return None if results is None else [r and r[0] for r in results]


# results whose out must have their layout: COO, and mkldnn (to_mkldnn.out writes only into an
# mkldnn tensor of the result's size: "tried to directly modify sizes for customized tensor")
_SPARSE_OUT_LAYOUTS = {torch.sparse_coo: "sparse_coo", torch._mkldnn: "mkldnn"}


def out_results(op, drawn: dict) -> list[tuple[str, str | None, tuple[int, ...]] | None] | None:
    """(dtype, sparse layout or None, shape) of each result of the functional counterpart of out=
    op `op`, run on the CPU, in order; None where a result is not a tensor."""
    fn = functional_of(op)
    if fn is None:
        return None
    kwargs = {a.name: drawn[a.name] for a in op.arguments if not a.is_out and a.name in drawn}
    case = _call_case(fn, kwargs)
    try:
        _, real = case.materialize(_identity, _CPU)
        if on_functional is not None:
            on_functional(case)
        with torch.no_grad():
            out = fn(**real)
    except Exception:  # the functional rejects these inputs: the out op will too
        return None
    finally:
        if on_functional is not None:
            on_functional(None)
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [
        (str(t.dtype).removeprefix("torch."), _SPARSE_OUT_LAYOUTS.get(t.layout), () if t.is_nested else tuple(t.shape))
        if isinstance(t, torch.Tensor)
        else None
        for t in outs
    ]

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

import dataclasses
import functools
import importlib.util
import re
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from generators.case import TensorSpec
from generators.contracts import as_spec
from generators.strategies import draw_tensor
from generators.tensor import STRUCTURED_KINDS


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


# hint `caller = "autograd"`: the callers are the ops whose derivative formula calls the op
AUTOGRAD = "autograd"
_FORMULA_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


@functools.cache
def _derivatives() -> list[dict]:
    """The entries of PyTorch's derivatives.yaml (shipped in torchgen/packaged/autograd); [] where
    torchgen is not installed."""
    import yaml

    spec = importlib.util.find_spec("torchgen")
    path = Path(list(spec.submodule_search_locations)[0]) / "packaged/autograd/derivatives.yaml" if spec else None
    return yaml.safe_load(path.read_text()) if path is not None and path.exists() else []


_NOT_INPUTS = ("name", "output_differentiability", "dispatch", "result")


def differentiable_inputs(qualname: str) -> set[str] | None:
    """The argument names an op's derivative formula differentiates (a batch norm's input, weight
    and bias, not its running statistics), or None where derivatives.yaml has no entry."""
    for entry in _derivatives():
        forward = entry["name"].split("(", 1)[0]
        if f"aten::{forward}" in (qualname, qualname.removesuffix(".default")):
            # result0, result1: forward-mode formulas, not inputs
            names = {n.strip() for key in entry if key not in _NOT_INPUTS for n in key.split(",")}
            return {n for n in names if not re.fullmatch(r"result\d*", n)}
    return None


@functools.cache
def autograd_callers() -> dict[str, tuple[str, ...]]:
    """Internal op base name -> the ops (qualnames) whose derivative formula in PyTorch's
    derivatives.yaml calls it: the only way autograd reaches a backward kernel."""
    found: dict[str, list[str]] = {}

    def formulas(x):
        if isinstance(x, str):
            yield x
        elif isinstance(x, (dict, list)):
            for v in x.values() if isinstance(x, dict) else x:
                yield from formulas(v)

    for entry in _derivatives():
        forward = entry["name"].split("(", 1)[0]
        for key, value in entry.items():
            if key in ("name", "output_differentiability"):
                continue
            for text in formulas(value):
                for called in _FORMULA_CALL.findall(text):
                    names = found.setdefault(called.removesuffix("_symint"), [])
                    if f"aten::{forward}" not in names:
                        names.append(f"aten::{forward}")
    return {k: tuple(v) for k, v in found.items()}


def callers_of(op) -> list[str]:
    """The qualnames of the ops that call `op` (hint `caller`: one named, or "autograd": derived
    from the derivative formulas, less the op itself and those without a CPU kernel here)."""
    import opdb

    name = op.rules.hints["caller"]
    if name != AUTOGRAD:
        return [name]
    found = []
    for qualname in autograd_callers().get(op.base_name, ()):
        try:
            caller = opdb.lookup(qualname)
        except opdb.UnknownOpError:
            continue
        if caller.base_name != op.base_name and not (caller.rules and caller.rules.untestable):
            found.append(qualname)
    return found


# caller cases drawn before the op falls back to its own builder: a caller rejects some of its
# own drawn cases (softmax's half_to_float on the CPU, an embedding index out of range)
ATTEMPTS = 3


def from_caller(ctx, cases) -> bool:
    """Fill `ctx.fixed` with what the op's caller (hint `caller`) passes it, drawing the caller's
    case with `cases(op, cell, max_numel, builder)` (the schema's strategy); False (nothing
    filled) where the caller rejects its drawn cases or never calls the op for them."""
    names = callers_of(ctx.op)
    captured = None
    for _ in range(ATTEMPTS if names else 0):
        captured = _captured_once(ctx, cases, names)
        if captured is not None and not _out_form_refuses(ctx.op, captured[0][0]):
            break
        captured = None
    if captured is None:
        return False
    low, exact = captured
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
        elif isinstance(v, torch.dtype):  # a ScalarType, as a case stores one (generators.argtypes)
            ctx.fixed[name] = {"dtype": str(v).removeprefix("torch.")}
        else:
            ctx.fixed[name] = v
    first = next((v for v in ctx.fixed.values() if isinstance(v, TensorSpec)), None)
    if first is not None:
        ctx.shape = first.shape
    return True


def _out_form_refuses(op, call) -> bool:
    """An out= overload cannot take a call that masks an output off (output_mask False): the
    functional leaves that result undefined and the out= form refuses a defined out for it."""
    if not any(a.is_out for a in op.arguments):
        return False
    args, kwargs = call
    names = [a.name for a in op.arguments if not a.is_out]
    mask = {**dict(zip(names, args)), **kwargs}.get("output_mask")
    return isinstance(mask, (list, tuple)) and not all(mask)


def _captured_once(ctx, cases, names):
    """One caller (of `names`) and its case drawn, run in the case's dtype and in float64 under
    a capture of the op: (low, exact) as _run_caller returns them, or None."""
    import opdb
    from generators import families, memo

    caller = opdb.lookup(
        names[ctx.draw(memo.integers(0, len(names) - 1), label="caller")] if len(names) > 1 else names[0]
    )
    case = ctx.draw(
        cases(caller, ctx.cell, ctx.max_numel, families.builder_for(caller)), label=f"caller {caller.qualname}"
    )
    # sampling coordinates at infinity or NaN: the CPU's grid sampler segfaults or gives NaN there
    # (pytorch#24823), which the caller's own cell reports; the process drawing this kernel's case
    # would die with no case of its own to show, so the caller samples inside the input here. A
    # matrix's non-finite entry likewise (linalg_eigvals segfaults on it), and its NaNs would reach
    # this kernel as values, judged as values
    case = dataclasses.replace(case, args=_in_range(case.args), kwargs=_in_range(case.kwargs))
    case = _windows_meet_the_input(caller, case)
    packet = getattr(torch.ops.aten, ctx.op.base_name)
    try:
        args, kwargs = case.materialize(_same, torch.device("cpu"))
        low = _run_caller(caller, args, kwargs, packet, None, ctx)
        if low is None:
            return None
        exact = _run_caller(caller, args, kwargs, packet, torch.float64, ctx, grad=low[1])
    except (RuntimeError, NotImplementedError, TypeError, ValueError, IndexError):
        return None
    return None if exact is None else (low, exact)


def _in_range(v):
    """`v` (a case's args or kwargs) with each coordinate tensor's edge pattern and band dropped,
    and each structured matrix's non-finite entry."""
    if isinstance(v, TensorSpec) and v.values == "coordinate":
        return dataclasses.replace(v, edges=None, magnitude="")
    if isinstance(v, TensorSpec):
        return dataclasses.replace(v, edges=None) if v.values in STRUCTURED_KINDS else v
    if isinstance(v, tuple):
        return tuple(_in_range(x) for x in v)
    if isinstance(v, list):
        return [_in_range(x) for x in v]
    if isinstance(v, dict):
        return {k: _in_range(x) for k, x in v.items()}
    return v


def _windows_meet_the_input(caller, case):
    """A max pooling's case with dilation 1 where a window could lie in the padding alone (an input
    dim shorter than its dilation): the CPU kernel names a position past the input there and its
    backward writes through it, corrupting the heap of the process drawing this kernel's case. The
    caller's own cell reports that (an index outside the input, a death in its backward)."""
    if not re.fullmatch(r"max_pool[123]d(_with_indices)?", caller.base_name):
        return case
    names = [a.name for a in caller.arguments]
    bound = {**dict(zip(names, case.args)), **case.kwargs}
    x, dilation = bound.get("self"), bound.get("dilation")
    if not isinstance(x, TensorSpec) or not isinstance(dilation, (list, tuple)) or not dilation:
        return case
    k = int(caller.base_name[len("max_pool")])
    dilations = list(dilation) * k if len(dilation) == 1 else list(dilation)
    if len(x.shape) < k or all(n >= d for n, d in zip(x.shape[-k:], dilations)):
        return case
    ones = [1] * len(dilation)
    if "dilation" in case.kwargs:
        return dataclasses.replace(case, kwargs={**case.kwargs, "dilation": ones})
    i = names.index("dilation")
    return dataclasses.replace(case, args=(*case.args[:i], ones, *case.args[i + 1 :]))


def _layout_of(t: torch.Tensor) -> str:
    return "transposed" if t.dim() >= 2 and not t.is_contiguous() and t.mT.is_contiguous() else "contiguous"


def _run_caller(caller, args, kwargs, packet, dtype, ctx, grad=None):
    """Run `caller` forward and backward (with floating inputs cast to `dtype` when given) under
    a capture of `packet`: ((args, kwargs) of its call, the gradient used), or None."""

    wanted = differentiable_inputs(caller.qualname)

    def cast(name, x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x = x.detach().to(dtype) if dtype is not None else x.detach().clone()
            return x.requires_grad_(wanted is None or name in wanted)
        return x

    names = [a.name for a in caller.arguments]
    args = [cast(n, a) for n, a in zip(names, args)] + list(args[len(names) :])
    kwargs = {k: cast(k, v) for k, v in kwargs.items()}
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

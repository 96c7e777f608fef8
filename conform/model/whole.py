"""The whole model on the device, on the CPU and in float64, and the shadow pass naming the culprit.

One set of weights and inputs (a deep copy of the built model each time) runs one step on each
side: its floating outputs and, in training, every parameter's gradient are compared with the
float64 run. Each tensor's error is its largest difference from float64 over float64's largest
magnitude; the device's error is stated as a multiple of the CPU's own float32 error on the same
tensor. The model diverges where that multiple exceeds DIVERGENCE_FACTOR on any tensor (or the
device gives a non-finite value where float64 is finite).
"""

# When it diverges, the shadow pass runs the device step again under a dispatch mode that re-runs
# each op on its actual device inputs, copied to the CPU, in float64 and in float32. An op's local
# error is its device output's difference from that float64 result, so an error made upstream
# arrives as the op's input and is no longer its own: no cascade. The culprit is the first op whose
# local error exceeds both the op's float32 tolerance (conform.judge.tolerances, with the op's
# reduction size and scales) and SHADOW_FACTOR times the CPU float32 kernel's own local error.

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker

import opdb
from conform.errors import first_line
from conform.judge.tolerances import input_scales, tolerance_for
from conform.model.cases import to_case
from conform.model.spec import Built, floating_leaves, prepare, step
from conform.model.trace import Recorder, TracedCall, _encode, move_inputs, op_name
from conform.report.repro import repro_script

# the device's error may be this many times the CPU's float32 error before the model diverges
DIVERGENCE_FACTOR = 32.0
# an op's local error may be this many times the CPU float32 kernel's before it is the culprit
SHADOW_FACTOR = 16.0
# the smallest error a float32 result is granted: half an ulp of 1, relative
FLOAT32_FLOOR = 2.0**-24


@dataclass
class Step:
    """What one side's step produced, on the CPU: named floating tensors, or the error."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    error: str = ""
    failed_op: str = ""
    failed_module: str = ""
    seconds: float = 0.0


@dataclass
class Divergence:
    """The culprit op of a divergence, with its local errors (see the module docstring)."""

    op: str
    module: str
    phase: str
    call: str  # the call, with its arguments' metadata
    device_err: float
    cpu_err: float
    allowed: float  # the op's float32 tolerance at its largest violation, absolute
    case: dict | None = None
    repro: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "module": self.module,
            "phase": self.phase,
            "call": self.call,
            "errors": {"device": self.device_err, "cpu_float32": self.cpu_err, "allowed": self.allowed},
            "case": self.case,
        }


@dataclass
class Whole:
    """The whole-model comparison (and, on divergence, the culprit)."""

    errors: list[dict[str, Any]] = field(default_factory=list)  # per tensor: name, device, cpu, ratio
    ratio: float | None = None  # the largest device / CPU error multiple over all tensors
    diverges: bool = False
    divergence: Divergence | None = None
    unexplained: str = ""  # it diverges, and the shadow pass found no op to blame: why
    error: str = ""  # the device raised during its step
    failed_op: str = ""
    failed_module: str = ""
    device_step_s: float | None = None
    cpu_step_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        worst = sorted(self.errors, key=lambda e: -(e["ratio"] if e["ratio"] is not None else math.inf))[:10]
        return {
            "ratio": self.ratio,
            "diverges": self.diverges,
            "worst": worst,
            "tensors": len(self.errors),
            "error": self.error,
            "failed_op": self.failed_op,
            "failed_module": self.failed_module,
        }


def run_step(built: Built, device, dtype: torch.dtype, *, train: bool, to_cpu=None, sync=None, context=None) -> Step:
    """One step of a fresh copy of `built` on `device` in `dtype`; its outputs and gradients on the CPU.
    `context`: makes the device's context for a step (a backend's `device_context` hook)."""
    device = torch.device(device)
    to_cpu = to_cpu or (lambda t: t.to("cpu"))
    model = prepare(copy.deepcopy(built.model), train=train).to(device=device, dtype=dtype)
    args, kwargs = move_inputs((built.args, built.kwargs), device, dtype)
    out = Step()
    started = time.perf_counter()
    try:
        with _entered(context):
            output = step(model, args, kwargs, train=train)
        if sync is not None:
            sync()
    except Exception as e:  # noqa: BLE001 - a model that fails on the device is a verdict
        out.error = first_line(e, 300)
        if device.type != "cpu":
            out.failed_op, out.failed_module = _failing_op(built, device, dtype, train=train, context=context)
        return out
    out.seconds = time.perf_counter() - started
    for i, t in enumerate(floating_leaves(output)):
        out.tensors[f"output[{i}]"] = to_cpu(t.detach())
    if train:
        for name, p in model.named_parameters():
            if p.grad is not None:
                out.tensors[f"grad[{name}]"] = to_cpu(p.grad.detach())
    return out


def _failing_op(built: Built, device, dtype: torch.dtype, *, train: bool, context=None) -> tuple[str, str]:
    """(op, module path) of the ATen call a failing step raised in: the step again, under the
    recorder. Not in the timed step: the recorder's Python dispatch would be the device's time."""
    model = prepare(copy.deepcopy(built.model), train=train).to(device=device, dtype=dtype)
    args, kwargs = move_inputs((built.args, built.kwargs), device, dtype)
    tracker = ModuleTracker()
    recorder = Recorder(tracker, device.type)
    try:
        with tracker, _entered(context), recorder:
            step(model, args, kwargs, train=train)
    except Exception:  # noqa: BLE001 - the failure the first run met, now with its op named
        pass
    return recorder.failed or ("", "")


def _entered(context):
    """A fresh device context from `context` (a factory), or none."""
    made = context() if context is not None else None
    return made if made is not None else _null()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def relative_error(x: torch.Tensor, golden: torch.Tensor) -> float:
    """max |x - golden| over golden's largest finite magnitude; inf where x is not finite and golden is."""
    g = golden.double()
    a = x.double()
    if a.shape != g.shape:
        return math.inf
    finite = torch.isfinite(g)
    if bool((finite & ~torch.isfinite(a)).any()):
        return math.inf
    if not bool(finite.any()):
        return 0.0
    scale = float(g[finite].abs().max()) or 1.0
    return float((a[finite] - g[finite]).abs().max()) / scale


def compare_whole(
    built: Built, backend, *, train: bool, dtype: torch.dtype = torch.float32, shadow: bool = True
) -> Whole:
    """The whole model on `backend`, the CPU and float64 (see the module docstring)."""
    golden = run_step(built, "cpu", torch.float64, train=train)
    cpu = run_step(built, "cpu", dtype, train=train)
    whole = Whole(cpu_step_s=cpu.seconds)
    if golden.error or cpu.error:
        whole.error = f"the model does not run on the CPU: {golden.error or cpu.error}"
        return whole
    on_cpu = torch.device(backend.device).type == "cpu"
    if on_cpu:
        device = cpu
    else:
        device = run_step(
            built,
            backend.device,
            dtype,
            train=train,
            to_cpu=backend.to_cpu,
            sync=backend.synchronize,
            context=lambda: _device_context(backend),
        )
        if device.error:
            whole.error, whole.failed_op, whole.failed_module = device.error, device.failed_op, device.failed_module
            return whole
    whole.device_step_s = device.seconds
    for name, g in golden.tensors.items():
        c = cpu.tensors.get(name)
        d = device.tensors.get(name)
        if c is None or d is None:
            continue
        ce, de = relative_error(c, g), relative_error(d, g)
        ratio = de / max(ce, FLOAT32_FLOOR) if math.isfinite(de) else math.inf
        whole.errors.append({"name": name, "device": de, "cpu": ce, "ratio": ratio})
    whole.ratio = max((e["ratio"] for e in whole.errors), default=None)
    whole.diverges = not on_cpu and whole.ratio is not None and whole.ratio > DIVERGENCE_FACTOR
    if whole.diverges and shadow:
        whole.divergence = shadow_pass(built, backend, train=train, dtype=dtype)
        if whole.divergence is None:
            whole.unexplained = (
                "no single op's local error exceeds what float32 explains: the error builds up over many ops"
            )
    return whole


def _device_context(backend):
    hook = getattr(backend, "device_context", None)
    return hook() if callable(hook) else None


# -- the shadow pass --------------------------------------------------------------------------


def _skipped(func) -> bool:
    """Ops whose output is not a function of their inputs' values (random, uninitialised)."""

    tags = getattr(func, "tags", ()) or ()
    if torch.Tag.nondeterministic_seeded in tags:
        return True
    try:
        rules = opdb.lookup(op_name(func)).rules
    except Exception:  # noqa: BLE001 - an op opdb does not know is still shadowed
        return False
    return rules.nondeterminism in ("seeded", "uninitialized")


def _upcast(v, to_cpu):
    if isinstance(v, torch.Tensor):
        t = to_cpu(v.detach())
        return t.double() if t.dtype in (torch.float32, torch.float16, torch.bfloat16) else t.clone()
    if isinstance(v, torch.dtype) and v in (torch.float32, torch.float16, torch.bfloat16):
        return torch.float64
    return v


def _local(func, args, kwargs, to_cpu, upcast: bool):
    conv = (
        (lambda v: _upcast(v, to_cpu))
        if upcast
        else (lambda v: to_cpu(v.detach()).clone() if isinstance(v, torch.Tensor) else v)
    )
    a, k = pytree.tree_map(conv, (args, kwargs))
    return func(*a, **k), (a, k)


class Shadow(TorchDispatchMode):
    """Re-runs each device op on the CPU in float64 and float32, and stops at the first culprit."""

    def __init__(self, tracker: ModuleTracker, backend):
        super().__init__()
        self.tracker = tracker
        self.backend = backend
        self.device_type = torch.device(backend.device).type
        self.found: Divergence | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        if self.found is not None or not name.startswith("aten::") or _skipped(func):
            return func(*args, **kwargs)
        on_device = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        if not any(t.device.type == self.device_type for t in on_device):
            return func(*args, **kwargs)
        to_cpu = self.backend.to_cpu
        try:
            golden, _ = _local(func, args, kwargs, to_cpu, upcast=True)
            cpu32, (cpu_args, cpu_kwargs) = _local(func, args, kwargs, to_cpu, upcast=False)
        except Exception:  # noqa: BLE001 - the CPU cannot run it: nothing to hold the device against
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        self._judge(func, name, args, kwargs, out, cpu32, golden, cpu_args, cpu_kwargs)
        return out

    def _judge(self, func, name, args, kwargs, out, cpu32, golden, cpu_args, cpu_kwargs):

        leaves = [
            (d, c, g)
            for d, c, g in zip(pytree.tree_leaves(out), pytree.tree_leaves(cpu32), pytree.tree_leaves(golden))
            if isinstance(d, torch.Tensor) and d.is_floating_point() and isinstance(g, torch.Tensor)
        ]
        if not leaves:
            return
        try:
            spec = opdb.lookup(name)
        except Exception:  # noqa: BLE001
            spec = None
        in_numel = max(
            [t.numel() for t in pytree.tree_leaves((cpu_args, cpu_kwargs)) if isinstance(t, torch.Tensor)] or [1]
        )
        first, second = input_scales((cpu_args, cpu_kwargs))
        for d, c, g in leaves:
            dev = self.backend.to_cpu(d.detach()).double()
            g64, c64 = g.double(), c.double()
            if dev.shape != g64.shape:
                continue
            reduction = max(1, in_numel // max(1, g64.numel()))
            finite = torch.isfinite(g64)
            scale = float(g64[finite].abs().max()) if bool(finite.any()) else 0.0
            rtol, atol = tolerance_for(
                spec,
                torch.float32,
                reduction_size=reduction,
                input_scale=first,
                second_scale=second,
                output_scale=scale,
            )
            diff = (dev - g64).abs()
            allowed = atol + rtol * g64.abs()
            bad_special = finite & ~torch.isfinite(dev) & torch.isfinite(c64)
            device_err = float(diff[finite].max()) if bool(finite.any()) else 0.0
            cpu_err = float((c64 - g64).abs()[finite].max()) if bool(finite.any()) else 0.0
            over = finite & (diff > allowed)
            if bool(bad_special.any()) or (
                bool(over.any()) and device_err > SHADOW_FACTOR * max(cpu_err, FLOAT32_FLOOR * scale)
            ):
                self.found = self._divergence(
                    func, name, args, kwargs, device_err, cpu_err, float(allowed[finite].max())
                )
                return

    def _divergence(self, func, name, args, kwargs, device_err, cpu_err, allowed) -> Divergence:

        tensors: list[torch.Tensor] = []
        enc_args = tuple(_encode(a, self.device_type, tensors) for a in args)
        enc_kwargs = {k: _encode(v, self.device_type, tensors) for k, v in kwargs.items()}
        parents = [p for p in self.tracker.parents if p != "Global"]
        call = TracedCall(
            name, enc_args, enc_kwargs, calls=1, module=max(parents, key=lambda p: p.count("."), default="")
        )
        call.phase = "backward" if self.tracker.is_bw else "forward"
        div = Divergence(name, call.module, call.phase, call.describe(), device_err, cpu_err, allowed)
        try:
            spec = opdb.lookup(name)
            case = to_case(call, spec)
            div.case = case.to_json()
            div.repro = repro_script(spec, case, self.backend.name)
        except Exception:  # noqa: BLE001 - the culprit stands without its script
            pass
        return div


def shadow_pass(built: Built, backend, *, train: bool, dtype: torch.dtype = torch.float32) -> Divergence | None:
    """The first op of a device step whose local error float32 cannot explain, or None."""
    device = torch.device(backend.device)
    model = prepare(copy.deepcopy(built.model), train=train).to(device=device, dtype=dtype)
    args, kwargs = move_inputs((built.args, built.kwargs), device, dtype)
    tracker = ModuleTracker()
    ctx = _device_context(backend)
    with tracker, ctx if ctx is not None else _null():
        shadow = Shadow(tracker, backend)
        try:
            with shadow:
                step(model, args, kwargs, train=train)
        except Exception:  # noqa: BLE001 - the culprit found before an error still stands
            pass
    return shadow.found

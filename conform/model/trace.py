"""What a model dispatches, forward and backward: metadata only.

`Recorder` is a TorchDispatchMode that sees every ATen call below autograd and keeps, per
distinct call, the overload, its arguments with each tensor replaced by a `TensorMeta` (shape,
dtype, strides with size-1 dimensions canonicalised, storage offset), the number of calls, the
module path (torch.utils.module_tracker) and phase of its first call, and the value range of its
integer tensors (indices, targets). It holds no tensor: a reference kept to an output would change
what autograd saves and frees, and so what it dispatches.
"""

# Where: on the device under test when there is one (the CPU and a device may dispatch different
# ops); on the CPU under FakeTensorMode where the model builds and runs there (nothing computed),
# else on real CPU tensors. Under FakeTensorMode no values exist: integer ranges stay unknown and
# cases draw indices below every size of the call's other tensors (conform.model.cases).

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker

from conform.errors import first_line
from conform.model.spec import Built, prepare, step


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...]
    storage_offset: int = 0

    @property
    def contiguous(self) -> bool:
        return self.stride == contiguous_stride(self.shape) and self.storage_offset == 0

    def __repr__(self) -> str:
        extra = (
            ""
            if self.contiguous
            else f", {list(self.stride)}" + (f"+{self.storage_offset}" if self.storage_offset else "")
        )
        return f"T({list(self.shape)}, {self.dtype}{extra})"


def contiguous_stride(shape) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def canonical_stride(shape, stride) -> tuple[int, ...]:
    """`stride` with the stride of every size-1 dimension (which no element steps along) replaced
    by the contiguous one: two tensors that differ only there are laid out alike."""
    if any(n == 0 for n in shape):
        return contiguous_stride(shape)
    plain = contiguous_stride(shape)
    return tuple(p if n == 1 else s for n, s, p in zip(shape, stride, plain))


def meta_of(t: torch.Tensor) -> TensorMeta:
    shape = tuple(int(n) for n in t.shape)
    if t.layout != torch.strided:
        return TensorMeta(shape, str(t.dtype).removeprefix("torch."), contiguous_stride(shape))
    return TensorMeta(
        shape,
        str(t.dtype).removeprefix("torch."),
        canonical_stride(shape, tuple(int(s) for s in t.stride())),
        int(t.storage_offset()),
    )


@dataclass
class TracedCall:
    """One distinct call: an overload with its arguments' metadata, and how often it was made."""

    op: str  # "aten::add.Tensor"
    args: tuple
    kwargs: dict[str, Any]
    calls: int = 0
    module: str = ""  # module path of the first call ("ResNet.layer1.0.conv1"), "" outside any module
    phase: str = "forward"  # of the first call: "forward" | "backward"
    # integer tensors' value ranges (lo, hi), by their place in the flattened arguments; None: unknown
    int_ranges: dict[int, tuple[int, int] | None] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return call_key(self.op, self.args, self.kwargs)

    def describe(self) -> str:
        parts = [_show(a) for a in self.args] + [f"{k}={_show(v)}" for k, v in self.kwargs.items()]
        return f"{self.op.split('::', 1)[-1]}({', '.join(parts)})"


def _show(v) -> str:
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_show(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    return repr(v)


def call_key(op: str, args, kwargs) -> str:
    return f"{op}|{args!r}|{sorted(kwargs.items())!r}"


@dataclass
class Trace:
    """A model's distinct calls in the order first made, with where and how it was traced."""

    calls: list[TracedCall] = field(default_factory=list)
    where: str = ""  # "emu", "cpu (fake tensors)", "cpu"
    seconds: float = 0.0
    error: str = ""  # the model raised while traced (on the device): first line
    failed_op: str = ""  # the op in flight when it raised
    failed_module: str = ""

    @property
    def total_calls(self) -> int:
        return sum(c.calls for c in self.calls)

    def ops(self) -> dict[str, list[TracedCall]]:
        out: dict[str, list[TracedCall]] = {}
        for c in self.calls:
            out.setdefault(c.op, []).append(c)
        return out


def op_name(func) -> str:
    schema = func._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def _encode(v, device_type: str, tensors: list):
    """A call's argument with tensors as TensorMeta and torch enums as conform's Case tags."""
    if isinstance(v, torch.Tensor):
        tensors.append(v)
        return meta_of(v)
    if isinstance(v, (list, tuple)):
        enc = [_encode(x, device_type, tensors) for x in v]
        return enc if isinstance(v, list) else tuple(enc)
    if isinstance(v, torch.dtype):
        return {"dtype": str(v).removeprefix("torch.")}
    if isinstance(v, torch.device):
        return {"device": "target" if v.type == device_type or v.type != "cpu" else "cpu"}
    if isinstance(v, torch.layout):
        return {"layout": str(v).removeprefix("torch.")}
    if isinstance(v, torch.memory_format):
        return {"memory_format": str(v).removeprefix("torch.")}
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return int(v) if isinstance(v, torch.SymInt) else float(v) if isinstance(v, torch.SymFloat) else bool(v)
    return v


def _value_range(t: torch.Tensor) -> tuple[int, int] | None:
    # here, not at the top: fake tensors are only needed when a model is traced without data
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(t, FakeTensor) or t.device.type == "meta" or t.numel() == 0:
        return None
    # read on a CPU copy: a device without a min kernel of the dtype must not fail the model for
    # the recorder's own bookkeeping (nor fall back to the CPU for it)
    t = t.detach().to("cpu")
    return int(t.min()), int(t.max())


class Recorder(TorchDispatchMode):
    """Records the distinct ATen calls made while active (see the module docstring)."""

    def __init__(self, tracker: ModuleTracker, device_type: str = "cpu"):
        super().__init__()
        self.tracker = tracker
        self.device_type = device_type
        self.calls: dict[str, TracedCall] = {}
        self.failed: tuple[str, str] | None = None

    def module(self) -> str:
        parents = [p for p in self.tracker.parents if p != "Global"]
        return max(parents, key=lambda p: p.count("."), default="")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        if not name.startswith("aten::"):
            return func(*args, **kwargs)
        tensors: list[torch.Tensor] = []
        enc_args = tuple(_encode(a, self.device_type, tensors) for a in args)
        enc_kwargs = {k: _encode(v, self.device_type, tensors) for k, v in kwargs.items()}
        key = call_key(name, enc_args, enc_kwargs)
        call = self.calls.get(key)
        if call is None:
            call = TracedCall(
                name, enc_args, enc_kwargs, module=self.module(), phase="backward" if self.tracker.is_bw else "forward"
            )
            self.calls[key] = call
        call.calls += 1
        for i, t in enumerate(tensors):
            if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
                continue
            got = _value_range(t)
            was = call.int_ranges.get(i, got)
            call.int_ranges[i] = None if got is None or was is None else (min(was[0], got[0]), max(was[1], got[1]))
        try:
            return func(*args, **kwargs)
        except Exception:
            if self.failed is None:
                self.failed = (name, self.module())
            raise


def trace_on(
    built: Built,
    device: torch.device | str,
    *,
    train: bool,
    dtype: torch.dtype = torch.float32,
    fake: bool = False,
    builder: Callable[[], Built] | None = None,
) -> Trace:
    """Trace one step of `built` (a fresh copy of its model) on `device`. `fake`: under
    FakeTensorMode, the model built there by `builder` when given (nothing computed, no weights
    allocated), else `built`'s weights made fake."""
    device = torch.device(device)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if fake:
            # here, not at the top: fake tensors are only needed when a model is traced without data
            from torch._subclasses.fake_tensor import FakeTensorMode

            mode = stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
            if builder is not None and dtype == torch.float32:  # models are built in float32
                built = builder()
                model = prepare(built.model, train=train)
            else:
                model = _to_fake(prepare(copy.deepcopy(built.model), train=train).to(dtype=dtype), mode)
        else:
            model = prepare(copy.deepcopy(built.model), train=train).to(device=device, dtype=dtype)
        args, kwargs = move_inputs((built.args, built.kwargs), device, dtype)
        tracker = stack.enter_context(ModuleTracker())
        recorder = Recorder(tracker, device.type)
        trace = Trace(where=f"{device.type}{' (fake tensors)' if fake else ''}")
        try:
            with recorder:
                step(model, args, kwargs, train=train)
        except Exception as e:  # noqa: BLE001 - a model that fails on the device is a verdict
            if fake:
                raise
            trace.error = first_line(e, 300)
            trace.failed_op, trace.failed_module = recorder.failed or ("", "")
    trace.calls = list(recorder.calls.values())
    trace.seconds = time.perf_counter() - started
    return trace


def _to_fake(model: torch.nn.Module, mode) -> torch.nn.Module:
    """`model` with every parameter and buffer a fake tensor of `mode`."""
    for m in model.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                m._parameters[name] = torch.nn.Parameter(mode.from_tensor(p.detach()), requires_grad=p.requires_grad)
        for name, b in list(m._buffers.items()):
            if b is not None:
                m._buffers[name] = mode.from_tensor(b)
    return model


def move_inputs(inputs, device: torch.device, dtype: torch.dtype):
    """(args, kwargs) with every tensor on `device`, floating ones in `dtype`."""

    def move(v):
        if isinstance(v, torch.Tensor):
            return v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype)
        if isinstance(v, (list, tuple)):
            return type(v)(move(x) for x in v)
        if isinstance(v, dict):
            return {k: move(x) for k, x in v.items()}
        return v

    args, kwargs = inputs
    return move(args), move(kwargs)


def trace_model(
    built: Built,
    backend,
    *,
    train: bool,
    dtype: torch.dtype = torch.float32,
    builder: Callable[[], Built] | None = None,
) -> Trace:
    """The model's trace: on the device when it is one (its ground truth), else on the CPU under
    FakeTensorMode where the model builds (`builder`) and runs there, else on real CPU tensors.
    A device run that raises keeps its error; the calls are then those of a CPU trace, so that
    every op is still judged."""
    device = torch.device(backend.device)
    if device.type != "cpu":
        on_device = trace_on(built, device, train=train, dtype=dtype)
        if not on_device.error:
            on_device.where = backend.name
            return on_device
        cpu = trace_on(built, "cpu", train=train, dtype=dtype)
        cpu.error, cpu.failed_op, cpu.failed_module = on_device.error, on_device.failed_op, on_device.failed_module
        cpu.where = f"cpu (the model raised on {backend.name})"
        return cpu
    try:
        return trace_on(built, "cpu", train=train, dtype=dtype, fake=True, builder=builder)
    except Exception:  # noqa: BLE001 - data-dependent control flow, an op without a fake kernel
        return trace_on(built, "cpu", train=train, dtype=dtype)

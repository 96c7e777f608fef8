"""Which aten ops a case ran through the device's fallback, read from the dispatcher."""

# Warnings cannot tell: on the ``torch.ops`` path C++ warnings (the MPS fallback's TORCH_WARN_ONCE
# among them) go to stderr and never become Python warnings. The dispatcher knows instead. While a
# case runs on the device, `FallbackTrace` (a TorchDispatchMode) sees every aten op that reaches
# the backend keys, and asks the operator's dispatch table what serves the device's key:
#
# * a kernel registered for the key itself (``_dispatch_has_kernel_for_dispatch_key``): native;
# * a composite kernel (CompositeExplicitAutograd(NonFunctional), or CompositeImplicitAutograd
#   for an op called from below autograd), which every backend shares and which calls other ops
#   (``erfinv`` calls ``erfinv.out``): the trace runs that kernel itself, with the trace active,
#   so that the ops it calls are classified too;
# * otherwise the key's backend fallback (``_dispatch_has_backend_fallback``), e.g. MPS's
#   ``PYTORCH_ENABLE_MPS_FALLBACK`` CPU fallback, or PrivateUse1's: fallback.
#
# Precedence as in c10/core/dispatch/OperatorEntry.cpp (computeDispatchTableEntryWithDebug):
# direct kernel, then CompositeExplicitAutogradNonFunctional, CompositeExplicitAutograd,
# CompositeImplicitAutograd, then the backend fallback.
# ``_dispatch_has_computed_kernel_for_dispatch_key`` cannot tell them apart: a slot filled by the
# backend fallback is a valid computed kernel too.
#
# Some backends register the fallback function itself as the kernel of a few ops (MPSFallback.mm:
# ``linalg_svd``, ``col2im``, ...): a backend lists those in ``always_fallback_ops``.
#
# The autograd engine runs a device's backward on its own thread and carries the dispatch-mode
# state there with the rest of the thread-local state, so backward ops are seen as well.

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# in OperatorEntry's order of precedence; an implicit composite reaches a backend key when it is
# called from below autograd (linspace.Tensor_Tensor's kernel calling item())
_COMPOSITE_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def dispatch_key_for(device: torch.device | str) -> str:
    """The backend dispatch key of a device type: "MPS", "CUDA", "XPU", "PrivateUse1", "Meta"."""
    return torch._C._dispatch_key_for_device(torch.device(device).type)


@functools.cache
def kernel_kind(op_name: str, key: str) -> str:
    """How `op_name` ("aten::erfinv.out") is served for dispatch key `key`: "kernel",
    "composite" (a kernel shared by all backends), "fallback" or "missing"."""
    if torch._C._dispatch_has_kernel_for_dispatch_key(op_name, key):
        return "kernel"
    for composite in _COMPOSITE_KEYS:
        if torch._C._dispatch_has_kernel_for_dispatch_key(op_name, composite):
            return "composite"
    if torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)):
        return "fallback"
    return "missing"


def _schema_name(func) -> str:
    schema = func._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


class FallbackTrace(TorchDispatchMode):
    """Records the aten ops (as "aten::name.overload") that reached `device`'s backend fallback."""

    def __init__(self, device, *, always_fallback=()):
        super().__init__()
        self.device_type = torch.device(device).type
        self.key = dispatch_key_for(device)
        self.always_fallback = frozenset(always_fallback)
        self.fallback: list[str] = []
        self._running: set = set()  # composite kernels being run by the trace (see below)

    def _on_device(self, args, kwargs) -> bool:
        device_type = self.device_type
        for v in torch.utils._pytree.tree_leaves((args, kwargs)):
            if isinstance(v, torch.Tensor):
                if v.device.type == device_type:
                    return True
            elif isinstance(v, torch.device) and v.type == device_type:
                return True
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._on_device(args, kwargs):
            return func(*args, **kwargs)
        name = _schema_name(func)
        kind = kernel_kind(name, self.key)
        if kind == "kernel" and name in self.always_fallback:
            kind = "fallback"
        if kind == "fallback":
            # recorded once the fallback returned: a fallback that raises (MPS's without
            # PYTORCH_ENABLE_MPS_FALLBACK) is a missing kernel, and its error says so
            out = func(*args, **kwargs)
            if name not in self.fallback:
                self.fallback.append(name)
            return out
        if kind == "composite" and func not in self._running:
            # run the shared kernel here, with the trace active, so that the ops it calls are
            # seen; a kernel that calls its own op again (detach) runs untraced the second time
            kernel = torch._C._dispatch_get_computed_kernel_for_dispatch_key(name, self.key)
            self._running.add(func)
            try:
                with self:
                    return kernel.call_boxed(
                        torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, self.key)), *args, **kwargs
                    )
            finally:
                self._running.discard(func)
        return func(*args, **kwargs)


def tracer_for(backend):
    """A FallbackTrace for `backend`, or None where nothing can fall back: the CPU, and keys with
    no backend fallback registered (CUDA, Meta), so that their sweeps pay nothing for it."""
    device = torch.device(backend.device)
    # metadata-only devices (meta) compute nothing, so nothing of theirs can run on the CPU instead
    if device.type == "cpu" or getattr(backend, "metadata_only", False):
        return None
    always = tuple(getattr(backend, "always_fallback_ops", ()) or ())
    if not always and not torch._C._dispatch_has_backend_fallback(
        getattr(torch._C.DispatchKey, dispatch_key_for(device))
    ):
        return None
    return FallbackTrace(device, always_fallback=always)


def fallback_message(ops: list[str]) -> str:
    shown = ", ".join(f"'aten::{o}'" if not o.startswith("aten::") else f"'{o}'" for o in ops[:5])
    more = f" and {len(ops) - 5} more" if len(ops) > 5 else ""
    return f"ran through the CPU fallback: {shown}{more}"

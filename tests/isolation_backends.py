"""Python stand-ins for the device constraints process isolation must respect:
a runtime that does not survive fork(), a sticky error that poisons the device context, and a
device that cannot start in a child at all. Used through `--device isolation_backends:NAME`
(tests/ on PYTHONPATH). Each is the CPU, with the constraint around the device side only.
"""

from __future__ import annotations

import multiprocessing
import os

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from conform.backends import CPUBackend
from durability_backends import _Trap

# -- a runtime that does not survive fork() --------------------------------------------------

_RUNTIME = {"initialised_in": None, "bad_fork": False}


def _forked_child() -> None:
    # like torch/csrc/cuda/Module.cpp and torch/csrc/mps/Module.cpp: a pthread_atfork child
    # handler, registered at initialisation, marks every later fork's child as a bad fork
    _RUNTIME["bad_fork"] = True


def _init_runtime() -> None:
    if _RUNTIME["bad_fork"]:
        # torch/cuda/__init__.py _lazy_init's words
        raise RuntimeError(
            "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method"
        )
    if _RUNTIME["initialised_in"] is None:
        _RUNTIME["initialised_in"] = os.getpid()
        os.register_at_fork(after_in_child=_forked_child)


class ForkPoisonedBackend(CPUBackend):
    """Initialised by is_available() (as MPS's is, which creates the Metal device); unusable in a
    child forked after that."""

    name = "forkpoisoned"

    def is_available(self) -> bool:
        _init_runtime()
        return True

    def to_device(self, t):
        _init_runtime()
        return super().to_device(t)

    def device_context(self):
        _init_runtime()
        return _Trap({})


# -- a sticky error ----------------------------------------------------------------------------

ASSERT = "CUDA error: device-side assert triggered"
_STICKY = {"on": False}


def _assert():
    _STICKY["on"] = True
    raise RuntimeError(ASSERT)


class _StickyTrap(_Trap):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _STICKY["on"]:
            raise RuntimeError(ASSERT)
        return super().__torch_dispatch__(func, types, args, kwargs)


class StickyBackend(CPUBackend):
    """aten::abs trips a device-side assert; from then on every device call in the process fails
    with it, synchronize() included, as on CUDA."""

    name = "sticky"
    sticky_error_patterns = ("device-side assert triggered",)

    def device_context(self):
        return _StickyTrap({"aten::abs": _assert})

    def synchronize(self) -> None:
        if _STICKY["on"]:
            raise RuntimeError(ASSERT)


# -- a device that cannot start in a child -------------------------------------------------------


class DiesInChildrenBackend(CPUBackend):
    """Fine in the process that resolves it, but its initialisation kills any multiprocessing
    child: every failure then is isolation's, none is an op's."""

    name = "dies-in-children"

    def is_available(self) -> bool:
        if multiprocessing.parent_process() is not None:
            os.abort()
        return True


# -- the emulated accelerator, with two faults ----------------------------------------------------


def _emulated():
    from conform.backends import emulated

    return emulated


class EmuWithFaults(_emulated().EmulatedBackend):
    """The emulated device (real fork poisoning, real sticky asserts), where aten::abs trips a
    device-side assert and the isolated aten::_cummax_helper aborts the process."""

    name = "emu-faults"

    def device_context(self):
        return _Trap({"aten::abs": _emulated().trigger_device_assert, "aten::_cummax_helper": os.abort})


# -- a device whose integer division is right where the CPU's traps ---------------------------------


class _TruncWithoutTrap(TorchDispatchMode):
    """aten::div.Tensor_mode with rounding_mode="trunc" on integers: INT_MIN / -1 wraps to
    INT_MIN, as an accelerator's integer divide does, where the CPU kernel's x86 idiv raises
    SIGFPE (pytorch#138425)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        a, b = (args + (None, None))[:2]
        if (
            func is torch.ops.aten.div.Tensor_mode
            and kwargs.get("rounding_mode") == "trunc"
            and isinstance(b, torch.Tensor)
            and not a.is_floating_point()
            and bool((b == -1).any())
        ):
            minus_one = b == -1
            return torch.where(minus_one, -a, func(a, torch.where(minus_one, torch.ones_like(b), b), **kwargs))
        return func(*args, **kwargs)


class TruncSafeBackend(CPUBackend):
    """The CPU, but its integer trunc division never traps: a device that equals the CPU except
    where the CPU reference itself kills the process."""

    name = "trunc-safe"

    def device_context(self):
        return _TruncWithoutTrap()


# -- what a clean child starts with ------------------------------------------------------------


def warmth_setup():
    """A clean child's handler: which first-use costs its fork server already paid."""
    import sys

    def warmth(_request):
        from generators import capture

        return {"dynamo": "torch._dynamo" in sys.modules, "derivatives": capture._derivatives.cache_info().currsize > 0}

    return warmth


# -- a kernel that dies writing through an out='s strides -----------------------------------------


class _AbortOnStridedOut(TorchDispatchMode):
    """aten::abs.out aborts the process when its out is not contiguous, as uint8 bilinear
    upsampling into a transposed out segfaults in torch 2.13's CPU kernel."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = kwargs.get("out")
        if func is torch.ops.aten.abs.out and isinstance(out, torch.Tensor) and not out.is_contiguous():
            os.abort()
        return func(*args, **kwargs)


class StridedOutAbortBackend(CPUBackend):
    """The CPU, but abs.out dies on a non-contiguous out."""

    name = "strided-out-abort"

    def device_context(self):
        return _AbortOnStridedOut()

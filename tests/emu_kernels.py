"""The emulated accelerator with a native gelu: the verdict rule end to end on a real device.

`conform.backends.emulated` has no gelu kernel: gelu reaches its fallback. Here gelu and
gelu_backward get kernels registered for the device's own dispatch key (PrivateUse1), as an
out-of-tree backend registers its kernels, so the dispatcher sees native kernels and the cell is
judged on its values. Which values depends on the backend (its `device_context` picks the
kernel's flavour while conform runs the device side):

* `EmuCPUGelu`: the CPU kernel on a CPU alias of the device's memory, bit for bit the reference.
  The CPU's vectorised float32 gelu gives NaN for +-inf (golden: inf, 0): parity must pass it,
  with the CPU's deviation stored as a reference finding.
* `EmuExactGelu`: computed in float64 and rounded, right where the CPU is wrong: golden must
  side with the device ("CPU reference is wrong here").
* `EmuOffGelu`: the CPU's result plus 0.5: far from the CPU and from golden, a failure.

Registered with torch.library on import (openreg registers its Python kernels the same way:
test/cpp_extensions/open_registration_extension); the registration lives as long as `_LIB`.
"""

from __future__ import annotations

import contextlib

import torch

from conform.backends.emulated import EmulatedBackend

_flavour = {"now": "cpu"}


def _alias(t):
    """A CPU tensor with `t`'s storage, offset and strides (emu.cpp's native kernels compute on
    CPU aliases of the device's memory): a contiguous copy would put the CPU kernel's vectorised
    body and scalar tail elsewhere, and the device would no longer be the reference bit for bit."""
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage().cpu(), t.storage_offset(), t.size(), t.stride())


def _on_cpu(kernel, *tensors, **kwargs):
    device = tensors[0].device
    flavour = _flavour["now"]
    cpu = [_alias(t) for t in tensors]
    if flavour == "exact":
        out = kernel(*(t.double() for t in cpu), **kwargs).to(tensors[0].dtype)
    else:
        out = kernel(*cpu, **kwargs)
        if flavour == "off" and kernel is torch.ops.aten.gelu.default:
            out = out + 0.5
    return out.to(device)


def _gelu(x, approximate="none"):
    return _on_cpu(torch.ops.aten.gelu.default, x, approximate=approximate)


def _gelu_backward(grad, x, approximate="none"):
    return _on_cpu(torch.ops.aten.gelu_backward.default, grad, x, approximate=approximate)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("gelu", _gelu, "PrivateUse1")
_LIB.impl("gelu_backward", _gelu_backward, "PrivateUse1")


class _EmuGelu(EmulatedBackend):
    flavour = "cpu"

    @contextlib.contextmanager
    def device_context(self):
        before, _flavour["now"] = _flavour["now"], self.flavour
        try:
            yield
        finally:
            _flavour["now"] = before


class EmuCPUGelu(_EmuGelu):
    flavour = "cpu"


class EmuExactGelu(_EmuGelu):
    flavour = "exact"


class EmuOffGelu(_EmuGelu):
    flavour = "off"

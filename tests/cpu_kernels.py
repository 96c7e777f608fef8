"""A backend whose kernels are exactly the CPU's: every ATen call passes through a dispatch mode
to the CPU kernel and its result is returned untouched.

It is what an accelerator looks like to conform's oracle (any backend but the plain CPU is held
to parity with the CPU reference), with results that are the reference's bit for bit: every
alarm it raises is either caused by the reference (a false alarm: the verdict rule forbids them)
or a real bug of a CPU kernel reached through the device's path. `--device tests.cpu_kernels:CPUKernels`.
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

from conform.backends import CPUBackend


class _PassThrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class CPUKernels(CPUBackend):
    name = "cpu-kernels"

    def device_context(self):
        return _PassThrough()

"""Backends that misbehave the way young device backends do: abort the process, hang, crawl.

Used by test_durability.py through `--device durability_backends:NAME` (tests/ on PYTHONPATH).
Each is the CPU with a dispatch-mode trap entered around the device side only (the
`device_context` hook), so the reference side is never affected.
"""

from __future__ import annotations

import os
import time

from torch.utils._python_dispatch import TorchDispatchMode

from conform.backends import CPUBackend


class _Trap(TorchDispatchMode):
    def __init__(self, actions):
        super().__init__()
        self.actions = actions  # "aten::abs" (default overload) -> callable

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        action = self.actions.get(str(func._schema.name) if func._overloadname == "default" else "")
        if action is not None:
            action()
        return func(*args, **(kwargs or {}))


def _hang():
    while True:  # a kernel that never returns
        time.sleep(3600)


class TrapBackend(CPUBackend):
    """aten::abs aborts the process (like a Metal assertion); aten::neg hangs forever."""

    name = "trap"

    def device_context(self):
        return _Trap({"aten::abs": os.abort, "aten::neg": _hang})


class SlowBackend(CPUBackend):
    """Every device-side op takes a while: a sweep long enough to be killed part-way."""

    name = "slow"

    def device_context(self):
        return _Trap(
            {
                "aten::sin": lambda: time.sleep(0.3),
                "aten::cos": lambda: time.sleep(0.3),
                "aten::relu": lambda: time.sleep(0.3),
            }
        )


class AbortsInIsolatedOpBackend(CPUBackend):
    """aten::_cummax_helper aborts the process: an op opdb lists as process-killing (isolate)."""

    name = "trap-isolated"

    def device_context(self):
        return _Trap({"aten::_cummax_helper": os.abort})

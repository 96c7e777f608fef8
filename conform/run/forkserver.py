"""Imported once by conform's fork server (conform.run.isolation), never elsewhere: every clean child
is a fork of that server, so what is loaded and warmed here is loaded and warm in each child.

The warm-up runs on the CPU alone and with one intra-op thread (an OpenMP pool started before
fork() does not work in the child); the server must never initialise a device, or its children
would inherit a device runtime that does not survive fork() (see conform.run.isolation). It checks.
Nor does it run a backward: the autograd engine's first backward starts its device threads,
sized by every registered device type's device count (on a CUDA build that queries the driver),
and marks forked children as bad forks for device backwards (torch/csrc/autograd/engine.cpp,
start_device_threads and track_bad_autograd_forks); an out-of-tree device registered later
would get no queue at all ("device_ready_queues_.size() INTERNAL ASSERT FAILED").
"""

import os

import torch

torch.set_num_threads(1)

import hypothesis  # noqa: E402, F401
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import opdb  # noqa: E402
from conform import backends  # noqa: E402
from conform.backends import CPUBackend  # noqa: E402
from conform.run import cell, execute, isolation  # noqa: E402, F401
from generators import capture  # noqa: E402
from generators.case import Case, TensorSpec  # noqa: E402


def _warm_up() -> None:
    """Pay the first-call costs (the catalog, dispatcher caches, hypothesis's first test: it
    registers its random generators and collects garbage, half a second) once; and the first
    forward-mode derivative's import (torch/_decomp/decompositions_for_jvp.py scripts its
    decompositions with TorchScript when first imported: a quarter of a second each process paid
    at its first jvp, an import only, no autograd engine)."""
    import torch._decomp.decompositions_for_jvp  # noqa: F401 - imported for its side effect, here only

    op = opdb.lookup("aten::add.Tensor")
    x = TensorSpec(shape=(2, 3), dtype="float32")
    execute.run_case(op, Case(op=op.qualname, args=(x, x)), CPUBackend(), grad=False)
    cell.run_cell(op, "float32", CPUBackend(), cell.CellSettings(examples=1, grad=False, hypothesis_db=None))


def _preload_backend() -> None:
    """For a device other than the plain CPU, or a run with one-shot children (isolated cells,
    conform.run.isolation's `warm_dispatch`): the first call under a TorchDispatchMode (every
    device case runs under conform.run.dispatch's trace; ops drawn from their caller are captured
    under one) imports torch._dynamo (torch/_compile.py), and the caller-drawn ops read PyTorch's
    derivatives.yaml: 1.5 s that each child would pay again. Then the backend's optional
    `fork_server_preload()` hook."""
    spec = os.environ.get(isolation.SERVER_BACKEND_ENV)
    device = bool(spec) and spec != "cpu"
    if not device and not os.environ.get(isolation.SERVER_WARM_DISPATCH_ENV):
        return

    class _PassThrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with _PassThrough():
        torch.ones(2).add(1)
    if os.environ.get(isolation.SERVER_WARM_DISPATCH_ENV):
        capture.autograd_callers()  # and derivatives.yaml, read once (both cached)
    if not device:
        return
    try:
        hook = getattr(backends.resolve(spec, require_available=False), "fork_server_preload", None)
        if callable(hook):
            hook()
    except Exception:  # noqa: BLE001 - each child resolves the backend itself and reports
        pass


def initialised_devices() -> list[str]:
    """Device runtimes this process has initialised (each would poison its forked children).
    MPS has no such query in torch 2.13 (torch/mps/__init__.py only has _is_in_bad_fork, for the
    child side); nothing here calls into torch.mps, which is what initialises it."""
    names = ["cuda", "xpu", torch._C._get_privateuse1_backend_name()]
    return [name for name in names if getattr(getattr(torch, name, None), "is_initialized", lambda: False)()]


_preload_backend()
_warm_up()
if initialised_devices():
    raise RuntimeError(
        f"conform's fork server initialised {', '.join(initialised_devices())}: its children would not be clean"
    )

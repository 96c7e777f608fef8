"""out= ops are also run with preallocated, wrongly sized and non-contiguous outs."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opdb
from conform.backends import CPUBackend
from conform.run.cell import CellSettings, run_cell

aten = torch.ops.aten


class _DropsStridedOut(TorchDispatchMode):
    """A classic backend bug: the kernel writes a contiguous buffer and never copies it back
    into a non-contiguous out tensor."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = kwargs.get("out")
        if func is aten.add.out and isinstance(out, torch.Tensor) and not out.is_contiguous() and out.numel() > 1:
            tmp = torch.empty(out.shape, dtype=out.dtype)
            func(*args, **{**kwargs, "out": tmp})
            return out
        return func(*args, **kwargs)


class DropsStridedOut(CPUBackend):
    name = "drops-strided-out"

    def device_context(self):
        return _DropsStridedOut()


def test_noncontiguous_out_bug_is_found_and_named():
    r = run_cell(
        opdb.lookup("aten::add.out"), "float32", DropsStridedOut(), CellSettings(examples=6, hypothesis_db=None, seed=1)
    )
    assert r.outcome == "mismatch", r.message
    assert "[out= noncontiguous]" in r.message


def test_out_variants_pass_on_a_correct_backend():
    r = run_cell(
        opdb.lookup("aten::add.out"), "float32", CPUBackend(), CellSettings(examples=6, hypothesis_db=None, seed=1)
    )
    assert r.outcome == "pass", r.message

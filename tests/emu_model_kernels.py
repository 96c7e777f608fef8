"""The emulated accelerator with a native sigmoid, right or seeded 1% wrong: a model's culprit.

`conform.backends.emulated` has no sigmoid kernel. Here aten::sigmoid gets one registered for the
device's own dispatch key (PrivateUse1), so the dispatcher sees a native kernel. Its flavour is
picked by the backend while conform runs device work (`device_context`):

* `EmuRightSigmoid`: the CPU kernel on a CPU alias of the device's memory, bit for bit the CPU;
* `EmuWrongSigmoid`: the same, times 1.01: a 1% error in one native kernel.

sigmoid_backward keeps reaching the fallback (the CPU kernel): right in both.
"""

from __future__ import annotations

import contextlib

import torch

from conform.backends.emulated import EmulatedBackend

_flavour = {"now": "right"}
WRONG_FACTOR = 1.01


def _alias(t):
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage().cpu(), t.storage_offset(), t.size(), t.stride())


def _sigmoid(x):
    out = torch.ops.aten.sigmoid.default(_alias(x))
    if _flavour["now"] == "wrong":
        out = out * WRONG_FACTOR
    return out.to(x.device)


_LIB = torch.library.Library("aten", "IMPL")
_LIB.impl("sigmoid", _sigmoid, "PrivateUse1")


class _EmuSigmoid(EmulatedBackend):
    flavour = "right"

    @contextlib.contextmanager
    def device_context(self):
        before, _flavour["now"] = _flavour["now"], self.flavour
        try:
            yield
        finally:
            _flavour["now"] = before


class EmuRightSigmoid(_EmuSigmoid):
    flavour = "right"


class EmuWrongSigmoid(_EmuSigmoid):
    flavour = "wrong"


def sigmoid_mlp():
    """A model whose only native kernel with a choice of flavours is the sigmoid's."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Sigmoid(), torch.nn.Linear(16, 4))
    return model, torch.randn(3, 8)


def tanh_mlp():
    """Linear layers (addmm, mm: fallback on emu) around a tanh (native; its backward falls back)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    return model, torch.randn(3, 8)


def embedding_mlp():
    """Token ids (an integer input, whose value range the trace records) into an embedding."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Tanh())
    return model, torch.tensor([[1, 2, 3], [4, 5, 9]])

"""Importing the optional model libraries (the `models` extra) with a one-line error when absent."""

# torchvision. PyPI's torchvision wheel for a torch release is built against CUDA: its compiled
# ops library (`torchvision/_C.so`) links `libc10_cuda.so` and `libtorch_cuda.so`, which torch's CPU
# build does not ship. torchvision survives that part (its extension loader catches the OSError
# and marks its custom ops unavailable), but `torchvision/_meta_registrations.py` then registers
# fake kernels for `torchvision::nms` and `torchvision::qnms` without asking whether the ops exist,
# and `import torchvision` fails with "operator torchvision::nms does not exist". Where the library
# cannot load, `torchvision()` defines those two schemas first (no kernels): the models, which use
# ATen ops only, build and run, and calling nms raises "no kernel" as it would on any device that
# lacks it. Where the library loads (a CUDA torch, or torchvision's own CPU wheel), nothing is
# defined and torchvision is imported as it is.

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

import torch

from conform.errors import ConformError

EXTRA = 'pip install "conform[models]"'

# the schemas torchvision's fake registrations need, as its C++ library declares them
_TORCHVISION_STUBS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_stub_library = None  # a torch.library.Library lives as long as its object


class MissingLibrary(ConformError):
    """A model library that the SPEC needs is not installed (one line, naming the extra)."""


def require(name: str):
    """Import `name` ("timm", "transformers") or raise MissingLibrary naming the extra."""
    if importlib.util.find_spec(name) is None:
        raise MissingLibrary(f"{name} is not installed; the model libraries are an extra: {EXTRA}")
    if name in ("timm", "transformers"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # conform never downloads weights or configs
        # both import torchvision when it is installed: it must be importable first
        if importlib.util.find_spec("torchvision") is not None:
            torchvision()
    return importlib.import_module(name)


def torchvision():
    """torchvision, importable beside torch's CPU build (see the module docstring)."""
    if importlib.util.find_spec("torchvision") is None:
        raise MissingLibrary(f"torchvision is not installed; the model libraries are an extra: {EXTRA}")

    if "torchvision" not in sys.modules:
        _stub_missing_ops()
    try:
        return importlib.import_module("torchvision")
    except (ImportError, RuntimeError) as e:
        raise MissingLibrary(f"torchvision does not import beside torch {_torch_version()}: {e}") from None


def _torch_version() -> str:

    return torch.__version__


def compiled_ops_load() -> bool:
    """Whether torchvision's compiled ops library loads beside this torch."""

    spec = importlib.util.find_spec("torchvision")
    folder = Path(next(iter(spec.submodule_search_locations)))
    libs = sorted(folder.glob("_C.*"))
    if not libs:
        return False
    try:
        torch.ops.load_library(str(libs[0]))
    except (OSError, RuntimeError):
        return False
    return True


def _stub_missing_ops() -> None:
    global _stub_library

    if _stub_library is not None or compiled_ops_load():
        return
    if hasattr(torch.ops.torchvision, "nms"):
        return
    lib = torch.library.Library("torchvision", "DEF")
    for schema in _TORCHVISION_STUBS:
        lib.define(schema)
    _stub_library = lib

"""The emulated accelerator "emu": a PrivateUse1 device that behaves like a real one on a CPU.

conform's own tests run against it, and it is the template for out-of-tree backends (see
docs/emulated-device.md). The device itself is C++ (emu.cpp, shipped as package data), built on
first use with torch.utils.cpp_extension.load into a per-torch-version folder:
``~/.cache/conform/emulated-<torch version>/<source hash>``, or ``$CONFORM_EMU_BUILD_DIR``. Building needs a
C++ compiler and ninja.
"""

# Environment variables read by the device:
#
# * ``CONFORM_EMU_FALLBACK=1``: ops without a native kernel run through the CPU fallback (as
#   ``PYTORCH_ENABLE_MPS_FALLBACK=1`` on MPS); otherwise they raise NotImplementedError.
# * ``CONFORM_EMU_MACOS``: the emulated macOS major version (default 13); bfloat16 and complex
#   dtypes are rejected before 14, as MPS rejects them.

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import threading
import time
import types
from pathlib import Path

import torch

from conform.backends.base import Backend, cpu_model_name, env_flag, os_description
from conform.backends.builtin import MPSBackend

NAME = "emu"
_SOURCE = Path(__file__).with_name("emu.cpp")
_lock = threading.Lock()
_module = None
_error: str | None = None


class EmulatorUnavailable(RuntimeError):
    """The emulated device could not be built or loaded (the message is one line)."""


def build_dir() -> Path:
    """Where the extension is built: one folder per torch version and source, so that upgrading
    torch rebuilds, and two checkouts with different emu.cpp do not rebuild over each other."""
    override = os.environ.get("CONFORM_EMU_BUILD_DIR")
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    source = hashlib.sha256(_SOURCE.read_bytes()).hexdigest()[:12]
    return cache / "conform" / f"emulated-{torch.__version__}" / source


# torch.utils.cpp_extension serialises builds with a lock file and waits for it forever; a build
# killed half-way leaves it behind. A build takes a minute or two: an older lock is stale.
STALE_LOCK_S = 15 * 60


def _clear_stale_lock(folder: Path) -> None:
    lock = folder / "lock"
    try:
        if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink()
    except FileNotFoundError:
        pass


def _missing_tools() -> str:
    from torch.utils.cpp_extension import is_ninja_available  # loads setuptools: only when the extension is built

    compiler = os.environ.get("CXX", "c++")
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler!r} is not on PATH; install g++ or set CXX)"
    if not is_ninja_available():
        return "ninja is not installed (pip install ninja)"
    return ""


def load():
    """The loaded extension module; builds it on first call. Raises EmulatorUnavailable."""
    global _module, _error
    with _lock:
        if _module is not None:
            return _module
        if _error is not None:
            raise EmulatorUnavailable(_error)
        _error = _missing_tools()
        if _error:
            raise EmulatorUnavailable(_error)
        from torch.utils.cpp_extension import load as cpp_load  # as above

        folder = build_dir()
        folder.mkdir(parents=True, exist_ok=True)
        _clear_stale_lock(folder)
        try:
            module = cpp_load(
                name="conform_emu",
                sources=[str(_SOURCE)],
                build_directory=str(folder),
                extra_cflags=["-O2"],
                verbose=False,
            )
        except Exception as e:  # noqa: BLE001 - a compiler's error is many lines: keep the gist
            lines = [ln for ln in str(e).splitlines() if ln.strip()]
            _error = f"building the emulated device failed: {lines[-1] if lines else type(e).__name__} (build folder {folder})"
            raise EmulatorUnavailable(_error) from None
        _register(module)
        _module = module
        return module


def _register(module) -> None:
    """Name PrivateUse1 "emu" and give torch its device module, as out-of-tree backends do."""
    if torch._C._get_privateuse1_backend_name() != NAME:
        torch.utils.rename_privateuse1_backend(NAME)
        torch.utils.generate_methods_for_privateuse1_backend(for_storage=True)
    if not hasattr(torch, NAME):
        torch._register_device_module(NAME, _device_module(module))


def _device_module(ext) -> types.ModuleType:
    """torch.emu: what torch expects of a device module (torch.cuda's names, lazily initialised)."""
    m = types.ModuleType(f"torch.{NAME}")
    m.is_available = lambda: True
    m.device_count = lambda: 1
    m.current_device = lambda: 0
    m.set_device = lambda device: None
    m.synchronize = lambda device=None: ext.synchronize()
    m.is_initialized = ext.is_initialized
    m._is_in_bad_fork = ext.is_in_bad_fork
    m._lazy_init = ext.init
    # torch.manual_seed seeds every device's generator through these
    m.manual_seed_all = lambda seed: None
    m.manual_seed = lambda seed: None
    m.get_rng_state = lambda device=None: torch.get_rng_state()
    m.set_rng_state = lambda state, device=None: None
    m.get_amp_supported_dtype = lambda: [torch.float16]
    sys.modules[m.__name__] = m
    return m


def trigger_device_assert() -> None:
    """Simulate a device-side assert in this process: every later emu op raises. Always raises."""
    load().trigger_device_assert()


class EmulatedBackend(Backend):
    """conform's backend for the emulated device (``--device emu``)."""

    name = NAME
    # the device emulates MPS's dtype rules, with MPS's words: MPS's patterns must catch them
    unsupported_dtype_patterns = MPSBackend.unsupported_dtype_patterns
    # a device-side assert leaves the process's runtime unusable (see emu.cpp)
    sticky_error_patterns = ("device-side assert triggered",)

    @property
    def device(self) -> torch.device:
        try:
            load()
        except EmulatorUnavailable:
            # is_available() says why; until the device exists, its key's generic name stands in
            return torch.device("privateuseone", 0)
        return torch.device(NAME, 0)

    def is_available(self) -> bool:
        try:
            load()
        except EmulatorUnavailable:
            return False
        return True

    def unavailable_reason(self) -> str:
        try:
            load()
        except EmulatorUnavailable as e:
            return str(e)
        return ""

    def synchronize(self) -> None:
        load().synchronize()

    def fork_server_preload(self) -> None:
        """conform's fork server loads the library once for every clean child (loading does not
        initialise the runtime; see conform.run.isolation)."""
        load()

    def describe(self) -> dict[str, str]:
        os_name, os_version = os_description()
        return {
            "backend": self.name,
            "device_name": f"emu (emulated on {cpu_model_name()})",
            "os": os_name,
            "os_version": os_version,
            "emulated_macos": os.environ.get("CONFORM_EMU_MACOS") or "13",
            # the emulator's PYTORCH_ENABLE_MPS_FALLBACK: part of the environment's identity
            "mps_fallback": env_flag(os.environ.get("CONFORM_EMU_FALLBACK")),
        }

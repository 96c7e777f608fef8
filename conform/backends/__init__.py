"""Backends: the device under test. See `resolve` for how `--device` is understood."""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from conform.backends.base import Backend, BackendProtocol, cpu_model_name, os_description
from conform.backends.builtin import BUILTIN, PREFERENCE, CPUBackend, CUDABackend, MetaBackend, MPSBackend, XPUBackend
from conform.errors import DeviceUnavailableError

ENTRY_POINT_GROUP = "conform.backends"

__all__ = [
    "Backend",
    "BackendProtocol",
    "CPUBackend",
    "CUDABackend",
    "MPSBackend",
    "MetaBackend",
    "XPUBackend",
    "resolve",
    "default_backend",
    "available_names",
    "cpu_model_name",
    "os_description",
]


def _instantiate(obj):
    """An entry point or module attribute may name a class, a factory, or an instance."""
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, BackendProtocol)):
        obj = obj()
    missing = [
        a
        for a in ("name", "device", "is_available", "to_device", "to_cpu", "synchronize", "describe")
        if not hasattr(obj, a)
    ]
    if missing:
        raise DeviceUnavailableError(f"{obj!r} is not a conform backend: it lacks {', '.join(missing)}")
    return obj


def _plugin_backends() -> dict:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_names() -> list[str]:
    return sorted(set(BUILTIN) | set(_plugin_backends()))


def resolve(spec: str | None, *, require_available: bool = True):
    """The backend for `--device SPEC`.

    SPEC is a built-in name (cpu, mps, cuda, cuda:1, xpu, meta), the name of an entry point in
    the `conform.backends` group, or `module:attr` naming an importable backend object, class or
    factory. None picks the best available accelerator, else the CPU.
    """
    if spec is None:
        return default_backend()
    if ":" in spec and not spec.split(":", 1)[1].isdigit():
        module_name, attr = spec.split(":", 1)
        try:
            obj = importlib.import_module(module_name)
            for part in attr.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError) as e:
            raise DeviceUnavailableError(f"cannot load backend {spec!r}: {e}") from None
        backend = _instantiate(obj)
    else:
        name, _, index = spec.partition(":")
        if name == "cuda" and index:
            backend = CUDABackend(int(index))
        elif name in BUILTIN:
            backend = BUILTIN[name]()
        elif name in _plugin_backends():
            backend = _instantiate(_plugin_backends()[name].load())
        else:
            raise DeviceUnavailableError(
                f"unknown device {spec!r}; choose one of {', '.join(available_names())} or give module:attr"
            )
    if require_available and not backend.is_available():
        reason = getattr(backend, "unavailable_reason", lambda: "is_available() returned False")()
        raise DeviceUnavailableError(f"device {spec!r} is not available: {reason}")
    return backend


def default_backend():
    for name in PREFERENCE:
        backend = BUILTIN[name]()
        if backend.is_available():
            return backend
    return CPUBackend()

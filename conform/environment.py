"""The fingerprint of where a run happened: the column of the site's matrix."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket

import torch

from conform.backends.base import env_flag, os_description

# What makes two runs comparable: the same torch build, Python, OS, backend and chip. The host
# name is kept but not part of the fingerprint, so identical machines of a fleet share a column.
IDENTITY = (
    "torch_version",
    "torch_git",
    "python_version",
    "os",
    "os_version",
    "backend",
    "device_name",
    "mps_fallback",
)


def fingerprint_of(env: dict) -> str:
    key = {k: str(env.get(k, "")) for k in IDENTITY}
    key["kind"] = env.get("kind", "measured")
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:32]


def capture(backend) -> dict:
    """Everything the store's `environments` table records for a measured run on `backend`."""
    os_name, os_version = os_description()
    described = {k: str(v) for k, v in backend.describe().items()}
    env = {
        "kind": "measured",
        "torch_version": torch.__version__,
        "torch_git": torch.version.git_version or "",
        "python_version": platform.python_version(),
        "os": described.pop("os", os_name),
        "os_version": described.pop("os_version", os_version),
        "backend": described.pop("backend", backend.name),
        "device_name": described.pop("device_name", ""),
        "hostname": socket.gethostname(),
        # a backend may say what its fallback switch is (the emulator's); else MPS's variable
        "mps_fallback": described.pop("mps_fallback")
        if "mps_fallback" in described
        else env_flag(os.environ.get("PYTORCH_ENABLE_MPS_FALLBACK")),
    }
    details = dict(described)
    details["mps_fallback"] = env["mps_fallback"]
    details["machine"] = platform.machine()
    details["torch_debug"] = str(torch.version.debug)
    details["threads"] = str(torch.get_num_threads())
    if backend.name == "cpu":
        details["reference"] = "cpu float64 (golden)"
    env["details"] = details
    env["fingerprint"] = fingerprint_of(env)
    return env

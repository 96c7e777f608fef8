"""The built-in backends: cpu, mps, cuda, xpu, meta.

The MPS and CUDA paths cannot run on conform's own CI (no Mac, no GPU); they are written from
PyTorch's documented APIs: `torch.backends.mps`, `torch.mps.synchronize()`, `torch.cuda.*`.
"""

from __future__ import annotations

import contextlib

import torch

from conform.backends.base import Backend, _run, cpu_model_name, os_description


class CPUBackend(Backend):
    """The CPU as device under test; its reference is then the CPU in float64 ("golden")."""

    name = "cpu"
    device = torch.device("cpu")

    def to_device(self, t):
        # a copy, so that an in-place op on the device side cannot touch the reference's input
        return t.clone()

    def to_cpu(self, t):
        return t


class MPSBackend(Backend):
    """Apple's Metal Performance Shaders backend (Apple silicon GPUs)."""

    name = "mps"
    device = torch.device("mps")
    # The dtype refusals of aten/src/ATen/mps/EmptyTensor.cpp and native/mps/OperationUtils.mm
    # (TypeErrors): float64 always, bfloat16 and complex before macOS 14, and any dtype MPSGraph
    # has no type for ("Trying to convert Float8_e4m3fn to the MPS backend but it does not have
    # support for that dtype.").
    unsupported_dtype_patterns = (
        "MPS framework doesn't support float64",
        "Cannot convert a MPS Tensor to float64",
        "Cannot convert a float64 Tensor to MPS",
        "MPS BFloat16 is only supported on MacOS 14 or newer",
        "MPS bfloat16 type is supported on MacOS 14.0 or newer",
        "MPS complex types are only supported on MacOS 14.0 or newer",
        "to the MPS backend but it does not have support for that dtype",
        "not supported on MPS",
        "unsupported on MPS",
        "MPS does not support",
        "is not supported by the MPS backend",
    )
    # aten/src/ATen/mps/MPSFallback.mm registers its CPU fallback as these ops' MPS kernels: they
    # always fall back, PYTORCH_ENABLE_MPS_FALLBACK or not
    always_fallback_ops = (
        "aten::embedding_renorm_",
        "aten::linalg_svd",
        "aten::linalg_svd.U",
        "aten::col2im",
        "aten::upsample_nearest3d.vec",
    )

    def is_available(self) -> bool:
        mps = getattr(torch.backends, "mps", None)
        return bool(mps and mps.is_available())

    def unavailable_reason(self) -> str:
        mps = getattr(torch.backends, "mps", None)
        if mps is None:
            return "this torch has no MPS support"
        if not mps.is_built():
            return "this torch was not built with MPS (install a macOS arm64 build)"
        return "MPS is not available (needs an Apple silicon GPU visible to this process; hosted CI runners and VMs have none)"

    def synchronize(self) -> None:
        torch.mps.synchronize()

    def describe(self) -> dict[str, str]:
        os_name, os_version = os_description()
        mps = torch.backends.mps
        # torch >= 2.6 asks Metal (torch.backends.mps.get_name / get_core_count); older torch: the
        # chip's name from sysctl, by full path (PATH may hold another sysctl), and no core count
        chip = (
            _mps_query(mps, "get_name")
            or _run(["/usr/sbin/sysctl", "-n", "machdep.cpu.brand_string"])
            or cpu_model_name()
        )
        d = {
            "backend": self.name,
            "device_name": chip,  # "Apple M2 Pro": the GPU is part of the chip
            "os": os_name,
            "os_version": os_version,
            "gpu_cores": _mps_query(mps, "get_core_count"),
        }
        try:
            d["recommended_max_memory"] = str(torch.mps.recommended_max_memory())
        except Exception:  # older torch: no such API
            pass
        return d


def _mps_query(mps, name: str) -> str:
    fn = getattr(mps, name, None)
    try:
        return str(fn()) if fn is not None else ""
    except Exception:  # noqa: BLE001 - a description must not fail the run
        return ""


# CUDA's defaults that trade precision for speed, each far beyond conform's float32 tolerance:
# TF32 in cuDNN convolutions (on by default) and cuBLAS matmuls, and fp16/bf16 matmuls reducing
# in reduced precision (on by default). (torch.backends attribute path, value while comparing)
CUDA_COMPARISON_SETTINGS = (
    ("cuda.matmul.allow_tf32", False),
    ("cudnn.allow_tf32", False),
    ("cuda.matmul.allow_fp16_reduced_precision_reduction", False),
    ("cuda.matmul.allow_bf16_reduced_precision_reduction", False),
)


def _backends_attr(path: str):
    *parents, leaf = path.split(".")
    obj = torch.backends
    for p in parents:
        obj = getattr(obj, p)
    return obj, leaf


@contextlib.contextmanager
def cuda_comparison_mode():
    """CUDA_COMPARISON_SETTINGS applied, and the previous values restored on exit."""
    saved = []
    try:
        for path, value in CUDA_COMPARISON_SETTINGS:
            obj, leaf = _backends_attr(path)
            saved.append((obj, leaf, getattr(obj, leaf)))
            setattr(obj, leaf, value)
        yield
    finally:
        for obj, leaf, value in reversed(saved):
            setattr(obj, leaf, value)


class CUDABackend(Backend):
    """NVIDIA (or ROCm through the cuda device type) GPUs."""

    name = "cuda"
    # `conform run -n auto` on a GPU: each worker holds its own CUDA context (hundreds of MB)
    workers_per_device = 4

    def __init__(self, index: int = 0):
        self.device = torch.device("cuda", index)

    def device_context(self):
        """Comparisons run without TF32 and reduced-precision reductions (see CUDA_COMPARISON_SETTINGS)."""
        return cuda_comparison_mode()

    def is_available(self) -> bool:
        return torch.cuda.is_available() and torch.cuda.device_count() > self.device.index

    def unavailable_reason(self) -> str:
        if not torch.backends.cuda.is_built():
            return "this torch was not built with CUDA"
        return "no CUDA device is visible (check the driver and CUDA_VISIBLE_DEVICES)"

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def describe(self) -> dict[str, str]:
        os_name, os_version = os_description()
        props = torch.cuda.get_device_properties(self.device)
        driver = _run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", f"--id={self.device.index}"]
        )
        return {
            "backend": self.name,
            "device_name": torch.cuda.get_device_name(self.device),  # "NVIDIA H200"
            "os": os_name,
            "os_version": os_version,
            "driver_version": driver,
            "cuda_version": str(torch.version.cuda or torch.version.hip or ""),
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_bytes": str(props.total_memory),
            # what the comparisons ran with (device_context), e.g. "cudnn.allow_tf32": "False"
            **{path: str(value) for path, value in CUDA_COMPARISON_SETTINGS},
        }


class XPUBackend(Backend):
    """Intel GPUs through torch.xpu."""

    name = "xpu"
    device = torch.device("xpu")

    def is_available(self) -> bool:
        xpu = getattr(torch, "xpu", None)
        return bool(xpu and xpu.is_available())

    def unavailable_reason(self) -> str:
        return "no XPU device is available (needs an Intel GPU and an XPU build of torch)"

    def synchronize(self) -> None:
        torch.xpu.synchronize()

    def describe(self) -> dict[str, str]:
        os_name, os_version = os_description()
        return {
            "backend": self.name,
            "device_name": torch.xpu.get_device_name(0),
            "os": os_name,
            "os_version": os_version,
        }


class MetaBackend(Backend):
    """Meta tensors: shape and dtype propagation only (the reference's values are not compared)."""

    name = "meta"
    device = torch.device("meta")
    metadata_only = True

    def to_cpu(self, t):
        # meta tensors have no data; an empty CPU tensor of the same metadata stands in
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)

    def describe(self) -> dict[str, str]:
        os_name, os_version = os_description()
        return {"backend": self.name, "device_name": "meta (no data)", "os": os_name, "os_version": os_version}


BUILTIN = {"cpu": CPUBackend, "mps": MPSBackend, "cuda": CUDABackend, "xpu": XPUBackend, "meta": MetaBackend}
# With no --device, the first available of these is tested.
PREFERENCE = ("mps", "cuda", "xpu")

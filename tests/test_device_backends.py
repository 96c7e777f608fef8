"""The MPS and CUDA backends' device-specific rules, checked without the device."""

from __future__ import annotations

import sys

import pytest
import torch

from conform.backends import CPUBackend, CUDABackend, MPSBackend
from conform.backends.builtin import cuda_comparison_mode
from conform.cli.main import _auto_workers
from conform.environment import capture
from conform.judge.outcome import of_error as classify_device_error
from conform.outcomes import Outcome
from conform.run.dispatch import tracer_for


@pytest.mark.parametrize(
    "text",
    [
        # aten/src/ATen/mps/EmptyTensor.cpp and native/mps/OperationUtils.mm, word for word
        "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please use float32 instead.",
        "Cannot convert a float64 Tensor to MPS as the MPS framework doesn't support float64. Please use float32 instead.",
        "MPS BFloat16 is only supported on MacOS 14 or newer",
        "MPS bfloat16 type is supported on MacOS 14.0 or newer.",
        "MPS complex types are only supported on MacOS 14.0 or newer.",
        "Trying to convert Float8_e4m3fn to the MPS backend but it does not have support for that dtype.",
    ],
)
def test_mps_dtype_refusals_are_unsupported_dtype(text):
    assert classify_device_error(TypeError(text), MPSBackend()) == Outcome.UNSUPPORTED_DTYPE


def test_mps_description_asks_metal_where_torch_can(monkeypatch):
    monkeypatch.setattr(torch.backends.mps, "get_name", lambda: "Apple M9 Max", raising=False)
    monkeypatch.setattr(torch.backends.mps, "get_core_count", lambda: 40, raising=False)
    d = MPSBackend().describe()
    assert d["device_name"] == "Apple M9 Max" and d["gpu_cores"] == "40"


def test_mps_unavailable_reason_makes_no_macos_12_claim():
    assert "12.3" not in MPSBackend().unavailable_reason()


def test_unset_and_zero_mps_fallback_are_one_environment(monkeypatch):
    monkeypatch.delenv("PYTORCH_ENABLE_MPS_FALLBACK", raising=False)
    unset = capture(CPUBackend())
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "0")
    zero = capture(CPUBackend())
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    on = capture(CPUBackend())
    assert unset["fingerprint"] == zero["fingerprint"] != on["fingerprint"]


def test_cuda_comparisons_run_without_tf32_or_reduced_precision_reductions():
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
    with CUDABackend().device_context():
        assert not torch.backends.cudnn.allow_tf32
        assert not torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
        assert not torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
    assert (
        torch.backends.cudnn.allow_tf32,
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    ) == before


def test_cuda_auto_workers_are_capped_per_gpu(monkeypatch):
    # (the string "conform.cli.main" would name the main() function that conform.cli exports)
    monkeypatch.setattr(sys.modules["conform.cli.main"], "_cpu_count", lambda: 64)
    assert _auto_workers(CUDABackend()) == CUDABackend.workers_per_device == 4
    assert _auto_workers(CPUBackend()) == 64


def test_backends_that_cannot_fall_back_pay_nothing_for_the_trace():
    assert tracer_for(CPUBackend()) is None
    assert tracer_for(CUDABackend()) is None  # no backend fallback is registered for CUDA


def test_cuda_comparison_mode_restores_on_error():
    before = torch.backends.cudnn.allow_tf32
    with pytest.raises(ZeroDivisionError), cuda_comparison_mode():
        raise ZeroDivisionError
    assert torch.backends.cudnn.allow_tf32 == before

"""The one mapping to an outcome (rule 10 of docs/verdict-rule.md): from a case's failing
comparison records, from an error the device raised, from a process's death, and from a cell
that ran no case (its skip reason).

Light on purpose (no torch): the worker, the controller and the reports all read it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from conform.outcomes import INTERNAL_ERROR, NO_KERNEL, NO_VALID_CASE, REFERENCE_CRASH, Outcome

# -- from comparison records ---------------------------------------------------------------------

# Record kinds (conform.judge.compare.KINDS) that say the result has the wrong form, not wrong
# values: a failure of one of them is a meta_mismatch.
META_KINDS = frozenset({"structure", "shape", "dtype", "strides", "error"})


def of_failures(kinds: Iterable[str], phase: str) -> Outcome:  # rule (10d)
    """A case whose comparison failed with records of these kinds: in the backward phase a
    grad_mismatch; in the forward phase a meta_mismatch if the form is wrong, else a mismatch."""
    if phase == "backward":
        return Outcome.GRAD_MISMATCH
    return Outcome.META_MISMATCH if any(k in META_KINDS for k in kinds) else Outcome.MISMATCH


def golden_runs(*, floating: bool, metadata_only: bool, nondeterminism: str, rule_allows: bool) -> bool:
    """Whether float64 golden is computed for a case: it needs floating inputs, values that are
    compared, results that are a function of the inputs, and no rule turning it off."""
    return floating and not metadata_only and nondeterminism not in ("seeded", "uninitialized") and rule_allows


# -- from an error the device raised -------------------------------------------------------------

# A device (or the CPU) has no kernel for this op / dtype.
NOT_IMPLEMENTED_PATTERNS = (
    r"not implemented for '",
    r"Could not run '.*' with arguments from the '.*' backend",
    r"\bno kernel\b",
    r"is not (currently )?implemented",
    r"not currently implemented",
    r"derivative for .* is not implemented",
    r"does not have a kernel",
    r"attempted to run this operator with Meta tensors",
)
_NOT_IMPLEMENTED_RE = re.compile("|".join(NOT_IMPLEMENTED_PATTERNS), re.IGNORECASE | re.DOTALL)


def is_kernel_gap(exc: BaseException) -> bool:
    """The error says "no kernel for this", not "your input is wrong"."""
    return isinstance(exc, NotImplementedError) or bool(_NOT_IMPLEMENTED_RE.search(str(exc)))


def of_error(exc: BaseException, backend) -> Outcome:  # rule (10c)
    """The device raised where the reference did not: unsupported_dtype (the backend's own
    patterns), not_implemented (a kernel gap), else device_error."""
    text = str(exc)
    if any(pat in text for pat in getattr(backend, "unsupported_dtype_patterns", ()) or ()):
        return Outcome.UNSUPPORTED_DTYPE
    if is_kernel_gap(exc):
        return Outcome.NOT_IMPLEMENTED
    return Outcome.DEVICE_ERROR


# Errors after which the device context of the process is unusable: every later call fails too.
# CUDA: the texts of cudaGetErrorString for the errors the CUDA programming guide calls sticky
# (cudaErrorAssert, cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress,
# cudaErrorIllegalInstruction, cudaErrorHardwareStackError, cudaErrorInvalidPc,
# cudaErrorInvalidAddressSpace, cudaErrorECCUncorrectable), which PyTorch puts after
# "CUDA error: " (c10/cuda/CUDAException.h C10_CUDA_CHECK -> c10_cuda_check_implementation).
CUDA_STICKY_ERRORS = (
    "device-side assert triggered",
    "an illegal memory access was encountered",
    "unspecified launch failure",
    "misaligned address",
    "an illegal instruction was encountered",
    "hardware stack error",
    "invalid program counter",
    "operation not supported on global/shared address space",
    "uncorrectable ECC error encountered",
)
# XPU (SYCL/Level Zero) reports device losses as "UR_RESULT_ERROR_DEVICE_LOST"; MPS faults end
# the process instead (a Metal command-buffer error is an abort), which isolation records as crash.
DEFAULT_STICKY_ERRORS = {"cuda": CUDA_STICKY_ERRORS, "xpu": ("DEVICE_LOST",)}
# A sticky error's outcome: the case that raised it is the device's error.
STICKY = Outcome.DEVICE_ERROR


def sticky_error_patterns(backend) -> tuple[str, ...]:
    """A backend's `sticky_error_patterns` attribute, else the defaults of its device type."""
    patterns = getattr(backend, "sticky_error_patterns", None)
    if patterns is None:
        device = backend.device
        kind = getattr(device, "type", None) or str(device).split(":", 1)[0]
        patterns = DEFAULT_STICKY_ERRORS.get(kind, ())
    return tuple(patterns)


def sticky_error(backend, text: str) -> str:
    """The sticky-error signature `text` carries, or ""."""
    return next((p for p in sticky_error_patterns(backend) if p and p in (text or "")), "")


# -- from a process's death ----------------------------------------------------------------------


def of_death(inflight) -> Outcome:  # rule (10e)
    """A process died with a case in flight (conform.run.isolation.InFlight): timeout when its
    record says a watchdog ended it, else crash."""
    return Outcome.TIMEOUT if inflight and inflight.timeout else Outcome.CRASH


def reference_death(inflight) -> bool:
    """The record says the CPU reference or float64 golden, not the device, was running when the
    process died, and no case had failed yet (the record names a side only where the device under
    test is not the CPU)."""
    return bool(inflight) and inflight.side in ("reference", "golden") and not inflight.failed


def of_reference_death(passed: int) -> tuple[Outcome, str]:
    """(outcome, skip reason) of a cell whose CPU reference or golden killed the process: the
    device is not blamed, so the cell is what its completed cases said, or skipped if none passed."""
    return (Outcome.PASS, "") if passed else (Outcome.SKIPPED, REFERENCE_CRASH)


# -- a cell's skip reason ------------------------------------------------------------------------


def skip_reason_of_case(outcome: str | Outcome) -> str:
    """A case is skipped only for conform's own errors (conform.run.execute.run_case)."""
    return INTERNAL_ERROR if Outcome(outcome) is Outcome.SKIPPED else ""


def skip_reason_of_empty_cell(*, no_kernel: bool) -> str:  # rule (10f)
    """A cell that ran no valid case: the CPU reference has no kernel for its dtype, or no
    generated input was valid."""
    return NO_KERNEL if no_kernel else NO_VALID_CASE

"""The outcome of a cell (op x dtype on one environment), and why a skipped cell ran nothing."""

from __future__ import annotations

import enum


class Outcome(str, enum.Enum):
    PASS = "pass"
    MISMATCH = "mismatch"  # values out of tolerance
    GRAD_MISMATCH = "grad_mismatch"  # forward fine, a gradient out of tolerance
    META_MISMATCH = "meta_mismatch"  # shape / dtype / structure differs
    NOT_IMPLEMENTED = "not_implemented"  # the device has no kernel (forward or backward)
    FALLBACK = "fallback"  # ran through the CPU fallback (PYTORCH_ENABLE_MPS_FALLBACK)
    UNSUPPORTED_DTYPE = "unsupported_dtype"  # the device rejects the dtype (float64 on MPS)
    DEVICE_ERROR = "device_error"  # the device raised where the reference did not
    MISSING_ERROR = "missing_error"  # the reference rejected the input, the device accepted it
    CRASH = "crash"  # the process died
    TIMEOUT = "timeout"  # the case hung past its time limit
    SKIPPED = "skipped"  # untestable or no valid case, with the reason

    def __str__(self) -> str:
        return self.value


# Most severe first: when a cell's examples disagree, the cell takes the most severe outcome.
SEVERITY = [
    Outcome.CRASH,
    Outcome.TIMEOUT,
    Outcome.MISMATCH,
    Outcome.META_MISMATCH,
    Outcome.GRAD_MISMATCH,
    Outcome.MISSING_ERROR,
    Outcome.DEVICE_ERROR,
    Outcome.NOT_IMPLEMENTED,
    Outcome.UNSUPPORTED_DTYPE,
    Outcome.FALLBACK,
    Outcome.SKIPPED,
    Outcome.PASS,
]

FAILING = frozenset(SEVERITY) - {Outcome.PASS, Outcome.SKIPPED}


def worst(outcomes) -> Outcome:
    rank = {o: i for i, o in enumerate(SEVERITY)}
    return min((Outcome(o) for o in outcomes), key=rank.__getitem__, default=Outcome.SKIPPED)


# Why a skipped cell ran nothing: the CPU reference has no kernel for the cell's dtype ("not
# implemented for 'Bool'": nothing to compare with, whatever the inputs), no generated input was
# valid, the op is untestable by rule, or conform itself failed.
NO_KERNEL, NO_VALID_CASE, UNTESTABLE, INTERNAL_ERROR = "no_kernel", "no_valid_case", "untestable", "internal_error"
# Or the CPU reference (or golden) killed the process before any case passed, on a device that
# is not the CPU (conform.plugin.died_result): nothing was learnt, and the device is not to blame.
REFERENCE_CRASH = "reference_crash"
SKIP_REASONS = (NO_KERNEL, NO_VALID_CASE, UNTESTABLE, INTERNAL_ERROR, REFERENCE_CRASH)

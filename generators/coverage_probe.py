"""Does the generator reach an op? Draw cases and run them on the CPU only.

`probe` is the generator's own coverage measure: a case counts as valid when the CPU runs it
without raising (the same test the runner applies to the reference). It never compares values.
"""

from __future__ import annotations

import re
import warnings

import torch
from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Unsatisfiable

from generators.context import Untestable
from generators.schema import from_schema

_CPU = torch.device("cpu")


def _identity(t):
    return t


def probe(
    op,
    dtype: str,
    *,
    examples: int = 20,
    max_numel: int = 4096,
    stop_after: int | None = None,
    seed: int | None = None,
    patience: int | None = None,
    skip=None,
) -> tuple[int, str | None]:
    """(number of valid cases among `examples` drawn, reason when none was valid).

    The reason is the Untestable reason, or the most common CPU error, shortened to one line.
    `stop_after`: stop drawing after this many valid cases (a coverage scan needs one).
    `seed`: draw the cases of this seed (None: derandomized, the same cases every time), so that
    a probe can tell a generator that always finds a valid case from one that finds it by luck.
    `patience`: with no valid case yet, give up after this many rejections that all give the same
    reason, as the runner does (conform.run.cell gives up after 5).
    `skip(case)`: True for a case not to run here, drawn again instead (a case on which a known
    CPU bug kills the process: this probe runs in it).
    """
    try:
        strategy = from_schema(op, dtype, max_numel=max_numel)
    except Untestable as exc:
        return 0, f"untestable: {exc}"
    fn = op.resolve()
    valid = 0
    errors: dict[str, int] = {}

    class _Enough(Exception):
        pass

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=seed is None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(case):
        nonlocal valid
        if skip is not None and skip(case):
            reject()
        args, kwargs = case.materialize(_identity, _CPU)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fn(*args, **kwargs)
        except Exception as exc:  # the reference rejected the input: an invalid case
            key = error_key(exc)
            errors[key] = errors.get(key, 0) + 1
            if patience is not None and not valid and len(errors) == 1 and errors[key] >= patience:
                raise _Enough from None
            return
        valid += 1
        if stop_after is not None and valid >= stop_after:
            raise _Enough

    if seed is not None:
        run = hypothesis_seed(seed)(run)
    try:
        run()
    except _Enough:
        pass
    except Unsatisfiable:
        return valid, "generator: every drawn case was rejected"
    except Exception as exc:  # an error while generating (a generator bug)
        if valid:
            return valid, None
        return 0, "generator error: " + error_key(exc)
    if valid:
        return valid, None
    if not errors:
        return 0, "no case drawn"
    return 0, max(errors, key=errors.get)


def error_key(exc: BaseException) -> str:
    """A short, groupable form of an error: type and first line, numbers and shapes blanked."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    msg = re.sub(r"\[[-0-9, ]*\]", "[N]", msg)
    msg = re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "N", msg)
    return f"{type(exc).__name__}: {msg[:160]}"

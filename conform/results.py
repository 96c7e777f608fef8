"""One cell's result: from the device process that ran it to its row in the store.

A `CellResult` is made by conform.run.cell.run_cell (from the `CaseResult`s of conform.run.execute) in a
clean device process, comes back to the worker through a pipe as itself, travels to the
controller in `report.user_properties` as its `to_json()` in JSON text (xdist sends only plain values),
is rebuilt there with `from_json()`, and is stored by `Store.record_result(run_id, result)`:
each field is a column of `results` or of `failures`, or is named in `NOT_STORED`
(conform.store.db checks that when it is imported).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from conform.outcomes import Outcome


@dataclass
class CellResult:
    op: str  # qualname; stored as results.op_id
    dtype: str
    outcome: str = Outcome.SKIPPED.value
    phase: str = ""
    examples_run: int = 0
    examples_passed: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    max_ulp_err: float | None = None
    rtol: float | None = None
    atol: float | None = None
    device_golden_err: float | None = None
    ref_golden_err: float | None = None
    message: str = ""
    case: dict | None = None  # the (minimal) case of a non-pass cell, Case.to_json()
    repro: str = ""
    traceback: str = ""
    duration_s: float = 0.0
    invalid_examples: int = 0
    findings: list = field(
        default_factory=list
    )  # conform.judge.verdict.Finding dicts, the first of each kind and phase
    skip_reason: str = ""  # for a skipped cell: one of conform.outcomes.SKIP_REASONS
    # failures of other kinds than the cell's verdict, found after it among the cell's cases, each
    # {"outcome", "phase", "message", "case", "repro"} (conform.run.cell)
    further_failures: list = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CellResult:
        return cls(**d)


# Fields that are the cell's own bookkeeping, not part of its stored result.
NOT_STORED = frozenset({"invalid_examples"})

"""Summaries of stored results: `conform report`."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from conform.errors import ConformError, first_line
from conform.outcomes import SEVERITY
from conform.store import Store, queries


def plural(n: int, noun: str) -> str:
    """'1 environment', '2 environments' (nouns of conform's summaries take an s)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@dataclass
class EnvironmentSummary:
    environment_id: int
    torch_version: str
    torch_git: str
    backend: str
    device_name: str
    os: str
    os_version: str
    python_version: str
    runs: list[int]
    last_run_at: str
    ops_total: int  # catalog size of that torch
    ops_exercised: int  # ops with at least one cell that ran examples
    ops_tested: int  # ops with at least one recorded cell
    cells: dict[str, int] = field(default_factory=dict)  # outcome -> count
    # conform.judge.verdict findings of the newest cells: {"op", "dtype", "kind", "phase", "message", ...}
    findings: list[dict] = field(default_factory=list)

    @property
    def cells_total(self) -> int:
        return sum(self.cells.values())

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["cells_total"] = self.cells_total
        return d


def summaries(store: Store, *, run_id: int | None = None) -> list[EnvironmentSummary]:
    if run_id is not None:
        run = queries.run(store, run_id)
        if run is None:
            raise ConformError(f"no run {run_id} in {store.where}")
        envs = [run.environment]
    else:
        envs = queries.environments(store, kind="measured")
    out = []
    for env in envs:
        runs = [r for r in queries.runs_of(store, env.id) if run_id is None or r.id == run_id]
        if not runs:
            continue
        latest = queries.latest_cells(store, env.id, run_id)
        cells = Counter(r.outcome for r in latest.values())
        exercised = {q for (q, _), r in latest.items() if r.examples_run > 0}
        tested = {q for (q, _) in latest}
        out.append(
            EnvironmentSummary(
                environment_id=env.id,
                torch_version=env.torch_version,
                torch_git=env.torch_git,
                backend=env.backend,
                device_name=env.device_name,
                os=env.os,
                os_version=env.os_version,
                python_version=env.python_version,
                runs=[r.id for r in runs],
                last_run_at=runs[-1].started_at.isoformat(timespec="seconds"),
                ops_total=max(r.ops_total for r in runs),
                ops_exercised=len(exercised),
                ops_tested=len(tested),
                cells={o.value: cells[o.value] for o in reversed(SEVERITY) if cells.get(o.value)},
                findings=[
                    {"op": q, "dtype": d, **f}
                    for (q, d), r in sorted(latest.items())
                    for f in (r.findings or [])
                    if isinstance(f, dict)
                ],
            )
        )
    return out


def render(items: list[EnvironmentSummary], fmt: str) -> str:
    if fmt == "json":
        return json.dumps({"environments": [e.to_dict() for e in items]}, indent=2)
    outcomes = [o.value for o in reversed(SEVERITY) if any(e.cells.get(o.value) for e in items)]
    header = ["torch", "backend", "device", "ops", "exercised", "cells"] + outcomes
    rows = [
        [
            e.torch_version,
            e.backend,
            e.device_name,
            str(e.ops_total),
            f"{e.ops_exercised} ({100 * e.ops_exercised / max(e.ops_total, 1):.1f}%)",
            str(e.cells_total),
        ]
        + [str(e.cells.get(o, 0)) for o in outcomes]
        for e in items
    ]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines + _findings_lines(items, bullet="- "))
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    fmt_row = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths))  # noqa: E731
    return "\n".join(
        [fmt_row(header), fmt_row(["-" * w for w in widths])]
        + [fmt_row(r) for r in rows]
        + _findings_lines(items, bullet="  ")
    )


FINDING_WORDS = {
    "reference": "reference findings (the device agrees with the CPU; both deviate from float64)",
    "cpu_wrong": "CPU wrong here (the device matches float64)",
    "precision_edge": "precision edges (within the case's conditioning)",
}
FINDINGS_SHOWN = 50


def _findings_lines(items: list[EnvironmentSummary], *, bullet: str) -> list[str]:
    """Findings per environment, by kind: facts about the CPU reference or the case, listed
    apart from the outcomes because they are no device's failure."""
    lines: list[str] = []
    for e in items:
        for kind, words in FINDING_WORDS.items():
            found = [f for f in e.findings if f.get("kind") == kind]
            if not found:
                continue
            lines += ["", f"{e.backend} {e.device_name} (torch {e.torch_version}): {len(found)} {words}"]
            for f in found[:FINDINGS_SHOWN]:
                lines.append(
                    f"{bullet}{f['op']} {f['dtype']} ({f.get('phase', '')}): {first_line(str(f.get('message', '')), 200)}"
                )
            if len(found) > FINDINGS_SHOWN:
                lines.append(f"{bullet}... and {len(found) - FINDINGS_SHOWN} more (conform report --format json)")
    return lines

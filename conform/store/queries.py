"""Reading conform's store: every query that report, coverage, gate, expectations, declared, bench
and the site make, as named functions that return plain rows (dataclasses and named tuples, never
ORM objects or SQLAlchemy statements), so that only `conform.store` knows SQL.

The newest result of a cell wins: a later run's cell replaces an earlier one's in an environment,
so partial re-runs refine a column (`latest_cells`; the site keeps the last of `snapshot`'s rows, which come oldest run first).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import func, select

from conform.errors import ConformError
from conform.store.models import CatalogEntry, DeclaredKernel, Environment, Failure, Op, Result, Run, Timing


def _from_orm(cls, obj, **extra):
    return cls(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(cls) if f.name not in extra}, **extra)


# -- environments and runs --------------------------------------------------------------------


@dataclass
class EnvironmentRow:
    """Where results were measured (kind "measured") or what a release declares (kind "declared")."""

    id: int
    fingerprint: str
    kind: str
    torch_version: str
    torch_git: str
    python_version: str
    os: str
    os_version: str
    backend: str
    device_name: str
    hostname: str
    details: dict


@dataclass(frozen=True)
class RunRow:
    id: int
    uuid: str
    environment_id: int
    state: str
    seed: int
    options: dict
    ops_total: int
    cells_planned: int
    conform_version: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    environment: EnvironmentRow


def _run_row(run: Run) -> RunRow:
    return _from_orm(RunRow, run, environment=_from_orm(EnvironmentRow, run.environment))


def run(store, run_id: int) -> RunRow | None:
    """A run with its environment, or None."""
    with store.session() as s:
        found = s.get(Run, run_id)
        return None if found is None else _run_row(found)


def runs_of(store, environment_id: int) -> list[RunRow]:
    """An environment's runs, oldest first."""
    with store.session() as s:
        return [
            _run_row(r)
            for r in s.scalars(select(Run).where(Run.environment_id == environment_id).order_by(Run.started_at, Run.id))
        ]


def latest_run_id(store, *, kind: str = "measured", other_than: int | None = None) -> int | None:
    """The newest run of a kind of environment, optionally other than one run (a gate's own)."""
    q = select(Run.id).join(Environment).where(Environment.kind == kind)
    if other_than is not None:
        q = q.where(Run.id != other_than)
    with store.session() as s:
        return s.scalar(q.order_by(Run.started_at.desc(), Run.id.desc()).limit(1))


def run_id_of(store, ref: str | None, *, option: str = "--run") -> int:
    """The run a command's `option` names: "latest" (or nothing) for the newest measured run, else
    a run id that must exist. ConformError, naming the option, otherwise."""
    if ref in (None, "latest"):
        found = latest_run_id(store)
        if found is None:
            raise ConformError(f"no run in {store.where}: run `conform run` first")
        return found
    try:
        run_id = int(ref)
    except ValueError:
        raise ConformError(f"{option} takes a run id or 'latest', not {ref!r}") from None
    with store.session() as s:
        if s.get(Run, run_id) is None:
            raise ConformError(f"no run {run_id} in {store.where}")
    return run_id


def environment(store, environment_id: int) -> EnvironmentRow | None:
    with store.session() as s:
        found = s.get(Environment, environment_id)
        return None if found is None else _from_orm(EnvironmentRow, found)


def environments(store, *, kind: str) -> list[EnvironmentRow]:
    """Environments of one kind ("measured" or "declared"), in the order they were stored."""
    with store.session() as s:
        return [
            _from_orm(EnvironmentRow, e)
            for e in s.scalars(select(Environment).where(Environment.kind == kind).order_by(Environment.id))
        ]


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellRow:
    """One stored result (a cell: op x dtype of one run), with its op's qualified name."""

    id: int
    run_id: int
    op: str
    dtype: str
    outcome: str
    phase: str
    examples_run: int
    examples_passed: int
    message: str
    findings: list | None
    skip_reason: str


def latest_cells(store, environment_id: int, run_id: int | None = None) -> dict[tuple[str, str], CellRow]:
    """{(qualname, dtype): the newest result} of every cell measured in an environment (or only
    in one run)."""
    columns = [Op.qualname if f.name == "op" else Result.__table__.c[f.name] for f in dataclasses.fields(CellRow)]
    q = select(*columns).join(Op, Result.op_id == Op.id).join(Run, Result.run_id == Run.id)
    q = q.where(Run.environment_id == environment_id) if run_id is None else q.where(Result.run_id == run_id)
    latest: dict[tuple[str, str], CellRow] = {}
    with store.session() as s:
        for row in s.execute(q.order_by(Run.started_at, Result.id)):
            cell = CellRow(*row)
            latest[(cell.op, cell.dtype)] = cell
    return latest


class RunCell(NamedTuple):
    op: str
    dtype: str
    outcome: str
    examples_run: int
    message: str
    skip_reason: str


def run_cells(store, run_id: int) -> list[RunCell]:
    """Every cell a run recorded, in the order it recorded them."""
    q = (
        select(Op.qualname, Result.dtype, Result.outcome, Result.examples_run, Result.message, Result.skip_reason)
        .join(Op, Result.op_id == Op.id)
        .where(Result.run_id == run_id)
        .order_by(Result.id)
    )
    with store.session() as s:
        return [RunCell(*r) for r in s.execute(q)]


class CatalogOp(NamedTuple):
    op: str
    family: str
    variant: str
    coverage: str  # why the run did not exercise it, where recorded


def catalog_of(store, run_id: int) -> list[CatalogOp]:
    """The ops of a run's torch (its catalog), by qualified name."""
    q = (
        select(Op.qualname, Op.family, Op.variant, CatalogEntry.coverage)
        .join(CatalogEntry, CatalogEntry.op_id == Op.id)
        .where(CatalogEntry.run_id == run_id)
        .order_by(Op.qualname)
    )
    with store.session() as s:
        return [CatalogOp(*r) for r in s.execute(q)]


def passing_cells(store, run_id: int) -> list[tuple[str, str]]:
    """(qualname, dtype) of the cells of a run that passed with at least one example."""
    q = (
        select(Op.qualname, Result.dtype)
        .join(Op, Result.op_id == Op.id)
        .where(Result.run_id == run_id, Result.outcome == "pass", Result.examples_run > 0)
        .order_by(Op.qualname, Result.dtype)
    )
    with store.session() as s:
        return [(q, d) for q, d in s.execute(q)]


def repro_of(store, result_id: int | None) -> str:
    """The reproduction script stored with a result ("" when it has none)."""
    if result_id is None:
        return ""
    with store.session() as s:
        return s.scalar(select(Failure.repro).where(Failure.result_id == result_id)) or ""


# -- timings ----------------------------------------------------------------------------------

TIMING_FIELDS = (
    "shape",
    "layout",
    "numel",
    "device_median_s",
    "device_iqr_s",
    "device_kernel_s",
    "ref_median_s",
    "ref_iqr_s",
    "repeats",
    "device_low_s",
    "device_high_s",
    "device_stable",
    "ref_low_s",
    "ref_high_s",
    "ref_stable",
)


def timing_count(store, run_id: int) -> int:
    with store.session() as s:
        return s.scalar(select(func.count()).select_from(Timing).where(Timing.run_id == run_id)) or 0


def timings_of(store, run_id: int) -> list[dict[str, Any]]:
    """Every timing of a run as dicts (with "speedup" = reference / device time)."""
    q = (
        select(Timing, Op.qualname)
        .join(Op, Timing.op_id == Op.id)
        .where(Timing.run_id == run_id)
        .order_by(Op.qualname, Timing.dtype, Timing.numel)
    )
    out = []
    with store.session() as s:
        for t, qualname in s.execute(q):
            row = {
                "op": qualname,
                "dtype": t.dtype,
                "size_label": t.size_label,
                **{k: getattr(t, k) for k in TIMING_FIELDS},
            }
            row["speedup"] = t.speedup
            out.append(row)
    return out


# -- declared kernels -------------------------------------------------------------------------


def declared_kernels(store, environment_id: int) -> dict[str, dict[str, str]]:
    """{qualname: {dispatch key: how}} of one declared environment (an op declared with no kernel
    at all maps to {})."""
    q = (
        select(Op.qualname, DeclaredKernel.dispatch_key, DeclaredKernel.how)
        .join(Op, DeclaredKernel.op_id == Op.id)
        .where(DeclaredKernel.environment_id == environment_id)
    )
    out: dict[str, dict[str, str]] = {}
    with store.session() as s:
        for qualname, key, how in s.execute(q):
            by_key = out.setdefault(qualname, {})
            if key:
                by_key[key] = how
    return out


# -- the whole store at once, for the site ------------------------------------------------------
# A full sweep is ~3,800 ops x 8 dtypes per environment; ten environments are ~300k results: the
# site reads plain tuples in a few bulk queries, never ORM objects.


class ResultRow(NamedTuple):
    """A result as the site keeps it (every field is a column of `results`)."""

    id: int
    op_id: int
    dtype: str
    outcome: str
    phase: str
    examples_run: int
    examples_passed: int
    max_abs_err: float | None
    max_rel_err: float | None
    max_ulp_err: float | None
    rtol: float | None
    atol: float | None
    device_golden_err: float | None
    ref_golden_err: float | None
    message: str
    duration_s: float
    findings: list | None
    skip_reason: str
    run_id: int  # the run it came from last, for "which run said so"


class TimingRow(NamedTuple):
    op_id: int
    dtype: str
    size_label: str
    shape: list
    numel: int
    device_median_s: float | None
    device_iqr_s: float | None
    ref_median_s: float | None
    ref_iqr_s: float | None
    repeats: int
    layout: str
    run_id: int
    device_low_s: float | None
    device_high_s: float | None
    device_stable: bool | None
    ref_low_s: float | None
    ref_high_s: float | None
    ref_stable: bool | None


@dataclass
class OpRow:
    id: int
    qualname: str
    variant: str
    family: str
    tags: list
    schema: str


class CatalogRow(NamedTuple):
    run_id: int
    op_id: int
    kernels: list
    coverage: str


@dataclass
class Snapshot:
    """Every row the site shows, runs (and what belongs to runs) oldest first, so that a later
    row of the same cell replaces an earlier one when read in order."""

    ops: list[OpRow]
    environments: list[EnvironmentRow]
    runs: list[dict]  # id, uuid, environment_id, state, started_at, finished_at, ops_total, options, seed
    catalog: list[CatalogRow]
    results: list[ResultRow]
    timings: list[TimingRow]
    declared_kernels: list[tuple[int, int, str, str]]  # (environment id, op id, dispatch key, how)


def _columns(model, row_type) -> list:
    return [model.__table__.c[name] for name in row_type._fields]


def _by_run(c, model, row_type, *then) -> list:
    """Every row of a table that belongs to runs, as `row_type`, oldest run first (then `then`)."""
    query = select(*_columns(model, row_type)).join(Run, model.run_id == Run.id)
    return [row_type._make(r) for r in c.execute(query.order_by(Run.started_at, Run.id, *then))]


def snapshot(store) -> Snapshot:
    """The whole store in bulk (failing cases and scripts apart: see `failures`)."""
    with store.engine.connect() as c:
        ops = [
            OpRow(r.id, r.qualname, r.variant, r.family, list(r.tags or []), r.schema or "")
            for r in c.execute(select(Op.id, Op.qualname, Op.variant, Op.family, Op.tags, Op.schema))
        ]
        envs = [
            EnvironmentRow(**{f.name: r[f.name] for f in dataclasses.fields(EnvironmentRow)})
            for r in c.execute(select(Environment.__table__)).mappings()
        ]
        runs = [
            dict(r._mapping)
            for r in c.execute(
                select(
                    Run.id,
                    Run.uuid,
                    Run.environment_id,
                    Run.state,
                    Run.started_at,
                    Run.finished_at,
                    Run.ops_total,
                    Run.options,
                    Run.seed,
                ).order_by(Run.started_at, Run.id)
            )
        ]
        catalog = _by_run(c, CatalogEntry, CatalogRow)
        results = _by_run(c, Result, ResultRow, Result.id)
        timings = _by_run(c, Timing, TimingRow, Timing.id)
        t = DeclaredKernel.__table__
        declared = [tuple(r) for r in c.execute(select(t.c.environment_id, t.c.op_id, t.c.dispatch_key, t.c.how))]
    return Snapshot(ops, envs, runs, catalog, results, timings, declared)


def failures(store, result_ids: set[int]) -> dict[int, tuple]:
    """{result id: (case, repro, traceback, further failures)} of those results that have a stored
    failure (the further failures: CellResult.further_failures, [] where none)."""
    out = {}
    with store.engine.connect() as c:
        for rid, case, repro, tb, further in c.execute(
            select(Failure.result_id, Failure.case, Failure.repro, Failure.traceback, Failure.further_failures)
        ):
            if rid in result_ids:
                out[rid] = (case, repro or "", tb or "", further or [])
    return out


__all__ = [
    "CatalogOp", "CatalogRow", "CellRow", "EnvironmentRow", "OpRow", "ResultRow", "RunCell", "RunRow", "Snapshot", "TimingRow",
    "TIMING_FIELDS", "catalog_of", "declared_kernels", "failures", "environment", "environments", "latest_cells", "latest_run_id",
    "passing_cells", "repro_of", "run", "run_cells", "run_id_of", "runs_of", "snapshot", "timing_count", "timings_of",
]  # fmt: skip

"""Copying the rows of one conform database into another (`conform merge`).

Rows are matched by their stable keys, never by their ids (which differ from one database to the
next): environments by `fingerprint`, runs by `uuid`, ops by `qualname`, a run's catalog entry by
(run, op), a result by its cell (run, op, dtype), a timing by (run, op, dtype, size), a declared
kernel by (environment, op, key), a model verdict by (environment, model, dtype, mode, time). A row whose key is already in the destination is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import inspect, select

from conform.store.db import Store
from conform.store.models import (
    CatalogEntry,
    DeclaredKernel,
    Environment,
    Failure,
    ModelOp,
    ModelResult,
    Op,
    Result,
    Run,
    SchemaMigration,
    Timing,
)

KNOWN_TABLES = {
    t.__tablename__
    for t in (
        SchemaMigration,
        Environment,
        Run,
        Op,
        CatalogEntry,
        Result,
        Failure,
        Timing,
        DeclaredKernel,
        ModelResult,
        ModelOp,
    )
}
BATCH = 2000


@dataclass
class MergeStats:
    source: str
    environments: int = 0
    runs: int = 0
    runs_extended: int = 0  # runs already there that gained rows
    ops: int = 0
    catalog_entries: int = 0
    results: int = 0
    failures: int = 0
    timings: int = 0
    declared_kernels: int = 0
    models: int = 0  # model verdicts (conform model)
    skipped_tables: list[str] = field(default_factory=list)

    @property
    def added(self) -> int:
        return (
            self.environments
            + self.runs
            + self.ops
            + self.catalog_entries
            + self.results
            + self.timings
            + self.declared_kernels
            + self.models
        )

    def to_dict(self) -> dict:
        return {**self.__dict__, "added": self.added}


def _columns(model, *, without=("id",)) -> list[str]:
    return [c.key for c in model.__table__.columns if c.key not in without]


def _insert(conn, model, rows: list[dict]) -> None:
    for i in range(0, len(rows), BATCH):
        conn.execute(model.__table__.insert(), rows[i : i + BATCH])


def merge_into(dest, source) -> MergeStats:
    """Copy into `dest` every row of `source` whose key `dest` lacks; returns what was added."""
    stats = MergeStats(source=source.where)
    with source.engine.connect() as src_tables:
        tables = set(inspect(src_tables).get_table_names())
    stats.skipped_tables = sorted(tables - KNOWN_TABLES)
    with source.engine.connect() as src, dest.engine.begin() as dst:
        env_map = _merge_environments(src, dst, stats)
        op_map = _merge_ops(src, dst, stats)
        run_rows = (
            src.execute(select(*[Run.__table__.c[k] for k in ["id", *_columns(Run)]]).order_by(Run.id)).mappings().all()
        )
        for row in run_rows:
            _merge_run(src, dst, dict(row), env_map, op_map, stats)
        if DeclaredKernel.__tablename__ in tables:
            _merge_declared(src, dst, env_map, op_map, stats)
        if ModelResult.__tablename__ in tables:
            _merge_models(src, dst, env_map, op_map, stats)
    return stats


def _merge_models(src, dst, env_map, op_map, stats: MergeStats) -> None:
    t, ops = ModelResult.__table__, ModelOp.__table__
    key = (t.c.environment_id, t.c.spec, t.c.dtype, t.c.train, t.c.created_at)
    have = set(dst.execute(select(*key)).all())
    cols = _columns(ModelResult)
    for r in src.execute(select(t).order_by(t.c.id)).mappings().all():
        row = {k: r[k] for k in cols}
        row["environment_id"] = env_map[r["environment_id"]]
        if tuple(row[c.key] for c in key) in have:
            continue
        new_id = dst.execute(t.insert().values(row)).inserted_primary_key[0]
        op_rows = [
            {**o, "model_result_id": new_id, "op_id": op_map[o["op_id"]]}
            for o in src.execute(select(ops).where(ops.c.model_result_id == r["id"])).mappings()
        ]
        _insert(dst, ModelOp, op_rows)
        stats.models += 1


def _merge_environments(src, dst, stats: MergeStats) -> dict[int, int]:
    known = dict(dst.execute(select(Environment.fingerprint, Environment.id)).all())
    env_map = {}
    cols = _columns(Environment)
    for row in src.execute(select(Environment.__table__)).mappings():
        if row["fingerprint"] not in known:
            new = dst.execute(Environment.__table__.insert().values({k: row[k] for k in cols}))
            known[row["fingerprint"]] = new.inserted_primary_key[0]
            stats.environments += 1
        env_map[row["id"]] = known[row["fingerprint"]]
    return env_map


def _merge_ops(src, dst, stats: MergeStats) -> dict[int, int]:
    known = dict(dst.execute(select(Op.qualname, Op.id)).all())
    cols = _columns(Op)
    rows = src.execute(select(Op.__table__)).mappings().all()
    missing = [{k: r[k] for k in cols} for r in rows if r["qualname"] not in known]
    if missing:
        _insert(dst, Op, missing)
        known = dict(dst.execute(select(Op.qualname, Op.id)).all())
        stats.ops += len(missing)
    return {r["id"]: known[r["qualname"]] for r in rows}


def _merge_run(src, dst, row: dict, env_map, op_map, stats: MergeStats) -> None:
    src_run = row.pop("id")
    existing = dst.execute(select(Run.id, Run.state).where(Run.uuid == row["uuid"])).first()
    if existing is None:
        row["environment_id"] = env_map[row["environment_id"]]
        run_id = dst.execute(Run.__table__.insert().values(row)).inserted_primary_key[0]
        stats.runs += 1
    else:
        run_id = existing.id
        if existing.state == "running" and row["state"] != "running":
            # the source holds the finished copy of a run the destination saw still going
            dst.execute(
                Run.__table__.update()
                .where(Run.id == run_id)
                .values(state=row["state"], finished_at=row["finished_at"])
            )
    before = stats.catalog_entries + stats.results + stats.timings

    # catalog entries: key (run, op)
    have = set(dst.execute(select(CatalogEntry.op_id).where(CatalogEntry.run_id == run_id)).scalars())
    rows = []
    for r in src.execute(select(CatalogEntry.__table__).where(CatalogEntry.run_id == src_run)).mappings():
        op = op_map[r["op_id"]]
        if op not in have:
            rows.append({**r, "run_id": run_id, "op_id": op})
    _insert(dst, CatalogEntry, rows)
    stats.catalog_entries += len(rows)

    # results and their failures: key (run, op, dtype)
    have = set(dst.execute(select(Result.op_id, Result.dtype).where(Result.run_id == run_id)).all())
    cols = _columns(Result)
    rows, src_ids = [], {}
    for r in src.execute(select(Result.__table__).where(Result.run_id == src_run)).mappings():
        key = (op_map[r["op_id"]], r["dtype"])
        if key in have:
            continue
        rows.append({**{k: r[k] for k in cols}, "run_id": run_id, "op_id": key[0]})
        src_ids[r["id"]] = key
    _insert(dst, Result, rows)
    stats.results += len(rows)
    if src_ids:
        new_ids = {
            (op, dt): rid
            for rid, op, dt in dst.execute(select(Result.id, Result.op_id, Result.dtype).where(Result.run_id == run_id))
        }
        fcols = _columns(Failure, without=("id", "result_id"))
        frows = []
        q = select(Failure.__table__).join(Result, Failure.result_id == Result.id).where(Result.run_id == src_run)
        for f in src.execute(q).mappings():
            if f["result_id"] in src_ids:
                frows.append({**{k: f[k] for k in fcols}, "result_id": new_ids[src_ids[f["result_id"]]]})
        _insert(dst, Failure, frows)
        stats.failures += len(frows)

    # timings: key (run, op, dtype, size)
    have = set(dst.execute(select(Timing.op_id, Timing.dtype, Timing.size_label).where(Timing.run_id == run_id)).all())
    cols = _columns(Timing)
    rows = []
    for r in src.execute(select(Timing.__table__).where(Timing.run_id == src_run)).mappings():
        key = (op_map[r["op_id"]], r["dtype"], r["size_label"])
        if key not in have:
            rows.append({**{k: r[k] for k in cols}, "run_id": run_id, "op_id": key[0]})
    _insert(dst, Timing, rows)
    stats.timings += len(rows)

    if existing is not None and stats.catalog_entries + stats.results + stats.timings > before:
        stats.runs_extended += 1


def _merge_declared(src, dst, env_map, op_map, stats: MergeStats) -> None:
    t = DeclaredKernel.__table__
    have = set(dst.execute(select(t.c.environment_id, t.c.op_id, t.c.dispatch_key)).all())
    rows = []
    for r in src.execute(select(t)).mappings():
        row = {**r, "environment_id": env_map[r["environment_id"]], "op_id": op_map[r["op_id"]]}
        if (row["environment_id"], row["op_id"], row["dispatch_key"]) not in have:
            rows.append(row)
    _insert(dst, DeclaredKernel, rows)
    stats.declared_kernels += len(rows)


def merge_databases(sources, dest, *, create: bool = True) -> list[MergeStats]:
    """Merge the databases `sources` (paths or URLs) into `dest`, in order."""
    for path in sources:  # a damaged or foreign source is refused before `dest` is created or changed
        Store(path, readonly=True).close()
    out = Store(dest, create=create)
    try:
        stats = []
        for path in sources:
            src = Store(path, readonly=True)
            try:
                if src.url == out.url or src.where == out.where:
                    stats.append(MergeStats(source=src.where))  # merging a database into itself adds nothing
                    continue
                stats.append(out._guard(lambda: merge_into(out, src)))
            finally:
                src.close()
        return stats
    finally:
        out.close()

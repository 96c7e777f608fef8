"""Recorded schema migrations.

A fresh database is created at `SCHEMA_VERSION` directly. An older database is brought up to
date by applying, in order, every step whose version is above the database's; each applied step
is recorded in the `conform_schema` table. To change the schema: edit models.py, bump
SCHEMA_VERSION, and append a `(version, description, function(connection))` step here.

Both functions take a connection whose transaction the caller holds (and, with several writers,
locks: see `Store._check_schema`), so a schema is created or upgraded all at once or not at all.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text

from conform.store.models import SCHEMA_VERSION, Base, DeclaredKernel, ModelOp, ModelResult, SchemaMigration


def _add_declared_kernels(conn: Connection) -> None:
    DeclaredKernel.__table__.create(conn, checkfirst=True)


def _add_findings_and_skip_reason(conn: Connection) -> None:
    # plain ALTER TABLE: SQLite and PostgreSQL both add a nullable or defaulted column in place;
    # a column already there (a database a newer conform created, its version row rolled back) stays
    have = {c["name"] for c in inspect(conn).get_columns("results")}
    if "findings" not in have:
        conn.execute(text("ALTER TABLE results ADD COLUMN findings JSON"))
    if "skip_reason" not in have:
        conn.execute(text("ALTER TABLE results ADD COLUMN skip_reason VARCHAR(24) NOT NULL DEFAULT ''"))


def _add_model_results(conn: Connection) -> None:
    ModelResult.__table__.create(conn, checkfirst=True)
    ModelOp.__table__.create(conn, checkfirst=True)


TIMING_UNCERTAINTY = {
    "device_low_s": "FLOAT",
    "device_high_s": "FLOAT",
    "device_stable": "BOOLEAN",
    "ref_low_s": "FLOAT",
    "ref_high_s": "FLOAT",
    "ref_stable": "BOOLEAN",
}


def _add_timing_uncertainty(conn: Connection) -> None:
    have = {c["name"] for c in inspect(conn).get_columns("timings")}
    for name, kind in TIMING_UNCERTAINTY.items():
        if name not in have:
            conn.execute(text(f"ALTER TABLE timings ADD COLUMN {name} {kind}"))


def _add_further_failures(conn: Connection) -> None:
    if "further_failures" not in {c["name"] for c in inspect(conn).get_columns("failures")}:
        conn.execute(text("ALTER TABLE failures ADD COLUMN further_failures JSON"))


# (version, description, upgrade(conn)); version 1 is the initial schema, made by create_all.
MIGRATIONS: list[tuple[int, str, callable]] = [
    (2, "declared_kernels: kernels a torch release declares per op and dispatch key", _add_declared_kernels),
    (
        3,
        "results.findings (reference findings, precision edges) and results.skip_reason",
        _add_findings_and_skip_reason,
    ),
    (4, "model_results and model_ops: per-model verdicts (conform model)", _add_model_results),
    (
        5,
        "timings: each side's interval and whether it is stable (an unstable timing has no median)",
        _add_timing_uncertainty,
    ),
    (6, "failures.further_failures: a cell's failures of other kinds after its first", _add_further_failures),
]


def create_all(conn: Connection) -> None:
    Base.metadata.create_all(conn)
    conn.execute(SchemaMigration.__table__.insert(), [{"version": SCHEMA_VERSION, "description": "initial schema"}])


def upgrade(conn: Connection, from_version: int) -> None:
    for version, description, step in MIGRATIONS:
        if version > from_version:
            step(conn)
            conn.execute(SchemaMigration.__table__.insert(), [{"version": version, "description": description}])
    # tables added since (new tables need no data migration)
    Base.metadata.create_all(conn)

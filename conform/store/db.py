"""Opening conform's store and writing to it.

One writer: only the controller process of a run (never an xdist worker) opens a `Store` for
writing. Each result is written in its own small transaction as it arrives, so a crash or a
kill -9 loses at most the cell in flight.

A fleet is several runs (one controller per machine) writing into one database, e.g. PostgreSQL,
at the same time. Every write here is therefore safe against a concurrent writer doing the same:
rows that must be unique (an environment's fingerprint, an op's qualname, a run's cell) are
inserted with "on conflict do nothing" and read back, and creating or upgrading the schema is
serialised by a lock (an advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import sqlite3
import time
import uuid as uuidlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import String, create_engine, delete, event, func, insert, inspect, select, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from conform.errors import StoreError, first_line
from conform.results import NOT_STORED, CellResult
from conform.store import migrations
from conform.store.models import (
    SCHEMA_VERSION,
    CatalogEntry,
    DeclaredKernel,
    Environment,
    Failure,
    Op,
    Result,
    Run,
    SchemaMigration,
    utcnow,
)

DEFAULT_DB = "conform.db"


def _result_columns() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Which CellResult fields are columns of `results` and which of `failures`: the one place
    where the result type and the schema meet. A field with no column (and not in NOT_STORED)
    stops conform at import, not silently at the first run."""
    result_cols, failure_cols = set(Result.__table__.columns.keys()), set(Failure.__table__.columns.keys())
    in_results, in_failures, homeless = [], [], []
    for f in dataclasses.fields(CellResult):
        if f.name in ("op", "dtype") or f.name in NOT_STORED:  # the cell's key: results.op_id, results.dtype
            continue
        (in_results if f.name in result_cols else in_failures if f.name in failure_cols else homeless).append(f.name)
    if homeless:
        raise TypeError(
            f"CellResult fields with no column in the store: {', '.join(homeless)} (add a column and a migration, or NOT_STORED)"
        )
    return tuple(in_results), tuple(in_failures)


RESULT_COLUMNS, FAILURE_COLUMNS = _result_columns()


def database_url(path_or_url: str | os.PathLike | None) -> str:
    """A SQLAlchemy URL for `--db`: a URL as given, or a file path made into a SQLite URL."""
    value = str(path_or_url or os.environ.get("CONFORM_DB") or DEFAULT_DB)
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


def _describe(url: str) -> str:
    try:
        u = make_url(url)
    except ArgumentError:
        return url
    if u.drivername.startswith("sqlite"):
        return u.database or ":memory:"
    return u.render_as_string(hide_password=True)


def _sqlite_pragmas(store: Store):
    def on_connect(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 30000")
        # journal_mode = WAL rewrites the file's header: only once the file is known to be
        # conform's (or a new one), never on another application's database
        if store._wal:
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    return on_connect


def _finite(obj):
    """obj with NaN and infinities as strings: PostgreSQL's json type rejects bare NaN."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_dumps(obj) -> str:
    try:
        return json.dumps(obj, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(obj))


# PostgreSQL text cannot hold NUL characters (SQLite can); a traceback or message may carry one.
def _text(value):
    return value.replace("\x00", "\\x00") if isinstance(value, str) else value


# How long a SQLite writer keeps trying a transaction that found the database locked. busy_timeout
# waits for a lock only where SQLite may wait: a WAL transaction whose snapshot another writer
# made stale (SQLITE_BUSY_SNAPSHOT), a journal-mode switch and WAL recovery answer "database is
# locked" at once (sqlite.org/rescode.html#busy_snapshot, sqlite.org/wal.html). The whole
# transaction, rolled back, runs again.
_LOCKED_RETRY_S = 60.0


def _locked(e: BaseException) -> bool:
    return "database is locked" in str(e) or "database table is locked" in str(e)


# An arbitrary constant: the key of the advisory lock that serialises schema changes on PostgreSQL.
_SCHEMA_LOCK_KEY = 0x636F6E66  # "conf"


class Store:
    """A conform database. `Store(None)` opens ./conform.db (or $CONFORM_DB)."""

    def __init__(self, path_or_url: str | os.PathLike | None = None, *, readonly: bool = False, create: bool = True):
        self.url = database_url(path_or_url)
        self.where = _describe(self.url)
        self.readonly = readonly
        url = make_url(self.url)
        self.is_sqlite = url.drivername.startswith("sqlite")
        self.is_postgresql = url.get_backend_name() == "postgresql"
        kwargs: dict[str, Any] = {}
        if self.is_sqlite:
            db = url.database
            if db and db != ":memory:":
                p = Path(db)
                if not p.exists():
                    if readonly or not create:
                        raise StoreError(f"no conform database at {p}")
                    if not p.parent.exists():
                        raise StoreError(f"cannot create database {p}: folder {p.parent} does not exist")
                    if not os.access(p.parent, os.W_OK):
                        raise StoreError(f"cannot create database {p}: folder {p.parent} is not writable")
                elif not readonly and not os.access(p, os.W_OK):
                    raise StoreError(f"database {p} is read-only; use a writable copy or --db elsewhere")
                if readonly:
                    self.url = f"sqlite:///file:{p}?mode=ro&uri=true"
            kwargs["connect_args"] = {"timeout": 30}
        else:
            # a fleet's database is on the network: survive a server restart between writes
            kwargs["pool_pre_ping"] = True
            if url.get_backend_name() == "postgresql":
                kwargs["json_serializer"] = _json_dumps
        try:
            self.engine: Engine = create_engine(self.url, **kwargs)
        except ImportError as e:
            hint = " (pip install 'conform[postgres]')" if url.get_backend_name() == "postgresql" else ""
            raise StoreError(f"cannot open database {self.where}: {_driver_message(e)}{hint}") from None
        except (ArgumentError, SQLAlchemyError) as e:
            raise StoreError(f"cannot open database {self.where}: {_driver_message(e)}") from None
        self._wal = False
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas(self))
        self._session_factory = sessionmaker(self.engine, expire_on_commit=False)
        self._op_ids: dict[str, int] = {}
        self._check_schema(create=create and not readonly)

    # -- schema ------------------------------------------------------------------------------

    def _check_schema(self, *, create: bool) -> None:
        """Refuse a file that is not conform's, is damaged, or is too new, before anything is
        written to it; then switch a writable SQLite file to WAL and create or upgrade the schema."""
        try:
            with self.engine.connect() as conn:
                state = self._schema_state(conn)
                if self.is_sqlite and state is not None:
                    self._check_integrity(conn)
        except (DatabaseError, sqlite3.DatabaseError) as e:
            if _is_damage(e):
                raise StoreError(f"{self.where} is damaged: {_driver_message(e)}") from None
            raise StoreError(f"{self.where} is not a readable conform database: {_driver_message(e)}") from None
        except SQLAlchemyError as e:
            raise StoreError(f"cannot open database {self.where}: {_driver_message(e)}") from None
        if self.is_sqlite and not self.readonly:
            self._wal = True
            self.engine.dispose()  # the pooled connection was opened without WAL
        if state == SCHEMA_VERSION:
            return
        if state is None and not create:
            raise StoreError(f"{self.where} is empty: no conform results there yet")
        if state is not None and state < SCHEMA_VERSION and self.readonly:
            raise StoreError(
                f"{self.where} has schema version {state}; open it writable once to migrate it to {SCHEMA_VERSION}"
            )
        # Create or upgrade under a lock, looking again once it is held: several fleet machines
        # may open the same fresh (or old) database at once, and only one must change it.
        self._guard(self._change_schema)

    def _check_integrity(self, conn) -> None:
        """A damaged page (a disk error, a file copied while written) fails here, at open, with
        one clear error, not as a traceback in the middle of a report or a run. quick_check reads
        every page once but skips the index cross-checks of integrity_check."""
        problems = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check(1)")]
        if problems != ["ok"]:
            # "*** in database main ***\nPage 1946: btreeInitPage() returns error code 11"
            detail = "; ".join(line for p in problems for line in str(p).splitlines() if not line.startswith("***"))
            raise StoreError(f"{self.where} is damaged: database disk image is malformed ({detail})")

    def _schema_state(self, conn) -> int | None:
        """The schema version (None: an empty database); StoreError if foreign or too new."""
        tables = set(inspect(conn).get_table_names())
        if SchemaMigration.__tablename__ not in tables:
            if tables:
                raise StoreError(
                    f"{self.where} is not a conform database (it has tables {', '.join(sorted(tables)[:5])})"
                )
            return None
        v = conn.execute(text(f"SELECT MAX(version) FROM {SchemaMigration.__tablename__}")).scalar()
        version = int(v or 0)
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.where} has schema version {version}, newer than this conform understands ({SCHEMA_VERSION}); upgrade conform"
            )
        return version

    def _change_schema(self) -> None:
        with self.engine.connect() as conn:
            if self.is_sqlite:
                # pysqlite leaves DDL outside a transaction unless one is begun by hand; IMMEDIATE
                # takes the write lock now (waiting up to busy_timeout for another writer).
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif self.is_postgresql:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _SCHEMA_LOCK_KEY})
            state = self._schema_state(conn)
            if state is None:
                migrations.create_all(conn)
            elif state < SCHEMA_VERSION:
                migrations.upgrade(conn, state)
            conn.commit()

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            v = conn.execute(text(f"SELECT MAX(version) FROM {SchemaMigration.__tablename__}")).scalar()
        return int(v or 0)

    def _guard(self, fn):
        try:
            return self._locked_retrying(fn)
        except OperationalError as e:
            msg = _driver_message(e)
            if "disk" in msg.lower() and "full" in msg.lower():
                raise StoreError(f"disk full while writing {self.where}; nothing half-written was kept") from None
            if "readonly" in msg.lower() or "read-only" in msg.lower():
                raise StoreError(f"{self.where} is read-only") from None
            raise StoreError(f"database error on {self.where}: {msg}") from None
        except (DatabaseError, sqlite3.DatabaseError) as e:
            if _is_damage(e):
                raise StoreError(f"{self.where} is damaged: {_driver_message(e)}") from None
            raise StoreError(f"database error on {self.where}: {_driver_message(e)}") from None

    def _locked_retrying(self, fn):
        """fn(), again while SQLite answers "database is locked" (see _LOCKED_RETRY_S)."""
        if not self.is_sqlite:
            return fn()
        deadline, pause = time.monotonic() + _LOCKED_RETRY_S, 0.01
        while True:
            try:
                return fn()
            except OperationalError as e:
                if not _locked(e) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    # -- sessions ----------------------------------------------------------------------------

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on any error."""
        with self._session_factory() as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    def write(self, fn):
        """Run fn(session) in its own transaction, with database errors turned into StoreError."""

        def go():
            with self.session() as s:
                return fn(s)

        return self._guard(go)

    # -- environments and runs ---------------------------------------------------------------

    def environment_id(self, env: dict[str, Any]) -> int:
        """The id of the environment with this fingerprint, created if new (one row per
        fingerprint even when several machines create it at the same moment)."""
        columns = {c.key: c for c in Environment.__table__.columns}
        row = {}
        for k, v in env.items():
            if k in columns and k not in ("id", "created_at"):
                length = getattr(columns[k].type, "length", None) if isinstance(columns[k].type, String) else None
                row[k] = v[:length] if length and isinstance(v, str) else v
        if "details" in row:
            row["details"] = dict(row["details"] or {})

        def find(s: Session):
            return s.scalar(select(Environment.id).where(Environment.fingerprint == env["fingerprint"]))

        def go(s: Session) -> int:
            found = find(s)
            if found is None:
                self._insert_ignoring_conflict(s, Environment, [row], ["fingerprint"])
                found = find(s)
            return found

        return self._write_retrying(go)

    def start_run(
        self,
        env: dict[str, Any],
        *,
        options: dict[str, Any],
        seed: int,
        ops_total: int,
        cells_planned: int,
        conform_version: str = "",
    ) -> int:
        env_id = self.environment_id(env)

        def go(s: Session) -> int:
            run = Run(
                uuid=str(uuidlib.uuid4()),
                environment_id=env_id,
                seed=seed,
                options=options,
                ops_total=ops_total,
                cells_planned=cells_planned,
                conform_version=conform_version,
            )
            s.add(run)
            s.flush()
            return run.id

        return self.write(go)

    def set_run_state(self, run_id: int, state: str) -> None:
        def go(s: Session):
            run = s.get(Run, run_id)
            run.state = state
            if state != "running":
                run.finished_at = utcnow()

        self.write(go)

    def latest_run_id(self, *, kind: str = "measured") -> int | None:
        with self.session() as s:
            return s.scalar(
                select(Run.id)
                .join(Environment)
                .where(Environment.kind == kind)
                .order_by(Run.started_at.desc(), Run.id.desc())
                .limit(1)
            )

    def get_run(self, run_id: int) -> Run | None:
        with self.session() as s:
            return s.get(Run, run_id)

    # -- ops ---------------------------------------------------------------------------------

    def op_ids(self, specs) -> dict[str, int]:
        """Ids for these OpSpecs, inserting the ones not yet known (in one transaction)."""
        rows = [
            {
                "qualname": sp.qualname,
                "variant": sp.variant,
                "family": sp.family,
                "tags": list(sp.tags),
                "schema": sp.schema,
            }
            for sp in specs
            if sp.qualname not in self._op_ids
        ]
        self._ensure_ops(rows)
        return {sp.qualname: self._op_ids[sp.qualname] for sp in specs}

    def _ensure_ops(self, rows: list[dict[str, Any]]) -> None:
        """Insert the ops (dicts of Op columns) not yet stored; remember every id."""
        missing = {r["qualname"]: r for r in rows if r["qualname"] not in self._op_ids}
        if not missing:
            return

        def go(s: Session):
            known = dict(s.execute(select(Op.qualname, Op.id)).all())
            new = [r for q, r in missing.items() if q not in known]
            if new:
                self._insert_ignoring_conflict(s, Op, new, ["qualname"])
                known = dict(s.execute(select(Op.qualname, Op.id)).all())
            return known

        self._op_ids.update(self._write_retrying(go))

    def op_id(self, qualname: str) -> int | None:
        if qualname not in self._op_ids:
            with self.session() as s:
                found = s.scalar(select(Op.id).where(Op.qualname == qualname))
            if found is None:
                return None
            self._op_ids[qualname] = found
        return self._op_ids[qualname]

    def record_catalog(self, run_id: int, specs) -> None:
        ids = self.op_ids(specs)

        def go(s: Session):
            have = set(s.scalars(select(CatalogEntry.op_id).where(CatalogEntry.run_id == run_id)))
            rows = {ids[sp.qualname]: list(sp.kernels) for sp in specs if ids[sp.qualname] not in have}
            if rows:
                s.execute(insert(CatalogEntry), [{"run_id": run_id, "op_id": i, "kernels": k} for i, k in rows.items()])

        self.write(go)

    # -- results -----------------------------------------------------------------------------

    def record_result(self, run_id: int, result: CellResult) -> bool:
        """Store one cell's result. False if that cell was already recorded for this run (a
        resumed run never duplicates a cell)."""
        op_id = self.op_id(result.op)
        if op_id is None:
            raise StoreError(f"result for an op not in the catalog: {result.op}")
        values = {k: _text(v) for k in RESULT_COLUMNS if (v := getattr(result, k)) is not None}
        failure = {k: _text(getattr(result, k)) for k in FAILURE_COLUMNS}
        if failure["case"] is None and not failure["repro"] and not failure["traceback"]:
            failure = None

        stmt = self._result_insert

        def go(s: Session) -> bool:
            if stmt is None:
                # no INSERT that skips a stored row: look first (another writer may still record
                # the same cell between the two; the unique key refuses it then)
                exists = s.scalar(
                    select(Result.id).where(
                        Result.run_id == run_id, Result.op_id == op_id, Result.dtype == result.dtype
                    )
                )
                if exists is not None:
                    return False
                res = Result(run_id=run_id, op_id=op_id, dtype=result.dtype, **values)
                s.add(res)
                s.flush()
                result_id = res.id
            else:
                # on the session's connection, not through the ORM: this runs once per cell, in
                # the process that schedules the workers, and the ORM's insert cost twice as much
                row = {"run_id": run_id, "op_id": op_id, "dtype": result.dtype, "created_at": utcnow(), **values}
                result_id = s.connection().execute(stmt, row).scalar()
                if result_id is None:
                    return False
            if failure is not None:
                s.connection().execute(insert(Failure.__table__), [{"result_id": result_id, **failure}])
            return True

        try:
            return self.write(go)
        except StoreError as e:
            if isinstance(e.__context__, IntegrityError):
                return False
            raise

    def recorded_cells(self, run_id: int) -> set[tuple[str, str]]:
        """(qualname, dtype) of every cell this run already holds."""
        with self.session() as s:
            rows = s.execute(
                select(Op.qualname, Result.dtype).join(Op, Result.op_id == Op.id).where(Result.run_id == run_id)
            ).all()
        return {(q, d) for q, d in rows}

    def outcome_counts(self, run_id: int) -> dict[str, int]:
        """{outcome: cells} of one run."""
        with self.session() as s:
            rows = s.execute(
                select(Result.outcome, func.count()).where(Result.run_id == run_id).group_by(Result.outcome)
            ).all()
        return {o: n for o, n in rows}

    # -- declared kernels --------------------------------------------------------------------

    def record_declared(
        self, env: dict[str, Any], kernels: dict[str, dict[str, str]], ops: dict[str, dict[str, Any]] | None = None
    ) -> int:
        """Store what a torch release declares: `kernels` maps an op's qualname to {dispatch key:
        how} (see models.DeclaredKernel). `ops` may give Op columns (schema, variant) for ops not
        stored yet. Replaces whatever that environment held, in one transaction. Returns its id."""
        env = dict(env, kind="declared")
        env_id = self.environment_id(env)
        ops = ops or {}
        self._ensure_ops(
            [{"qualname": q, **{k: v for k, v in ops.get(q, {}).items() if k != "qualname"}} for q in kernels]
        )
        rows = [
            {"environment_id": env_id, "op_id": self._op_ids[q], "dispatch_key": key, "how": how}
            for q, by_key in kernels.items()
            # an op declared with no kernel anywhere still counts in that release's total
            for key, how in (by_key.items() if by_key else [("", "none")])
        ]

        def go(s: Session):
            s.execute(delete(DeclaredKernel).where(DeclaredKernel.environment_id == env_id))
            if rows:
                s.execute(insert(DeclaredKernel), rows)
            e = s.get(Environment, env_id)
            e.details = dict(env.get("details") or {})

        self._write_retrying(go)
        return env_id

    # -- concurrent writers ------------------------------------------------------------------

    @functools.cached_property
    def _result_insert(self):
        """record_result's INSERT, built once (its values come as parameters): None where the
        database has no INSERT that skips a stored row."""
        stmt = self._conflict_insert(Result.__table__, ["run_id", "op_id", "dtype"])
        return None if stmt is None else stmt.returning(Result.id)

    def _conflict_insert(self, model, index_elements: list[str]):
        """An INSERT that skips a row whose unique key exists, where the database can say so."""
        name = self.engine.dialect.name
        if name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert  # only the dialect in use
        elif name == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert  # only the dialect in use
        else:
            return None
        return dialect_insert(model).on_conflict_do_nothing(index_elements=index_elements)

    def _insert_ignoring_conflict(
        self, s: Session, model, rows: list[dict[str, Any]], index_elements: list[str]
    ) -> None:
        stmt = self._conflict_insert(model, index_elements)
        if stmt is None:
            s.execute(insert(model), rows)  # a conflict raises; _write_retrying tries again
        else:
            s.execute(stmt, rows)

    def _write_retrying(self, fn, attempts: int = 5):
        """write(fn), again after a conflict with a concurrent writer (fn must look before it inserts)."""
        for attempt in range(attempts):
            try:
                return self.write(fn)
            except StoreError as e:
                if not isinstance(e.__context__, IntegrityError) or attempt == attempts - 1:
                    raise

    def close(self) -> None:
        self.engine.dispose()


def _is_damage(e: BaseException) -> bool:
    msg = _driver_message(e).lower()
    return "malformed" in msg or "corrupt" in msg


def _driver_message(e: BaseException) -> str:
    """The database driver's own message (SQLAlchemy wraps it in `orig`), on one line."""
    return first_line(str(getattr(e, "orig", None) or e)) or type(e).__name__

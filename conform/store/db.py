"""Opening conform's store and writing to it.

One writer: only the controller process of a run (never an xdist worker) opens a `Store` for
writing. Each result is written in its own small transaction as it arrives, so a crash or a
kill -9 loses at most the cell in flight.
"""

from __future__ import annotations

import os
import sqlite3
import uuid as uuidlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from sqlalchemy import create_engine, event, inspect, select, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from ..errors import StoreError
from . import migrations
from .models import SCHEMA_VERSION, CatalogEntry, Environment, Failure, Op, Result, Run, SchemaMigration, utcnow

DEFAULT_DB = "conform.db"

RESULT_FIELDS = (
    "outcome",
    "phase",
    "examples_run",
    "examples_passed",
    "max_abs_err",
    "max_rel_err",
    "max_ulp_err",
    "rtol",
    "atol",
    "device_golden_err",
    "ref_golden_err",
    "message",
    "duration_s",
)


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


def _sqlite_pragmas(readonly: bool):
    def on_connect(dbapi_conn, _record):
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA busy_timeout = 30000")
        if not readonly:
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    return on_connect


class Store:
    """A conform database. `Store(None)` opens ./conform.db (or $CONFORM_DB)."""

    def __init__(self, path_or_url: str | os.PathLike | None = None, *, readonly: bool = False, create: bool = True):
        self.url = database_url(path_or_url)
        self.where = _describe(self.url)
        self.readonly = readonly
        url = make_url(self.url)
        self.is_sqlite = url.drivername.startswith("sqlite")
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
        try:
            self.engine: Engine = create_engine(self.url, **kwargs)
        except (ArgumentError, ImportError, SQLAlchemyError) as e:
            raise StoreError(f"cannot open database {self.where}: {_first_line(e)}") from None
        if self.is_sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas(readonly))
        self._session_factory = sessionmaker(self.engine, expire_on_commit=False)
        self._op_ids: dict[str, int] = {}
        self._check_schema(create=create and not readonly)

    # -- schema ------------------------------------------------------------------------------

    def _check_schema(self, *, create: bool) -> None:
        try:
            with self.engine.connect() as conn:
                tables = set(inspect(conn).get_table_names())
        except (DatabaseError, sqlite3.DatabaseError) as e:
            raise StoreError(f"{self.where} is not a readable conform database: {_first_line(e)}") from None
        except SQLAlchemyError as e:
            raise StoreError(f"cannot open database {self.where}: {_first_line(e)}") from None
        if SchemaMigration.__tablename__ not in tables:
            if tables and not create:
                raise StoreError(f"{self.where} is not a conform database (it has tables {', '.join(sorted(tables)[:5])})")
            if tables - {SchemaMigration.__tablename__}:
                raise StoreError(f"{self.where} is not a conform database (it has tables {', '.join(sorted(tables)[:5])})")
            if not create:
                raise StoreError(f"{self.where} is empty: no conform results there yet")
            self._guard(lambda: migrations.create_all(self.engine))
            return
        version = self.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.where} has schema version {version}, newer than this conform understands ({SCHEMA_VERSION}); upgrade conform"
            )
        if version < SCHEMA_VERSION:
            if self.readonly:
                raise StoreError(f"{self.where} has schema version {version}; open it writable once to migrate it to {SCHEMA_VERSION}")
            self._guard(lambda: migrations.upgrade(self.engine, version))

    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            v = conn.execute(text(f"SELECT MAX(version) FROM {SchemaMigration.__tablename__}")).scalar()
        return int(v or 0)

    def _guard(self, fn):
        try:
            return fn()
        except OperationalError as e:
            msg = _first_line(e)
            if "disk" in msg.lower() and "full" in msg.lower():
                raise StoreError(f"disk full while writing {self.where}; nothing half-written was kept") from None
            if "readonly" in msg.lower() or "read-only" in msg.lower():
                raise StoreError(f"{self.where} is read-only") from None
            raise StoreError(f"database error on {self.where}: {msg}") from None
        except (DatabaseError, sqlite3.DatabaseError) as e:
            raise StoreError(f"database error on {self.where}: {_first_line(e)}") from None

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
        """The id of the environment with this fingerprint, created if new."""

        def go(s: Session) -> int:
            found = s.scalar(select(Environment.id).where(Environment.fingerprint == env["fingerprint"]))
            if found is not None:
                return found
            fields = {c.key for c in Environment.__table__.columns} - {"id", "created_at"}
            e = Environment(**{k: v for k, v in env.items() if k in fields})
            s.add(e)
            s.flush()
            return e.id

        try:
            return self.write(go)
        except StoreError:
            # another writer created it between our check and insert
            return self.write(go)

    def start_run(self, env: dict[str, Any], *, options: dict[str, Any], seed: int, ops_total: int, cells_planned: int, conform_version: str = "") -> int:
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
                select(Run.id).join(Environment).where(Environment.kind == kind).order_by(Run.started_at.desc(), Run.id.desc()).limit(1)
            )

    def get_run(self, run_id: int) -> Run | None:
        with self.session() as s:
            return s.get(Run, run_id)

    # -- ops ---------------------------------------------------------------------------------

    def op_ids(self, specs) -> dict[str, int]:
        """Ids for these OpSpecs, inserting the ones not yet known (in one transaction)."""
        missing = [sp for sp in specs if sp.qualname not in self._op_ids]
        if missing:

            def go(s: Session):
                known = dict(s.execute(select(Op.qualname, Op.id)).all())
                for sp in missing:
                    if sp.qualname not in known:
                        op = Op(qualname=sp.qualname, variant=sp.variant, family=sp.family, tags=list(sp.tags), schema=sp.schema)
                        s.add(op)
                        s.flush()
                        known[sp.qualname] = op.id
                return known

            self._op_ids.update(self.write(go))
        return {sp.qualname: self._op_ids[sp.qualname] for sp in specs}

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
            s.add_all(CatalogEntry(run_id=run_id, op_id=ids[sp.qualname], kernels=list(sp.kernels)) for sp in specs)

        self.write(go)

    # -- results -----------------------------------------------------------------------------

    def record_result(self, run_id: int, r: dict[str, Any]) -> bool:
        """Store one cell's result dict (see conform.cell.CellResult.to_dict). False if that cell
        was already recorded for this run (a resumed run never duplicates a cell)."""
        op_id = self.op_id(r["op"])
        if op_id is None:
            raise StoreError(f"result for an op not in the catalog: {r['op']}")

        def go(s: Session) -> bool:
            exists = s.scalar(select(Result.id).where(Result.run_id == run_id, Result.op_id == op_id, Result.dtype == r["dtype"]))
            if exists is not None:
                return False
            res = Result(run_id=run_id, op_id=op_id, dtype=r["dtype"], **{k: r[k] for k in RESULT_FIELDS if k in r and r[k] is not None})
            if r.get("case") is not None or r.get("repro") or r.get("traceback"):
                res.failure = Failure(case=r.get("case"), repro=r.get("repro") or "", traceback=r.get("traceback") or "")
            s.add(res)
            return True

        try:
            return self.write(go)
        except StoreError as e:
            if isinstance(e.__context__, IntegrityError) or "UNIQUE" in str(e):
                return False
            raise

    def recorded_cells(self, run_id: int) -> set[tuple[str, str]]:
        """(qualname, dtype) of every cell this run already holds."""
        with self.session() as s:
            rows = s.execute(select(Op.qualname, Result.dtype).join(Op, Result.op_id == Op.id).where(Result.run_id == run_id)).all()
        return {(q, d) for q, d in rows}

    def close(self) -> None:
        self.engine.dispose()


def _first_line(e: BaseException) -> str:
    msg = str(getattr(e, "orig", None) or e)
    return msg.strip().splitlines()[0] if msg.strip() else type(e).__name__

"""The store: schema versioning, clear errors on bad files, one result per cell."""

import sqlite3

import pytest
from sqlalchemy import text

from cli_helpers import damaged_database
from conform.errors import StoreError
from conform.results import CellResult
from conform.store import SCHEMA_VERSION, Store
from opdb.spec import OpSpec

ENV = {
    "fingerprint": "f" * 32,
    "torch_version": "2.13.0",
    "backend": "cpu",
    "device_name": "Test CPU",
}
OP = OpSpec(
    name="aten::relu",
    overload="",
    schema="aten::relu(Tensor self) -> Tensor",
    arguments=(),
    returns=("Tensor",),
    variant="functional",
    tags=("pointwise",),
    family="pointwise",
    kernels=("CPU",),
)


def _result(**kw):
    return CellResult(
        **{"op": "aten::relu", "dtype": "float32", "outcome": "pass", "examples_run": 3, "examples_passed": 3, **kw}
    )


def test_new_database_records_schema_version(tmp_path):
    store = Store(tmp_path / "c.db")
    assert store.schema_version() == SCHEMA_VERSION


def test_result_is_recorded_once_per_cell(tmp_path):
    store = Store(tmp_path / "c.db")
    run = store.start_run(ENV, options={}, seed=1, ops_total=1, cells_planned=1)
    store.record_catalog(run, [OP])
    assert store.record_result(run, _result()) is True
    assert store.record_result(run, _result(outcome="mismatch")) is False
    assert store.recorded_cells(run) == {("aten::relu", "float32")}


def test_failure_case_and_repro_are_kept(tmp_path):
    store = Store(tmp_path / "c.db")
    run = store.start_run(ENV, options={}, seed=1, ops_total=1, cells_planned=1)
    store.record_catalog(run, [OP])
    store.record_result(
        run, _result(outcome="mismatch", case={"op": "aten::relu", "args": [], "kwargs": {}}, repro="import torch\n")
    )
    with store.engine.connect() as c:
        case, repro = c.execute(text('SELECT f."case", f.repro FROM failures f')).one()
    assert "aten::relu" in case and repro.startswith("import torch")


def test_same_environment_is_one_row(tmp_path):
    store = Store(tmp_path / "c.db")
    a = store.start_run(ENV, options={}, seed=1, ops_total=1, cells_planned=1)
    b = store.start_run(ENV, options={}, seed=2, ops_total=1, cells_planned=1)
    assert store.get_run(a).environment_id == store.get_run(b).environment_id


def test_newer_schema_is_a_clear_error(tmp_path):
    path = tmp_path / "c.db"
    Store(path).close()
    with sqlite3.connect(path) as c:
        c.execute(
            "INSERT INTO conform_schema (version, description, applied_at) VALUES (?, 'future', '2030-01-01')",
            (SCHEMA_VERSION + 5,),
        )
    with pytest.raises(StoreError, match="newer than this conform"):
        Store(path)


def test_not_a_database_is_a_clear_error(tmp_path):
    path = tmp_path / "c.db"
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="not a readable conform database"):
        Store(path)


def test_foreign_sqlite_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(StoreError, match="not a conform database"):
        Store(path)
    with sqlite3.connect(path) as c:
        tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"customers"}


def test_foreign_sqlite_file_gets_no_write_at_all(tmp_path):
    """Not even the switch to WAL, which rewrites bytes 18-19 of the header."""
    path = tmp_path / "their.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE customers (id INTEGER)")
    before = path.read_bytes()
    for kw in ({}, {"readonly": True}, {"create": False}):
        with pytest.raises(StoreError, match="not a conform database"):
            Store(path, **kw)
    assert path.read_bytes() == before
    assert not (tmp_path / "their.db-wal").exists()


def test_damaged_database_is_refused_at_open_and_untouched(tmp_path):
    path = tmp_path / "c.db"
    before = damaged_database(path)
    for kw in ({}, {"readonly": True}, {"create": False}):
        with pytest.raises(StoreError, match="c.db is damaged: database disk image is malformed"):
            Store(path, **kw)
    assert path.read_bytes() == before


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "nope" / "c.db")


def test_readonly_open_of_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="no conform database"):
        Store(tmp_path / "c.db", readonly=True)


def test_sqlite_uses_wal(tmp_path):
    store = Store(tmp_path / "c.db")
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_full_disk_is_a_clear_error_and_keeps_what_was_recorded(tmp_path):
    from sqlalchemy import event

    store = Store(tmp_path / "c.db")
    run = store.start_run(ENV, options={}, seed=1, ops_total=1, cells_planned=1)
    store.record_catalog(run, [OP])
    store.record_result(run, _result(dtype="float32"))
    pages = store.engine.connect().execute(text("PRAGMA page_count")).scalar()
    store.engine.dispose()
    # SQLite's own "database or disk is full", without filling the real disk
    event.listen(store.engine, "connect", lambda c, _r: c.execute(f"PRAGMA max_page_count = {pages}"))
    with pytest.raises(StoreError, match="disk full"):
        for i in range(200):
            store.record_result(run, _result(dtype=f"d{i}", message="x" * 5000))
    store.engine.dispose()
    fresh = Store(tmp_path / "c.db")
    recorded = fresh.recorded_cells(run)
    assert ("aten::relu", "float32") in recorded
    with fresh.engine.connect() as c:
        # no half-written result: every result row has its fields
        assert c.execute(text("SELECT COUNT(*) FROM results WHERE outcome IS NULL OR dtype IS NULL")).scalar() == 0


def test_a_schema_2_database_gains_findings_and_skip_reason(tmp_path):
    path = tmp_path / "c.db"
    Store(path).close()
    with sqlite3.connect(path) as c:  # as conform before schema 3 wrote it
        c.execute("ALTER TABLE results DROP COLUMN findings")
        c.execute("ALTER TABLE results DROP COLUMN skip_reason")
        c.execute("DELETE FROM conform_schema WHERE version = 3")
        c.execute(
            "INSERT OR IGNORE INTO conform_schema (version, description, applied_at) VALUES (2, 'v2', '2026-01-01')"
        )
        c.execute("DELETE FROM conform_schema WHERE version > 2")
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    run = store.start_run(ENV, options={}, seed=1, ops_total=1, cells_planned=1)
    store.record_catalog(run, [OP])
    store.record_result(
        run,
        _result(
            outcome="skipped",
            skip_reason="no_kernel",
            findings=[{"kind": "reference", "phase": "forward", "message": "m", "ref_golden_err": float("inf")}],
        ),
    )
    with store.engine.connect() as c:
        findings, reason = c.execute(text("SELECT findings, skip_reason FROM results")).one()
    assert reason == "no_kernel" and "reference" in str(findings)


def test_a_schema_3_database_gains_the_model_tables(tmp_path):
    path = tmp_path / "c.db"
    Store(path).close()
    with sqlite3.connect(path) as c:  # as conform before schema 4 wrote it
        c.execute("DROP TABLE model_ops")
        c.execute("DROP TABLE model_results")
        c.execute("DELETE FROM conform_schema")
        c.execute("INSERT INTO conform_schema (version, description, applied_at) VALUES (3, 'v3', '2026-01-01')")
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    from conform.store.model_results import latest_models, record_model

    report = {
        "model": "hf:gpt2",
        "dtype": "float32",
        "train": True,
        "verdict": "runs",
        "fails_at": None,
        "divergence": None,
        "whole": None,
        "times": {},
        "traced": {},
        "ops": [],
    }
    record_model(store, ENV, report, repros={})
    assert [r.verdict for r in latest_models(store)] == ["runs"]


def test_a_schema_5_database_gains_further_failures_and_keeps_them(tmp_path):
    path = tmp_path / "c.db"
    Store(path).close()
    with sqlite3.connect(path) as c:  # as conform before schema 6 wrote it
        c.execute("ALTER TABLE failures DROP COLUMN further_failures")
        c.execute("DELETE FROM conform_schema WHERE version = 6")
        c.execute("INSERT INTO conform_schema (version, description, applied_at) VALUES (5, 'v5', '2026-01-01')")
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    run = store.start_run(ENV, options={}, seed=1, ops_total=1, cells_planned=2)
    store.record_catalog(run, [OP])
    further = [{"outcome": "grad_mismatch", "phase": "backward", "message": "m2", "case": {"op": "x"}, "repro": "r2"}]
    store.record_result(
        run, _result(outcome="mismatch", case={"op": "aten::relu"}, repro="r", further_failures=further)
    )
    store.record_result(run, _result(dtype="float16", outcome="mismatch", case={"op": "aten::relu"}, repro="r"))
    from conform.store import queries

    with store.engine.connect() as c:
        ids = dict(c.execute(text("SELECT dtype, id FROM results")).all())
    got = queries.failures(store, set(ids.values()))
    assert got[ids["float32"]][3] == further and got[ids["float16"]][3] == []  # (none: an empty list)

"""A fleet: several writers in one database (SQLite, and a real PostgreSQL server) lose nothing.

The runner has one writer per run (its controller), so a fleet is several runs writing at once;
the tests also hammer one run from several processes, the harder case for "each cell once".
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import random
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select, text

from conform.results import CellResult
from conform.store import SCHEMA_VERSION, Environment, Op, Result, Run, Store

WRITERS = 4
OPS = [f"aten::fleet_op{i}" for i in range(24)]
DTYPES = ("float32", "float16", "int64")
CELLS = [(op, dt) for op in OPS for dt in DTYPES]
ENV = {
    "fingerprint": "e" * 32,
    "torch_version": "2.13.0",
    "backend": "mps",
    "device_name": "Apple M2",
    "hostname": "mac-1",
}


def _spec(qualname: str):
    # what Store.record_catalog reads of an opdb.OpSpec (opdb imports torch: seconds per writer)
    return SimpleNamespace(
        qualname=qualname,
        schema=f"{qualname}(Tensor self) -> Tensor",
        variant="functional",
        tags=(),
        family="pointwise",
        kernels=("CPU",),
    )


def _result(op: str, dtype: str, writer: int) -> CellResult:
    return CellResult(
        op=op,
        dtype=dtype,
        outcome="pass",
        examples_run=5,
        examples_passed=5,
        message=f"writer {writer}",
        duration_s=0.01,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleet.db'}"
    return request.getfixturevalue("postgres_url")


def _spawn(target, args_per_writer):
    ctx = mp.get_context("spawn")  # a fresh interpreter per writer, as on separate machines
    start = ctx.Event()
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(start, out, *args)) for args in args_per_writer]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    errors = [r for r in results if isinstance(r, str)]
    assert not errors, errors[0]
    return results


def _hammer_one_run(start, out, url, run_id, writer, cells):
    try:
        store = Store(url)
        start.wait()
        written = sum(store.record_result(run_id, _result(op, dt, writer)) for op, dt in cells)
        out.put(written)
    except BaseException as e:  # noqa: BLE001 - reported to the parent as the test failure
        out.put(f"writer {writer}: {type(e).__name__}: {e}")


def test_concurrent_writers_into_one_run_record_each_cell_once(db_url):
    store = Store(db_url)
    run = store.start_run(ENV, options={}, seed=0, ops_total=len(OPS), cells_planned=len(CELLS))
    store.record_catalog(run, [_spec(q) for q in OPS])
    store.close()
    # each writer gets its own quarter plus half of the others', in its own order: every cell is
    # written by two or three writers at about the same time
    plans = []
    for w in range(WRITERS):
        rng = random.Random(w)
        mine = CELLS[w::WRITERS] + rng.sample(CELLS, len(CELLS) // 2)
        rng.shuffle(mine)
        plans.append((db_url, run, w, list(dict.fromkeys(mine))))
    written = _spawn(_hammer_one_run, plans)

    store = Store(db_url)
    assert sum(written) == len(CELLS)  # exactly one writer won each cell
    assert store.recorded_cells(run) == set(CELLS)
    with store.session() as s:
        rows = s.execute(
            select(Result.op_id, Result.dtype, func.count())
            .where(Result.run_id == run)
            .group_by(Result.op_id, Result.dtype)
        ).all()
    assert len(rows) == len(CELLS) and {n for *_, n in rows} == {1}


def _one_machine(start, out, url, writer):
    try:
        start.wait()
        store = Store(url)  # several machines open a fresh database at once: one creates the schema
        env = dict(ENV, hostname=f"mac-{writer}")  # identical Macs: the same environment row
        run = store.start_run(env, options={"ops": "all"}, seed=writer, ops_total=len(OPS), cells_planned=len(CELLS))
        store.record_catalog(run, [_spec(q) for q in OPS])  # the same new ops, inserted concurrently
        for op, dt in CELLS:
            assert store.record_result(run, _result(op, dt, writer))
        store.set_run_state(run, "finished")
        out.put(run)
    except BaseException as e:  # noqa: BLE001
        out.put(f"machine {writer}: {type(e).__name__}: {e}")


def test_concurrent_runs_into_one_database_lose_nothing(db_url):
    runs = _spawn(_one_machine, [(db_url, w) for w in range(WRITERS)])

    store = Store(db_url, readonly=True)
    assert store.schema_version() == SCHEMA_VERSION
    with store.session() as s:
        assert s.scalar(select(func.count()).select_from(Environment)) == 1
        assert s.scalar(select(func.count()).select_from(Op)) == len(OPS)
        assert sorted(s.scalars(select(Run.id))) == sorted(runs)
        assert set(s.scalars(select(Run.state))) == {"finished"}
        assert s.scalar(select(func.count()).select_from(Result)) == WRITERS * len(CELLS)
    for run in runs:
        assert store.recorded_cells(run) == set(CELLS)


def test_awkward_values_are_stored_on_every_backend(db_url):
    """PostgreSQL rejects NaN in json and NUL in text, and enforces string lengths; SQLite does not."""
    store = Store(db_url)
    env = dict(ENV, os_version="macOS " + "14.5 " * 40)  # longer than the column
    run = store.start_run(env, options={"tolerance": float("inf")}, seed=0, ops_total=1, cells_planned=1)
    store.record_catalog(run, [_spec(OPS[0])])
    case = {"op": OPS[0], "args": [{"fill": float("nan")}], "kwargs": {}}
    assert store.record_result(
        run,
        dataclasses.replace(
            _result(OPS[0], "float32", 0), outcome="mismatch", message="bad\x00byte", case=case, repro="x = 1\n"
        ),
    )
    with store.engine.connect() as c:
        message = c.execute(text("SELECT message FROM results")).scalar()
        stored_case = c.execute(text('SELECT "case" FROM failures')).scalar()
    assert message.startswith("bad") and "byte" in message
    assert "nan" in str(stored_case).lower()


def test_an_older_schema_is_migrated_once_under_concurrent_opens(db_url):
    store = Store(db_url)
    with store.engine.begin() as c:
        c.execute(text("DROP TABLE declared_kernels"))
        c.execute(text("UPDATE conform_schema SET version = 1"))
    store.close()
    _spawn(_open_only, [(db_url,) for _ in range(WRITERS)])
    store = Store(db_url)
    with store.engine.connect() as c:
        versions = c.execute(text("SELECT version FROM conform_schema ORDER BY version")).scalars().all()
    assert versions == list(range(1, SCHEMA_VERSION + 1))


def _open_only(start, out, url):
    try:
        start.wait()
        Store(url).close()
        out.put(0)
    except BaseException as e:  # noqa: BLE001
        out.put(f"{type(e).__name__}: {e}")

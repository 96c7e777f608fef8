"""`conform merge`: runs from many databases in one, matched by uuid, fingerprint and qualname."""

from __future__ import annotations

import json

from click.testing import CliRunner
from sqlalchemy import func, select

import sitedata
from conform.cli.merge import merge_command
from conform.store import CatalogEntry, Environment, Failure, Op, Result, Run, Store, Timing
from conform.store.merging import merge_databases

TABLES = (Environment, Run, Op, CatalogEntry, Result, Failure, Timing)


def counts(path) -> dict:
    store = Store(path, readonly=True)
    with store.session() as s:
        out = {t.__tablename__: s.scalar(select(func.count()).select_from(t)) for t in TABLES}
    store.close()
    return out


def one_version(path, version, ops, outcomes, timings=None):
    store = Store(path)
    sitedata.add_run(store, sitedata.env(version), ops, outcomes, timings=timings)
    store.close()


def two_dbs(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    one_version(
        a,
        "2.13.0",
        sitedata.OPS_213,
        {("aten::mm", "float32"): "mismatch", ("aten::relu", "float32"): "pass"},
        timings={("aten::mm", "float32", "small"): (1e-5, 2e-5)},
    )
    # b knows an op a does not, so the op ids of the two files differ
    one_version(
        b, "2.14.1", sitedata.OPS_214, {("aten::new_op_in_214", "float32"): "pass", ("aten::mm", "float32"): "pass"}
    )
    return a, b


def test_merge_copies_runs_results_failures_and_timings(tmp_path):
    a, b = two_dbs(tmp_path)
    out = tmp_path / "all.db"
    merge_databases([a, b], out)
    got, ca, cb = counts(out), counts(a), counts(b)
    for table in ("environments", "runs", "catalog_entries", "results", "failures", "timings"):
        assert got[table] == ca[table] + cb[table], table
    assert got["ops"] == len(sitedata.OPS_214)
    store = Store(out, readonly=True)
    with store.session() as s:
        rows = s.execute(
            select(Op.qualname, Result.dtype, Result.outcome, Environment.torch_version, Failure.repro)
            .join(Op, Result.op_id == Op.id)
            .join(Run)
            .join(Environment)
            .outerjoin(Failure)
        ).all()
    store.close()
    assert ("aten::mm", "float32", "mismatch", "2.13.0") in {r[:4] for r in rows}
    assert ("aten::new_op_in_214", "float32", "pass", "2.14.1") in {r[:4] for r in rows}
    assert any(r[4] and "import torch" in r[4] and r[0] == "aten::mm" for r in rows), (
        "the failure travelled with its result"
    )


def test_merging_the_same_run_twice_adds_nothing(tmp_path):
    a, b = two_dbs(tmp_path)
    out = tmp_path / "all.db"
    merge_databases([a, b], out)
    before = counts(out)
    stats = merge_databases([a, b, a], out)
    assert counts(out) == before
    assert all(s.added == 0 for s in stats)


def test_merge_into_one_of_the_sources(tmp_path):
    a, b = two_dbs(tmp_path)
    ca, cb = counts(a), counts(b)
    merge_databases([b], a)
    assert counts(a)["results"] == ca["results"] + cb["results"]


def test_a_later_copy_of_a_run_adds_only_its_new_cells(tmp_path):
    """A database copied mid-run, then the finished one: the merged run has every cell once."""
    early, late, out = tmp_path / "early.db", tmp_path / "late.db", tmp_path / "all.db"
    one_version(
        late, "2.13.0", sitedata.OPS_213, {("aten::mm", "float32"): "pass", ("aten::relu", "float32"): "mismatch"}
    )
    # the early copy: the same run (same uuid) with only the first cell
    import shutil

    shutil.copy(late, early)
    store = Store(early)
    with store.session() as s:
        s.execute(
            Result.__table__.delete().where(Result.op_id == s.scalar(select(Op.id).where(Op.qualname == "aten::relu")))
        )
        s.execute(Run.__table__.update().values(state="running", finished_at=None))
    store.close()
    merge_databases([early], out)
    assert counts(out)["results"] == 1
    stats = merge_databases([late], out)
    assert stats[0].results == 1 and stats[0].failures == 1 and stats[0].runs == 0 and stats[0].runs_extended == 1
    assert counts(out)["results"] == 2
    store = Store(out, readonly=True)
    assert store.get_run(1).state == "finished"
    store.close()


def test_cli_reports_what_was_added(tmp_path):
    a, b = two_dbs(tmp_path)
    out = tmp_path / "all.db"
    r = CliRunner().invoke(merge_command, [str(a), str(b), "-o", str(out), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert [s["runs"] for s in report["sources"]] == [1, 1]
    r = CliRunner().invoke(merge_command, [str(a), "-o", str(out)])
    assert "nothing new" in r.output


def test_cli_counts_say_one_thing_in_the_singular(tmp_path):
    a, _ = two_dbs(tmp_path)
    r = CliRunner().invoke(merge_command, [str(a), "-o", str(tmp_path / "all.db")])
    assert r.exit_code == 0, r.output
    assert "added 1 run, " in r.output and ", 1 environment, " in r.output and ", 1 timing, " in r.output, r.output

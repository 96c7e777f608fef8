"""`conform coverage` on a tiny real run, plus a synthetic untestable op recorded in its database."""

from __future__ import annotations

import json
import shutil

import pytest
from sqlalchemy import insert, select

from cli_helpers import conform_here
from conform.results import CellResult


@pytest.fixture(scope="module")
def run_db(clean_run, tmp_path_factory):
    """A copy of the session's clean CPU run (tests/conftest.py), with two synthetic ops added."""
    cwd = tmp_path_factory.mktemp("coverage")
    shutil.copyfile(clean_run[0] / "c.db", cwd / "c.db")
    from conform.store import CatalogEntry, Op, Result, Store

    store = Store(cwd / "c.db")
    run_id = store.latest_run_id()

    def add_synthetic(s):
        s.execute(
            insert(Op),
            [
                {
                    "qualname": "aten::synthetic_untestable",
                    "variant": "functional",
                    "family": "other",
                    "tags": [],
                    "schema": "",
                }
            ],
        )
        op_id = s.scalar(select(Op.id).where(Op.qualname == "aten::synthetic_untestable"))
        s.execute(insert(CatalogEntry), [{"run_id": run_id, "op_id": op_id, "kernels": []}])
        s.execute(
            insert(Result),
            [
                {
                    "run_id": run_id,
                    "op_id": op_id,
                    "dtype": "none",
                    "outcome": "skipped",
                    "message": "untestable: takes a synthetic argument",
                }
            ],
        )
        # an op this machine runs whose every generated input the reference rejected
        s.execute(
            insert(Op),
            [
                {
                    "qualname": "aten::synthetic_no_case",
                    "variant": "functional",
                    "family": "other",
                    "tags": [],
                    "schema": "",
                }
            ],
        )
        op_id = s.scalar(select(Op.id).where(Op.qualname == "aten::synthetic_no_case"))
        s.execute(insert(CatalogEntry), [{"run_id": run_id, "op_id": op_id, "kernels": ["CPU"]}])
        s.execute(
            insert(Result),
            [
                {
                    "run_id": run_id,
                    "op_id": op_id,
                    "dtype": "float32",
                    "outcome": "skipped",
                    "message": "no valid case: the CPU reference rejected all 5 generated inputs; first: bad",
                }
            ],
        )

    store.write(add_synthetic)
    store.close()
    return cwd


def _report(cwd, *args):
    proc = conform_here("coverage", "--db", "c.db", "--format", "json", *args, cwd=cwd, check=True)
    report = json.loads(proc.stdout)
    return report, {r["op"]: r for r in report["ops"]}


def test_selected_ops_are_exercised_with_their_valid_cases(run_db):
    report, ops = _report(run_db)
    add = ops["aten::add.Tensor"]
    # the valid cases the run's cells recorded (3 dtypes, up to 5 examples each: a cell stops asking
    # for more when its generation budget runs out, which a loaded machine reaches sooner)
    import sqlite3  # here: only this test reads the store behind the report

    with sqlite3.connect(run_db / "c.db") as db:
        (ran,) = db.execute(
            "SELECT SUM(r.examples_run) FROM results r JOIN ops o ON o.id = r.op_id WHERE o.qualname = 'aten::add.Tensor'"
        ).fetchone()
    assert add["exercised"] and add["valid_cases"] == ran and 3 <= ran <= 3 * 5 and add["reason"] == ""
    assert add["family"] == "pointwise" and add["variant"] == "functional"
    assert add["reference"] == "numpy.add"  # the independent reference the verdict consults
    assert ops["aten::relu"]["exercised"] and ops["aten::relu.out"]["exercised"]


def test_unexercised_ops_say_why(run_db):
    _, ops = _report(run_db, "--run", "latest")
    assert ops["aten::synthetic_untestable"] == {
        "op": "aten::synthetic_untestable",
        "family": "other",
        "variant": "functional",
        "exercised": False,
        "valid_cases": 0,
        "reason": "takes a synthetic argument",
        "status": "untestable",
        "reference": "",
    }
    assert ops["aten::div.Tensor"]["reason"] == "not in this run's op selection"
    # an op outside the selection that opdb marks untestable keeps its rule's reason
    assert "no CPU kernel" in ops["aten::cudnn_convolution"]["reason"]


def test_totals_count_all_ops_and_public_functional_ones(run_db):
    report, ops = _report(run_db)
    t = report["totals"]
    assert t["ops"] == len(ops) > 3000
    exercised = {q for q, r in ops.items() if r["exercised"]}
    assert t["exercised"] == len(exercised) and {"aten::relu", "aten::add.Tensor"} <= exercised
    public = [r for q, r in ops.items() if r["variant"] == "functional" and not q.split("::")[1].startswith("_")]
    assert t["public_functional"] == len(public)
    assert t["public_functional_exercised"] == sum(r["exercised"] for r in public)
    assert t["reasons"]["not in this run's op selection"] > 1000


def test_table_ends_with_totals(run_db):
    out = conform_here("coverage", "--db", "c.db", cwd=run_db, check=True).stdout
    assert "aten::synthetic_untestable" in out and "takes a synthetic argument" in out
    assert "public functional exercised, of the whole catalog's:" in out


def test_unknown_run_is_one_line_error(run_db):
    proc = conform_here("coverage", "--db", "c.db", "--run", "99", cwd=run_db)
    assert proc.returncode == 2 and proc.stderr.strip() == f"conform: error: no run 99 in {run_db / 'c.db'}"


def _one_op_db(tmp_path, name: str, backend: str, result: CellResult) -> None:
    """c.db in tmp_path: a finished run of one catalog op with one recorded cell."""
    from conform.store import Store
    from opdb.spec import OpSpec

    op = OpSpec(
        name=name,
        overload="",
        schema="",
        arguments=(),
        returns=(),
        variant="functional",
        tags=(),
        family="other",
        kernels=(),
    )
    store = Store(tmp_path / "c.db")
    run = store.start_run(
        {"fingerprint": "e" * 32, "torch_version": "2.13.0", "backend": backend},
        options={},
        seed=1,
        ops_total=1,
        cells_planned=1,
    )
    store.record_catalog(run, [op])
    store.record_result(run, result)
    store.set_run_state(run, "finished")
    store.close()


def test_long_reasons_are_cut_in_the_table_and_whole_with_full_and_in_json(tmp_path):
    reason = "takes a handle to a live resource that no generator can build: " + "detail " * 30 + "THE END"
    _one_op_db(
        tmp_path,
        "aten::long_reason",
        "cpu",
        CellResult(op="aten::long_reason", dtype="none", outcome="skipped", message=f"untestable: {reason}"),
    )
    table = conform_here("coverage", "--db", "c.db", cwd=tmp_path, check=True).stdout
    assert "THE END" not in table.split("\n\n")[0] and "…" in table and "--full" in table
    assert reason in conform_here("coverage", "--db", "c.db", "--full", cwd=tmp_path, check=True).stdout
    assert (
        json.loads(conform_here("coverage", "--db", "c.db", "--format", "json", cwd=tmp_path, check=True).stdout)[
            "ops"
        ][0]["reason"]
        == reason
    )


def test_three_denominators_say_which_is_which(run_db):
    report, ops = _report(run_db)
    t = report["totals"]
    no_kernel = [r for r in ops.values() if r["status"] == "no kernel here"]
    assert no_kernel and all("no CPU kernel" in r["reason"] for r in no_kernel)
    # the ops this machine can run: the catalog less those without a kernel or composite here
    assert t["runnable"] == t["ops"] - len(no_kernel) == t["ops"] - t["no_kernel_here"]
    assert t["runnable_exercised"] == t["exercised"]  # an op without a kernel is never exercised
    runnable_public = [
        q
        for q, r in ops.items()
        if r["status"] != "no kernel here" and r["variant"] == "functional" and not q.split("::")[1].startswith("_")
    ]
    assert t["public_functional_runnable"] == len(runnable_public) < t["public_functional"]
    assert t["untestable"] >= 1 and t["no_valid_case"] == 1
    out = conform_here("coverage", "--db", "c.db", cwd=run_db, check=True).stdout
    for label in (
        "of the whole catalog:",
        "of the ops with a kernel or composite here:",
        "of the public functional ops among those:",
    ):
        assert label in out


def test_no_valid_case_is_a_defect_listed_first(run_db):
    report, ops = _report(run_db)
    assert report["ops"][0]["op"] == "aten::synthetic_no_case" and report["ops"][0]["status"] == "no valid case"
    assert ops["aten::synthetic_untestable"]["status"] == "untestable"
    table = conform_here("coverage", "--db", "c.db", cwd=run_db, check=True).stdout.splitlines()
    assert table[2].startswith("aten::synthetic_no_case")


def test_a_reference_crash_has_its_own_status_and_skip_row(tmp_path):
    """On an accelerator a cell whose CPU reference died before any case passed is skipped as
    reference_crash (conform.plugin): coverage names it, not 'another outcome' nor a defect."""
    message = "the CPU reference died by signal 11 on float32[3]; the device is not to blame"
    _one_op_db(
        tmp_path,
        "aten::ref_dies",
        "cuda",
        CellResult(
            op="aten::ref_dies", dtype="float32", outcome="skipped", message=message, skip_reason="reference_crash"
        ),
    )
    report = json.loads(conform_here("coverage", "--db", "c.db", "--format", "json", cwd=tmp_path, check=True).stdout)
    assert report["ops"][0]["status"] == "reference crash"
    t = report["totals"]
    assert t["reference_crash"] == 1 and t["other_outcome"] == 0 and t["no_valid_case"] == 0
    assert t["skipped_cells"] == {"reference_crash": 1}
    table = conform_here("coverage", "--db", "c.db", cwd=tmp_path, check=True).stdout
    assert "the CPU reference crashed (on an accelerator; not the device's failure): 1" in table
    assert "reference_crash: the CPU reference died or hung" in table

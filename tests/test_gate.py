"""conform gate: a PR that breaks a passing cell fails the gate, naming the cell; a clean one passes;
a fixed op passes and reports the stale expectation. Plus the project's own gate on the CPU.

The end-to-end tests run `conform run` twice (the CPU, then the CPU with a fault injected), on
the few ops of ci/expectations-cpu.toml; everything else uses stores built in the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from conform.ci import gate as g
from conform.cli.main import main
from conform.run.cell import CellSettings, run_cell
from conform.store import Store
from conform.store.timings import record_timings
from conftest import once_per_session
from test_expectations import make_run
from tests.faulty import FaultyBackend

ROOT = Path(__file__).resolve().parent.parent
CI_EXPECTATIONS = ROOT / "ci" / "expectations-cpu.toml"


class SubOffByOne(FaultyBackend):
    """The PR under test: its sub.Tensor kernel adds one to every element (wrong on any input)."""

    name = "faulty-sub_off_by_one"
    targets = frozenset({torch.ops.aten.sub.Tensor})

    @staticmethod
    def bug(func, args, kwargs):
        return func(*args, **kwargs) + 1


def cli(*args: str) -> int:
    """`conform ARGS` in this process: its exit status."""
    try:
        main(list(args))
    except SystemExit as e:
        return 0 if e.code is None else e.code
    return 0


def conform_run(cwd: Path, *args: str) -> None:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])
    )
    cmd = [
        sys.executable,
        "-m",
        "conform.cli",
        "run",
        "--dtypes",
        "float32",
        "--examples",
        "3",
        "--derandomize",
        "--no-bench",
        "-q",
        *args,
    ]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr


def ci_ops() -> list[str]:
    return tomllib.loads(CI_EXPECTATIONS.read_text())["defaults"]["ops"]


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """One database: run 1 the CPU on the project's CI ops, run 2 the faulty "PR" on three of them.
    Both share the cwd, so the hypothesis example database (.conform/hypothesis) too. Made once
    for the session (its tests read it and write files of their own names beside it)."""

    def make(where):
        db = str(where / "runs.db")
        conform_run(where, "--ops", ",".join(ci_ops()), "-n", "1", "--db", db)
        # (three ops: a run this small runs its cells from the controller, no worker to start)
        conform_run(
            where,
            "--ops",
            "aten::add.Tensor,aten::sub.Tensor,aten::mul.Tensor",
            "--device",
            "test_gate:SubOffByOne",
            "--db",
            db,
        )
        return db

    return once_per_session(request, tmp_path_factory, "gate-runs", make)


def test_project_gate_on_cpu(runs, capsys):
    """The project's own CI: the CPU on a fixed op set against the committed expectations."""
    where, db = runs
    summary, junit = where / "summary.md", where / "gate.xml"
    code = cli(
        "gate",
        "--baseline",
        str(CI_EXPECTATIONS),
        "--db",
        db,
        "--run",
        "1",
        "--summary",
        str(summary),
        "--junitxml",
        str(junit),
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "PASS: nothing regressed"
    assert f"{len(ci_ops())} cells compared" in out
    assert summary.read_text().startswith("## ✅ conform gate: PASS")
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("failures") == "0" and int(suite.get("tests")) == len(ci_ops())


def test_a_fault_that_breaks_a_passing_cell_fails_the_gate_naming_it(runs, capsys):
    where, db = runs
    summary, junit = where / "pr.md", where / "pr.xml"
    code = cli("gate", "--baseline", "run:1", "--db", db, "--summary", str(summary), "--junitxml", str(junit))
    out = capsys.readouterr().out
    assert code == 1, out
    assert "1 regression:\n  aten::sub.Tensor[float32] pass -> mismatch: Mismatched elements" in out
    assert out.splitlines()[-1] == "FAIL: 1 regression"
    # the other CI ops did not run in the PR's run: reported, not failing
    assert "7 ops of the baseline not in this run: aten::div.Tensor" in out
    md = summary.read_text()
    assert md.startswith("## ❌ conform gate: FAIL: 1 regression")
    assert "| `aten::sub.Tensor[float32]` | pass | **mismatch** |" in md
    assert "reproduce <code>aten::sub.Tensor[float32]</code>" in md and "```python" in md
    failures = [
        (c.get("classname"), c.get("name"))
        for c in ET.parse(junit).getroot().iter("testcase")
        if c.find("failure") is not None
    ]
    assert failures == [("aten::sub.Tensor", "float32")]
    # the same verdict against the committed expectations file
    assert cli("gate", "--baseline", str(CI_EXPECTATIONS), "--db", db) == 1
    assert "aten::sub.Tensor[float32] pass -> mismatch" in capsys.readouterr().out


def test_a_fixed_op_passes_and_reports_the_stale_expectation(runs, tmp_path, capsys):
    _, db = runs
    stale = tmp_path / "expectations.toml"
    entry = '\n[[expect]]\nop = "aten::mul.Tensor"\ndtypes = ["float32"]\noutcome = "mismatch"\nreason = "wrong rounding"\nissue = "https://example.org/issues/1"\n'
    text = CI_EXPECTATIONS.read_text() + entry
    stale.write_text(text)
    line = text.count("\n", 0, text.index(entry)) + 2  # the [[expect]] line of the added entry
    summary = tmp_path / "s.md"
    code = cli("gate", "--baseline", str(stale), "--db", db, "--run", "1", "--summary", str(summary))
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        "1 stale expectation:\n  aten::mul.Tensor[float32] expected mismatch (wrong rounding; https://example.org/issues/1), "
        f"now passes: remove or narrow the entry at {stale}:{line}"
    ) in out
    assert "### 1 stale expectation" in summary.read_text()


# -- the comparison, on stores built in the test -------------------------------------------------


def _db(tmp_path, name="r.db"):
    return str(tmp_path / name)


def test_every_kind_of_change_is_classified(tmp_path, capsys):
    db = _db(tmp_path)
    store = Store(db)
    base = make_run(store, {
        ("aten::add.Tensor", "float32"): "pass",
        ("aten::add.Tensor", "float16"): "pass",
        ("aten::mul.Tensor", "float32"): "mismatch",
        ("aten::cos", "bfloat16"): "not_implemented",
        ("aten::gone", "float32"): "pass",
        ("aten::div.Tensor", "float32"): "pass",
    })  # fmt: skip
    cur = make_run(store, {
        ("aten::add.Tensor", "float32"): "crash",
        ("aten::add.Tensor", "float16"): "pass",
        ("aten::mul.Tensor", "float32"): "pass",
        ("aten::cos", "bfloat16"): "device_error",
        ("aten::new_op", "float32"): "mismatch",
        ("aten::div.Tensor", "float32"): "pass",
        ("aten::div.Tensor", "int64"): "pass",
    })  # fmt: skip
    r = g.gate(f"run:{base}", db=db, run_id=cur)
    kinds = {(c.op, c.dtype): c.kind for c in r.cells}
    assert kinds == {
        ("aten::add.Tensor", "float32"): "regression",
        ("aten::add.Tensor", "float16"): "expected",
        ("aten::mul.Tensor", "float32"): "fixed",
        ("aten::cos", "bfloat16"): "changed",
        ("aten::new_op", "float32"): "new",
        ("aten::div.Tensor", "float32"): "expected",
        ("aten::div.Tensor", "int64"): "new",
    }
    assert r.new_ops == ["aten::new_op"] and r.missing_ops == ["aten::gone"] and r.exit_code == 1
    text = g.render_text(r)
    assert "1 regression:\n  aten::add.Tensor[float32] pass -> crash: aten::add.Tensor crash here\n" in text
    assert "1 changed failure:\n  aten::cos[bfloat16] not_implemented -> device_error" in text
    assert "1 fix:\n  aten::mul.Tensor[float32] mismatch -> pass" in text
    assert "1 new op (not in the baseline, not gated): aten::new_op" in text
    assert "1 new cell of known ops (not gated): aten::div.Tensor[int64]" in text
    assert "1 op of the baseline not in this run: aten::gone" in text
    # the same database without #ID: its newest run other than the one gated
    assert [c.kind for c in g.gate(db, db=db, run_id=cur).regressions] == ["regression"]
    assert cli("gate", "--baseline", f"{db}#{base}", "--db", db) == 1


def test_a_changed_failure_alone_does_not_fail_the_gate(tmp_path):
    db = _db(tmp_path)
    store = Store(db)
    base = make_run(store, {("aten::cos", "bfloat16"): "not_implemented", ("aten::sin", "float32"): "pass"})
    cur = make_run(store, {("aten::cos", "bfloat16"): "fallback", ("aten::sin", "float32"): "pass"})
    r = g.gate(f"run:{base}", db=db, run_id=cur)
    assert [c.kind for c in r.of("changed")] == ["changed"] and r.exit_code == 0


def test_a_baseline_in_another_database(tmp_path, capsys):
    main_db, other = _db(tmp_path, "pr.db"), _db(tmp_path, "main.db")
    make_run(Store(other), {("aten::add.Tensor", "float32"): "pass"}, device_name="Apple M1")
    make_run(Store(main_db), {("aten::add.Tensor", "float32"): "meta_mismatch"}, device_name="Apple M3")
    assert cli("gate", "--baseline", other, "--db", main_db) == 1
    out = capsys.readouterr().out
    assert "aten::add.Tensor[float32] pass -> meta_mismatch" in out
    assert "note: the baseline ran on cpu (Apple M1)" in out


@pytest.mark.parametrize(
    "baseline, words",
    [
        ("missing.toml", "cannot read expectations file"),
        ("nowhere.db", "does not exist"),
        ("run:1", "is the run being gated"),
        ("run:x", "is not a run id"),
        ("run:9", "no run 9"),
    ],
)
def test_bad_baselines_exit_2_with_one_line(tmp_path, capsys, baseline, words):
    db = _db(tmp_path)
    make_run(Store(db), {("aten::add.Tensor", "float32"): "pass"})
    capsys.readouterr()
    assert cli("gate", "--baseline", baseline, "--db", db) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("conform: error: ") and words in err and "\n" not in err


@pytest.mark.parametrize(
    "name, content",
    [("garbage.db", bytes(range(256)) * 8), ("garbage.db", b"hello = 1\n"), ("baseline", b"\x00\xff" * 100)],
)
def test_a_baseline_that_is_not_a_database_says_so(tmp_path, capsys, name, content):
    """Not "not UTF-8 text": a *.db or binary file is refused as a database, not read as TOML."""
    db = _db(tmp_path)
    make_run(Store(db), {("aten::add.Tensor", "float32"): "pass"})
    (tmp_path / name).write_bytes(content)
    capsys.readouterr()
    assert cli("gate", "--baseline", tmp_path / name, "--db", db) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a readable conform database" in err and "\n" not in err, err


def test_an_unfinished_run_is_not_gated(tmp_path, capsys):
    db = _db(tmp_path)
    store = Store(db)
    base = make_run(store, {("aten::add.Tensor", "float32"): "pass"})
    make_run(store, {}, state="interrupted")
    assert cli("gate", "--baseline", f"run:{base}", "--db", db) == 2
    assert "is interrupted" in capsys.readouterr().err


def test_runs_with_nothing_in_common_are_bad_input(tmp_path, capsys):
    db = _db(tmp_path)
    store = Store(db)
    base = make_run(store, {("aten::add.Tensor", "float32"): "pass"})
    make_run(store, {("aten::mul.Tensor", "float32"): "pass"})
    assert cli("gate", "--baseline", f"run:{base}", "--db", db) == 2
    assert "no cell in common" in capsys.readouterr().err


def test_a_run_that_was_not_derandomized_is_flagged(tmp_path, capsys):
    db = _db(tmp_path)
    store = Store(db)
    base = make_run(store, {("aten::add.Tensor", "float32"): "pass"})
    make_run(store, {("aten::add.Tensor", "float32"): "pass"}, options={})
    assert cli("gate", "--baseline", f"run:{base}", "--db", db) == 0
    assert "was not derandomized" in capsys.readouterr().out


def _timing_row(op, median, iqr):
    return {"op": op, "dtype": "float32", "size_label": "small", "shape": [64], "layout": "contiguous", "numel": 64,
            "device_median_s": median, "device_iqr_s": iqr, "device_kernel_s": None, "ref_median_s": median, "ref_iqr_s": iqr, "repeats": 100}  # fmt: skip


def test_timing_regressions_beyond_noise_fail_the_gate(tmp_path, capsys):
    db = _db(tmp_path)
    store = Store(db)
    cells = {("aten::add.Tensor", "float32"): "pass", ("aten::mul.Tensor", "float32"): "pass"}
    base, cur = make_run(store, cells), make_run(store, cells)

    record_timings(
        store, base, [_timing_row("aten::add.Tensor", 10e-6, 0.2e-6), _timing_row("aten::mul.Tensor", 10e-6, 3e-6)]
    )
    record_timings(
        store, cur, [_timing_row("aten::add.Tensor", 20e-6, 0.2e-6), _timing_row("aten::mul.Tensor", 12e-6, 3e-6)]
    )  # mul: within noise
    assert cli("gate", "--baseline", f"run:{base}", "--db", db, "--junitxml", str(tmp_path / "t.xml")) == 1
    out = capsys.readouterr().out
    assert "1 timing regression:\n  aten::add.Tensor float32 small [64]: 10.0 us -> 20.0 us (+100%" in out
    assert out.splitlines()[-1] == "FAIL: 1 timing regression"
    assert cli("gate", "--baseline", f"run:{base}", "--db", db, "--no-timing") == 0


def test_timings_in_another_database_are_compared_by_the_same_rule(tmp_path, capsys):
    """A baseline from another machine's database: the same slowdowns as within one database."""
    cells = {("aten::add.Tensor", "float32"): "pass", ("aten::mul.Tensor", "float32"): "pass"}
    stores = {name: Store(_db(tmp_path, name)) for name in ("base.db", "cur.db")}
    runs = {name: make_run(store, cells) for name, store in stores.items()}

    record_timings(
        stores["base.db"],
        runs["base.db"],
        [_timing_row("aten::add.Tensor", 10e-6, 0.2e-6), _timing_row("aten::mul.Tensor", 10e-6, 3e-6)],
    )
    record_timings(
        stores["cur.db"],
        runs["cur.db"],
        [_timing_row("aten::add.Tensor", 20e-6, 0.2e-6), _timing_row("aten::mul.Tensor", 12e-6, 3e-6)],
    )
    assert cli("gate", "--baseline", _db(tmp_path, "base.db"), "--db", _db(tmp_path, "cur.db")) == 1
    out = capsys.readouterr().out
    assert "1 timing regression:\n  aten::add.Tensor float32 small [64]: 10.0 us -> 20.0 us (+100%" in out


# -- determinism --------------------------------------------------------------------------------


def test_a_derandomized_cell_draws_the_same_cases_and_replays_its_stored_failure_first(tmp_path):
    import opdb

    op = opdb.lookup("aten::sub.Tensor")

    def cases(backend, seed, db):
        seen = []
        r = run_cell(
            op,
            "float32",
            backend,
            CellSettings(examples=3, seed=seed, derandomize=True, hypothesis_db=db),
            on_case=lambda c: seen.append(c.to_json()),
        )
        return r, seen

    from conform.backends import CPUBackend

    # the same cases whatever the run seed: the gate compares like with like
    r1, seen1 = cases(CPUBackend(), 1, None)
    r2, seen2 = cases(CPUBackend(), 2, None)
    assert r1.outcome == r2.outcome == "pass" and seen1 == seen2
    # a failure, once found, is what the next run tries first
    db = str(tmp_path / "hypothesis")
    failed, _ = cases(SubOffByOne(), 0, db)
    assert failed.outcome == "mismatch"
    again, seen = cases(SubOffByOne(), 0, db)
    assert again.outcome == "mismatch" and seen[0] == failed.case
    # a cell that gives up (every input invalid) leaves nothing to replay: the next run is the same
    where = opdb.lookup("aten::where.self")
    runs = []
    for _ in range(2):
        seen = []
        r = run_cell(
            where,
            "float32",
            CPUBackend(),
            CellSettings(examples=3, derandomize=True, hypothesis_db=db),
            on_case=lambda c: seen.append(c.to_json()),
        )
        runs.append((r.outcome, r.message, seen))
    assert runs[0] == runs[1]

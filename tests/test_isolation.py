"""Process isolation on devices that do not survive fork() and errors that poison a device
context (issue 14), with the Python stand-ins of isolation_backends.py."""

import sqlite3

from cli_helpers import cells, conform, run_states


def _messages(db) -> dict:
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT o.qualname, r.dtype, r.message FROM results r JOIN ops o ON o.id = r.op_id").fetchall()
    return {(op, dt): m for op, dt, m in rows}


def _remembered(tmp_path) -> str:
    return "".join(p.read_text() for p in (tmp_path / ".conform").glob("crashers-*.txt"))


def test_a_fork_poisoned_device_works_in_isolated_cells(tmp_path):
    # aten::_chunk_cat is isolated (opdb/rules/isolate.toml): its cells run in a process of
    # their own. Forked from a worker that had initialised the device, that process could not
    # use it ("Cannot re-initialize CUDA in forked subprocess"): every cell was device_error.
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", "aten::abs,aten::_chunk_cat", "--dtypes", "float32", "--device", "isolation_backends:ForkPoisonedBackend", "--examples", "2", "-n", "1", "--seed", "1", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    messages = _messages(db)
    assert outcome[("aten::_chunk_cat", "float32")] == "pass", messages[("aten::_chunk_cat", "float32")]
    assert outcome[("aten::abs", "float32")] == "pass", messages[("aten::abs", "float32")]
    assert run_states(db) == {1: "finished"}


def test_a_sticky_error_costs_exactly_one_cell(tmp_path):
    # aten::abs trips a device-side assert; every later call in that process fails with it. The
    # worker replaces its device process, so the cells after it (same worker, -n 1) pass.
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", "aten::abs,aten::neg,aten::relu,aten::sin", "--dtypes", "float32", "--device", "isolation_backends:StickyBackend", "--examples", "2", "-n", "1", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    assert outcome.pop(("aten::abs", "float32")) == "device_error"
    assert outcome and all(o == "pass" for o in outcome.values()), outcome
    message = _messages(db)[("aten::abs", "float32")]
    assert "device-side assert triggered" in message and "poisoned the device context" in message
    assert "abs" not in _remembered(tmp_path)  # an error, not a crash: nothing to isolate later
    assert run_states(db) == {1: "finished"}


def test_failures_of_isolation_itself_are_not_remembered_as_crashes(tmp_path):
    # the device cannot start in a child process: no op is to blame, and none is remembered
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", "aten::abs,aten::_cummax_helper", "--dtypes", "float32", "--device", "isolation_backends:DiesInChildrenBackend", "--examples", "2", "-n", "1", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    assert set(outcome.values()) == {"skipped"}, outcome
    assert all("could not start" in m or "failed to start" in m for m in _messages(db).values()), _messages(db)
    assert _remembered(tmp_path) == ""
    crashed = list((tmp_path / ".conform" / "runs").glob("*/crashed-ops.txt"))
    assert all(p.read_text() == "" for p in crashed)
    assert run_states(db) == {1: "finished"}

"""Crashes, hangs, interruptions and kill -9 lose nothing (issue: durability)."""

import os
import signal
import sqlite3
import time

import pytest

from cli_helpers import cells, conform, popen_conform, run_states

OPS = "aten::abs,aten::neg,aten::relu,aten::sin,aten::exp"


def test_abort_and_hang_are_recorded_and_the_sweep_finishes(tmp_path):
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", OPS, "--dtypes", "float32,bfloat16", "--device", "durability_backends:TrapBackend", "--examples", "3", "-n", "2", "--case-timeout", "8", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    # the second crashing cell of an op runs in a clean process of its own: still a crash
    assert outcome[("aten::abs", "float32")] == "crash"
    assert outcome[("aten::abs", "bfloat16")] == "crash"
    assert outcome[("aten::neg", "float32")] == "timeout"
    assert outcome[("aten::neg", "bfloat16")] == "timeout"
    others = {k: v for k, v in outcome.items() if k[1] != "none" and k[0] not in ("aten::abs", "aten::neg")}
    assert others and all(v == "pass" for v in others.values()), others
    with sqlite3.connect(db) as c:
        case, repro = c.execute(
            "SELECT f.\"case\", f.repro FROM failures f JOIN results r ON r.id = f.result_id JOIN ops o ON o.id = r.op_id WHERE o.qualname = 'aten::abs'"
        ).fetchone()
    assert '"aten::abs"' in case  # the case in flight when the process died
    assert "torch.ops.aten.abs" in repro
    assert run_states(db) == {1: "finished"}


def test_ops_opdb_knows_to_crash_run_forked_and_never_kill_a_worker(tmp_path):
    # opdb/rules/isolate.toml: such cells run in a clean process of their own from the start, so
    # the crash costs that process, and the op (isolated already) is not put in the crashers memory
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", "aten::_cummax_helper,aten::abs", "--dtypes", "float32,float64", "--device", "durability_backends:AbortsInIsolatedOpBackend", "--examples", "3", "-n", "1", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    assert outcome[("aten::_cummax_helper", "float32")] == "crash"
    assert outcome[("aten::_cummax_helper", "float64")] == "crash"
    assert outcome[("aten::abs", "float32")] == "pass"
    remembered = "".join(p.read_text() for p in (tmp_path / ".conform").glob("crashers-*.txt"))
    assert "_cummax_helper" not in remembered  # no worker died
    assert run_states(db) == {1: "finished"}


def _wait_for_results(db, n, proc, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"run ended early: {proc.stderr.read()}"
        try:
            if len(cells(db)) >= n:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.5)
    raise AssertionError(f"fewer than {n} results after {timeout} s")


SLOW_OPS = "aten::relu,aten::sin,aten::cos,aten::exp,aten::abs"
SLOW_ARGS = ["--ops", SLOW_OPS, "--dtypes", "float32,float64", "--device", "durability_backends:SlowBackend", "--examples", "3", "-n", "2", "--seed", "7", "-q"]


def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path):
    db = tmp_path / "killed.db"
    proc = popen_conform("run", *SLOW_ARGS, "--db", db, cwd=tmp_path)
    _wait_for_results(db, 3, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = cells(db)
    assert run_states(db) == {1: "running"}
    resumed = conform("run", "--resume", "latest", "--db", db, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    final = cells(db)
    assert len(final) == len(set(final)), "a resumed run duplicated cells"
    assert set(partial) <= set(final), "resume lost recorded cells"

    reference_db = tmp_path / "whole.db"
    whole = conform("run", *SLOW_ARGS, "--db", reference_db, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert {(op, dt) for op, dt, _ in final} == {(op, dt) for op, dt, _ in cells(reference_db)}
    assert run_states(db) == {1: "finished"}


def test_ctrl_c_stops_cleanly_and_marks_the_run_interrupted(tmp_path):
    db = tmp_path / "c.db"
    proc = popen_conform("run", *SLOW_ARGS, "--db", db, cwd=tmp_path)
    _wait_for_results(db, 2, proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "--resume 1" in err
    assert run_states(db) == {1: "interrupted"}
    recorded = cells(db)
    assert recorded and len(recorded) == len(set(recorded))

"""Crashes, hangs, interruptions and kill -9 lose nothing (issue: durability)."""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from cli_helpers import cells, conform, conform_env, popen_conform, run_states

OPS = "aten::abs,aten::neg,aten::relu,aten::sin,aten::exp"


def test_abort_and_hang_are_recorded_and_the_sweep_finishes(tmp_path):
    db = tmp_path / "c.db"
    proc = conform(
        "run",
        "--ops",
        OPS,
        "--dtypes",
        "float32,bfloat16",
        "--device",
        "durability_backends:TrapBackend",
        "--examples",
        "3",
        "-n",
        "2",
        "--case-timeout",
        "8",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    # the second crashing cell of an op runs in a clean process of its own: still a crash
    assert outcome[("aten::abs", "float32")] == "crash"
    assert outcome[("aten::abs", "bfloat16")] == "crash"
    assert outcome[("aten::neg", "float32")] == "timeout"
    assert outcome[("aten::neg", "bfloat16")] == "timeout"
    # abs.out's and abs_'s cells run the functional abs on the device too (the forms relation holds
    # an out= or in-place overload against its functional): a death or hang there is the
    # functional's, so those cells pass on their own kernels, with a finding at most
    trapped = {(op, dt) for op in ("aten::abs", "aten::neg") for dt in ("float32", "bfloat16")}
    others = {k: v for k, v in outcome.items() if k[1] != "none" and k not in trapped}
    assert any(k[0] in ("aten::abs.out", "aten::abs_", "aten::neg.out", "aten::neg_") for k in others), others
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
    proc = conform(
        "run",
        "--ops",
        "aten::_cummax_helper,aten::abs",
        "--dtypes",
        "float32,float64",
        "--device",
        "durability_backends:AbortsInIsolatedOpBackend",
        "--examples",
        "3",
        "-n",
        "1",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
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
SLOW_DTYPES = "float32"  # 22 cells (the ops' out= and in-place forms too): enough left to cut into
SLOW_ARGS = [
    "--ops",
    SLOW_OPS,
    "--dtypes",
    SLOW_DTYPES,
    "--device",
    "durability_backends:SlowBackend",
    "--examples",
    "3",
    # one worker: the worker's side of a kill or a Ctrl-C (a stopped worker's cell is no crash),
    # the controller's own loop taking the Ctrl-C, without a second worker's start-up
    "-n",
    "1",
    "--seed",
    "7",
    "-q",
]


def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path):
    from conform.run import selection

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
    # what an uninterrupted run records: each cell of its plan once (a whole run beside this one,
    # for its cells alone, cost as much CPU as the killed run and its resume together)
    plan = selection.plan_cells(selection.select_ops(SLOW_OPS), selection.parse_dtypes(SLOW_DTYPES))
    assert {(op, dt) for op, dt, _ in final} == set(plan) and len(final) == _planned(db) == len(plan)
    assert run_states(db) == {1: "finished"}


def _planned(db) -> int:
    with sqlite3.connect(db) as c:
        return c.execute("SELECT cells_planned FROM runs").fetchone()[0]


def _interrupt(proc, when) -> tuple[str, str]:
    """SIGINT to the run's process group (what Ctrl-C at a terminal sends) once `when()` holds."""
    deadline = time.monotonic() + 240
    while not when() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    return proc.communicate(timeout=120)


def _snapshot(db) -> tuple[dict, list]:
    try:
        return run_states(db), sorted(cells(db))
    except sqlite3.Error:  # not created yet, or its schema not yet written
        return {}, []


def _check_stopped(db, proc, out, err, before) -> str | None:
    """What Ctrl-C must leave, whatever moment it landed: one line on stderr and no traceback;
    the database as it was before (the interrupt came before a run was started or resumed), or
    the run `interrupted` with exactly the count printed (or `finished` with every cell, when the
    interrupt came after the final state was written); no duplicate cell, and no cell stored as a
    crash because its worker was stopped."""
    assert "Traceback" not in err, err
    if "run 1 " not in out:
        assert proc.returncode == 130 and err.strip() == "conform: interrupted", (proc.returncode, out, err)
        assert _snapshot(db) == before, "an interrupt before the run started changed the database"
        return None
    (state,) = run_states(db).values()
    stored = cells(db)
    assert len(stored) == len(set(stored)), "duplicate cells"
    assert not [c for c in stored if c[2] == "crash"], "a cell stopped by Ctrl-C was stored as a crash"
    if state == "finished":
        assert len(stored) == _planned(db), (len(stored), _planned(db), out, err)
        return state
    assert state == "interrupted", (state, out, err)
    assert proc.returncode == 130, (proc.returncode, err)
    m = re.search(r"run 1 interrupted: (\d+) of (\d+) cells recorded", out)
    assert m and int(m[1]) == len(stored) and int(m[2]) == _planned(db), (out, len(stored))
    assert "`conform run --resume 1 --db " in err, err
    return state


def _results(db) -> int:
    try:
        return len(cells(db))
    except sqlite3.Error:  # not created yet, or its schema not yet written
        return -1


def _has_run(db) -> bool:
    try:
        return bool(run_states(db))
    except sqlite3.Error:
        return False


def _since(predicate, seconds):
    """A condition that holds `seconds` after `predicate` first held."""
    first = []

    def when():
        if not first and predicate():
            first.append(time.monotonic())
        return bool(first) and time.monotonic() - first[0] >= seconds

    return when


def test_ctrl_c_the_moment_the_run_is_started_or_resumed_leaves_it_interrupted(tmp_path):
    # The SIGINT handler fires the instant the controller is built: the run exists (new, or
    # marked `running` again by --resume) and no pytest session has started. It used to escape
    # as "conform: interrupted" and leave the run `running` (1 of 3 CI runs of the test above).
    (tmp_path / "sigint_at_start.py").write_text(
        "import signal, sys\n"
        "from conform import cli, plugin\n"
        "from conform.run import interrupts\n"
        "built = plugin.Controller.__init__\n"
        "def init(self, *a, **k):\n"
        "    built(self, *a, **k)\n"
        "    interrupts._on_sigint(signal.SIGINT, None)  # as if Ctrl-C landed here\n"
        "plugin.Controller.__init__ = init\n"
        "cli.main(sys.argv[1:])\n"
    )
    db = tmp_path / "c.db"
    for args in (["--ops", "aten::abs,aten::neg", "--dtypes", "float32"], ["--resume", "latest"]):
        proc = subprocess.run(
            [sys.executable, "-m", "sigint_at_start", "run", *args, "--db", str(db), "--no-bench", "-q"],
            cwd=tmp_path,
            env=conform_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 130, (args, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
        assert run_states(db) == {1: "interrupted"}, (args, proc.stderr)
        assert re.search(r"run 1 interrupted: 0 of \d+ cells recorded", proc.stdout), proc.stdout
        assert "`conform run --resume 1 --db " in proc.stderr, proc.stderr
    done = conform("run", "--resume", "latest", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert run_states(db) == {1: "finished"} and len(cells(db)) == _planned(db) > 0


def test_ctrl_c_inside_exec_compiled_code_still_exits_130(tmp_path):
    # Ctrl-C while torch is imported lands, now and then, in code that dataclasses or namedtuple
    # built with exec(): a KeyboardInterrupt raised there made `python -m conform.cli` end by
    # SIGINT (-2) after "conform: interrupted" (conform.run.interrupts._in_source_string). Here the
    # SIGINT comes from inside exec'd source on purpose, in a command that runs under cli.main.
    (tmp_path / "execd.py").write_text(
        "from conform import cli\n"
        "@cli.cli.command()\n"
        "def execd():\n"
        "    exec('import os, signal, time\\nos.kill(os.getpid(), signal.SIGINT)\\ntime.sleep(0.5)')\n"
        "    import time\n"
        "    time.sleep(10)\n"
        "cli.main(['execd'])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "execd"], cwd=tmp_path, env=conform_env(), capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stderr.strip()) == (130, "conform: interrupted")


def _launched():
    return True


# start-up (before the run exists; the moment it appears, while its catalog and plan are written;
# while the workers start), mid-sweep, and when the last cell is stored (shutdown): one test each,
# so that pytest-xdist runs them side by side (each is a whole `conform run`, mostly waiting).
# Mid-sweep is the first step of the resume test below, which needs that interrupted run anyway.
_POINTS = {
    "before the run": lambda db: _since(_launched, 1.0),
    "run appears": lambda db: lambda: _has_run(db),
    "workers starting": lambda db: _since(lambda: _has_run(db), 1.0),
    "mid-sweep": lambda db: lambda: _results(db) >= 3,
    "shutdown": lambda db: lambda: _has_run(db) and _results(db) >= _planned(db),
}


def _interrupted_run(db, name, cwd) -> str | None:
    # (started with SIGINT blocked: on a loaded machine the interpreter's own start-up can
    # outlast the first point's second, and no code of conform's runs there to take it; mid-sweep,
    # once cells are stored, conform's handler holds, so that run starts as from a terminal)
    args = SLOW_ARGS
    if name == "shutdown":  # the moment comes after the last cell: a sweep of two ops' cells will do
        args = [*SLOW_ARGS[:1], "aten::relu,aten::sin", *SLOW_ARGS[2:]]
    proc = popen_conform("run", *args, "--db", db, cwd=cwd, sigint_blocked=name != "mid-sweep")
    out, err = _interrupt(proc, _POINTS[name](db))
    try:
        return _check_stopped(db, proc, out, err, ({}, []))
    except AssertionError as e:
        raise AssertionError(f"Ctrl-C at {name!r}: {e}") from None


@pytest.mark.parametrize("name", [name for name in _POINTS if name != "mid-sweep"])
def test_ctrl_c_at_any_moment_leaves_the_run_interrupted_with_an_exact_count(tmp_path, name):
    state = _interrupted_run(tmp_path / "c.db", name, tmp_path)
    if name == "run appears":  # the run exists and cells remain: never `finished`
        assert state == "interrupted", state


def test_ctrl_c_at_any_moment_of_a_resume_leaves_it_interrupted_and_a_last_resume_completes(tmp_path):
    # an interrupted --resume: before it takes the run over, the moment it marks it running
    # again (once: "database is locked", the run left `running`), and mid-way; then one that
    # completes
    db = tmp_path / "c.db"
    # Ctrl-C mid-sweep: the run exists and cells remain, so it is never `finished`
    assert _interrupted_run(db, "mid-sweep", tmp_path) == "interrupted"
    resume_points = {
        "resume starting": lambda: _since(_launched, 1.0),
        "resume takes the run": lambda: lambda: _snapshot(db)[0] == {1: "running"},
        "resume mid-way": lambda: (lambda base: lambda: _results(db) >= base + 2)(_results(db)),
    }
    for name, point in resume_points.items():
        before = _snapshot(db)
        proc = popen_conform("run", "--resume", "latest", "--db", db, cwd=tmp_path, sigint_blocked=True)
        out, err = _interrupt(proc, point())
        try:
            _check_stopped(db, proc, out, err, before)
        except AssertionError as e:
            raise AssertionError(f"Ctrl-C at {name!r}: {e}") from None
    done = conform("run", "--resume", "latest", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert run_states(db) == {1: "finished"}
    final = cells(db)
    assert len(final) == len(set(final)) == _planned(db)


def test_an_interrupt_while_torch_is_imported_is_raised_once_the_import_is_done():
    """A KeyboardInterrupt inside torch's import leaves its C++ half initialised, and the
    interpreter's teardown then aborts (status -6, "terminate called after throwing an instance
    of 'python_error'"): the commands' lazy imports only note a Ctrl-C, raised after them."""
    from conform.run import interrupts

    previous = signal.getsignal(signal.SIGINT)
    # (another test of this process may have left the state installed and the handler replaced)
    interrupts._state.update(installed=False, seen=False, raised=False, held=0)
    interrupts.install()
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with interrupts.importing():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
                done.append("the import ran to its end")
        assert done == ["the import ran to its end"]
    finally:
        interrupts.release()
        interrupts._state.update(seen=False, raised=False)
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_in_a_frame_without_a_line_number_is_still_reported_as_an_interrupt():
    """With one worker the controller's own loop takes the Ctrl-C; inside a multi-line `with`
    a frame can have no line number, and pytest's reporter, formatting the interrupt, raised
    TypeError over it."""
    from types import SimpleNamespace

    from _pytest._code.code import ExceptionInfo, Traceback, TracebackEntry

    from conform.plugin import Controller

    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as e:
        excinfo = ExceptionInfo.from_exception(e)
    unnumbered = TracebackEntry(SimpleNamespace(tb_lineno=None, tb_frame=sys._getframe(), tb_next=None))
    excinfo.traceback = Traceback([*excinfo.traceback, unnumbered])
    with pytest.raises(TypeError):
        excinfo.getrepr(funcargs=True)
    Controller.pytest_keyboard_interrupt(None, excinfo)
    assert "KeyboardInterrupt" in str(excinfo.getrepr(funcargs=True))

"""Running the `conform` command as a user would, in a subprocess, and reading its database."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent


def conform_env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("CONFORM_DB", None)
    env.update(extra)
    return env


def _command(args) -> list[str]:
    args = [str(a) for a in args]
    # `conform run` times the core ops after its sweep; tests that are not about that skip it
    if args[:1] == ["run"] and "--bench" not in args:
        args.append("--no-bench")
    return [sys.executable, "-m", "conform.cli", *args]


def conform(*args, cwd, timeout=300, check=False) -> subprocess.CompletedProcess:
    cmd = _command(args)
    proc = subprocess.run(cmd, cwd=cwd, env=conform_env(), capture_output=True, text=True, timeout=timeout)
    return _checked(proc, args) if check else proc


def _checked(proc: subprocess.CompletedProcess, args) -> subprocess.CompletedProcess:
    if proc.returncode != 0:
        raise AssertionError(
            f"conform {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def conform_here(*args, cwd, check=False) -> subprocess.CompletedProcess:
    """`conform ARGS` run by the CLI's own entry point in this process, in `cwd`, with its exit
    status, stdout and stderr as `conform()` gives them. For the commands that only read a
    database or the catalog (coverage, ops, site, gate, ...): a subprocess of its own paid the
    torch import and the catalog load again (seconds of CPU each) to test the same code path.
    A `conform run` that runs cells stays a subprocess (it starts workers and a fork server of its
    own): here a `run` must be refused before its session starts (bad input), and fails the test
    if it gets that far."""
    import io

    import pytest

    from conform.cli.main import main

    args = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    here, sigint = os.getcwd(), signal.getsignal(signal.SIGINT)
    saved_db = os.environ.pop("CONFORM_DB", None)
    code = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _no_session(pytest):
            try:
                main(args)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        os.chdir(here)
        signal.signal(signal.SIGINT, sigint)  # the entry point leaves SIGINT ignored when it ends
        if saved_db is not None:
            os.environ["CONFORM_DB"] = saved_db
    proc = subprocess.CompletedProcess(["conform", *args], code, out.getvalue(), err.getvalue())
    return _checked(proc, args) if check else proc


@contextlib.contextmanager
def _no_session(pytest):
    """pytest.main refused while an in-process command runs: a `conform run` that was expected to
    be refused but starts its session (cells, workers) fails the test instead."""

    def refused(*args, **kwargs):
        raise AssertionError("conform run started its session in the test's process: expected a refusal")

    started, pytest.main = pytest.main, refused
    try:
        yield
    finally:
        pytest.main = started


def popen_conform(*args, cwd, sigint_blocked: bool = False) -> subprocess.Popen:
    """`conform ARGS` in its own process group. With `sigint_blocked`, it starts with SIGINT
    blocked, so that one sent while the interpreter itself starts (before any of conform's code
    can take it) waits for conform's handler instead of killing the process."""
    cmd = _command(args)
    return subprocess.Popen(
        cmd,
        cwd=cwd,
        env=conform_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=(lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})) if sigint_blocked else None,
    )


def cells(db: Path, run_id: int | None = None) -> list[tuple[str, str, str]]:
    """(qualname, dtype, outcome) of every stored result, duplicates included."""
    with sqlite3.connect(db) as c:
        q = "SELECT o.qualname, r.dtype, r.outcome FROM results r JOIN ops o ON o.id = r.op_id"
        rows = c.execute(q + (" WHERE r.run_id = ?" if run_id else ""), (run_id,) if run_id else ()).fetchall()
    return [tuple(r) for r in rows]


def run_states(db: Path) -> dict[int, str]:
    with sqlite3.connect(db) as c:
        return dict(c.execute("SELECT id, state FROM runs").fetchall())


def damaged_database(path: Path) -> bytes:
    """A real conform database with a few of its middle pages overwritten, as a disk error or a
    copy taken while it was written leaves one. Returns its bytes, to check nothing wrote to it."""
    from conform.results import CellResult
    from conform.store import Store
    from opdb.spec import OpSpec

    op = OpSpec(
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
    store = Store(path)
    run = store.start_run(
        {"fingerprint": "d" * 32, "torch_version": "2.13.0", "backend": "cpu", "device_name": "CPU"},
        options={},
        seed=1,
        ops_total=1,
        cells_planned=300,
    )
    store.record_catalog(run, [op])
    for i in range(300):
        store.record_result(
            run,
            CellResult(
                op="aten::relu",
                dtype=f"d{i}",
                outcome="mismatch",
                examples_run=1,
                message="x" * 500,
                repro="import torch\n" * 100,
            ),
        )
    store.set_run_state(run, "finished")
    store.close()
    with sqlite3.connect(path) as c:
        c.execute("PRAGMA journal_mode = DELETE")  # everything in the one file, no -wal beside it
        page, count = c.execute("PRAGMA page_size").fetchone()[0], c.execute("PRAGMA page_count").fetchone()[0]
    with open(path, "r+b") as f:
        for k in (0, 5, 11):
            f.seek((count // 2 + k) * page)
            f.write(b"\xde\xad\xbe\xef" * (page // 4))
    return path.read_bytes()

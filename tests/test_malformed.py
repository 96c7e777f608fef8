"""Malformed arguments (an input one longer, empty, of one more or one fewer dim) must be refused
or computed with: a kernel that dies on them is a `crash`, recorded with the call that died."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import opdb
from cli_helpers import conform, conform_env
from conform.backends import CPUBackend
from conform.run import execute
from generators.case import Case, TensorSpec
from generators.variants import MALFORMED_SHAPES, malformed_inputs


def test_each_input_is_malformed_in_every_way_one_at_a_time():
    case = Case(
        "aten::addmm.out",
        (TensorSpec((3,), "float32"), TensorSpec((2, 4), "float32"), TensorSpec((4, 3), "float32")),
        {"out": TensorSpec((0,), "float32")},
    )
    found = malformed_inputs(case, {"out"})
    assert len(found) == 3 * len(MALFORMED_SHAPES)
    shapes = [tuple(tuple(a.shape) for a in c.args) for _, c in found[: len(MALFORMED_SHAPES)]]
    assert shapes == [((4,), (2, 4), (4, 3)), ((0,), (2, 4), (4, 3)), ((2, 3), (2, 4), (4, 3)), ((), (2, 4), (4, 3))]
    assert all(c.kwargs["out"].shape == (0,) for _, c in found)  # the out is not an input
    assert found[0][0] == "argument 1 one longer in its last dim"


def test_malformed_calls_run_on_the_plain_cpu_in_an_isolated_process_only(monkeypatch):
    op = opdb.lookup("aten::mm")
    case = Case("aten::mm", (TensorSpec((2, 3), "float32"), TensorSpec((3, 4), "float32")), {})
    # in the caller's own process (no isolation records a death): none, or a death kills the caller
    assert execute.run_malformed(op, case, CPUBackend()) == 0
    announced = []
    monkeypatch.setattr(execute, "on_variant", lambda case, name: announced.append(name))
    assert execute.run_malformed(op, case, CPUBackend()) == 2 * len(MALFORMED_SHAPES)
    assert "a malformed argument: argument 2 with one dim fewer" in announced

    class Other(CPUBackend):
        name = "other"

        def device_context(self):
            return None

    assert execute.run_malformed(op, case, Other()) == 0


def test_a_kernel_that_dies_on_an_empty_argument_is_a_crash_with_that_call(tmp_path):
    """The real kernel (pytorch#136709): _weight_norm of an empty v dies in the CPU kernel."""
    db = tmp_path / "c.db"
    proc = conform("run", "--ops", "aten::_weight_norm", "--dtypes", "float32", "--db", db, "-q", cwd=tmp_path)
    assert proc.returncode != 2, proc.stderr
    with sqlite3.connect(db) as c:
        outcome, message = c.execute("SELECT outcome, message FROM results").fetchone()
        case, repro = c.execute('SELECT f."case", f.repro FROM failures f').fetchone()
    assert outcome == "crash", message
    assert "a malformed argument: argument 1 empty in its first dim" in message, message
    assert json.loads(case)["args"][0]["__tensor__"]["shape"][0] == 0
    # its script replays the call that died
    script = tmp_path / "repro.py"
    script.write_text(repro)
    replay = subprocess.run([sys.executable, script], capture_output=True, text=True, env=conform_env(), timeout=120)
    assert replay.returncode < 0 or replay.returncode > 128, (replay.returncode, replay.stdout[-500:])

"""Process isolation on devices that do not survive fork() and errors that poison a device
context, with the Python stand-ins of isolation_backends.py."""

import json
import sqlite3
import subprocess
import sys

import pytest

from cli_helpers import cells, conform, conform_env, run_states


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
    proc = conform(
        "run",
        "--ops",
        "aten::abs,aten::_chunk_cat",
        "--dtypes",
        "float32",
        "--device",
        "isolation_backends:ForkPoisonedBackend",
        "--examples",
        "2",
        "--seed",
        "1",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    messages = _messages(db)
    assert outcome[("aten::_chunk_cat", "float32")] == "pass", messages[("aten::_chunk_cat", "float32")]
    assert outcome[("aten::abs", "float32")] == "pass", messages[("aten::abs", "float32")]
    assert run_states(db) == {1: "finished"}


def test_a_sticky_error_costs_exactly_one_cell(tmp_path):
    # aten::abs trips a device-side assert; every later call in that process fails with it. The
    # process running the cells (the controller itself: a run this small has no worker) replaces
    # its device process, so the cells after it pass.
    db = tmp_path / "c.db"
    proc = conform(
        "run",
        "--ops",
        "aten::abs,aten::neg,aten::relu,aten::sin",
        "--dtypes",
        "float32",
        "--device",
        "isolation_backends:StickyBackend",
        "--examples",
        "2",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    assert outcome.pop(("aten::abs", "float32")) == "device_error"
    # abs.out's cell runs the functional abs on the device too (the forms relation): the poisoned
    # context is the functional's failure, so abs.out passes on its own kernel, with a finding
    # at most; every other cell passes, so the poisoned device process was replaced each time
    assert ("aten::abs.out", "float32") in outcome
    assert outcome and all(o == "pass" for o in outcome.values()), outcome
    message = _messages(db)[("aten::abs", "float32")]
    assert "device-side assert triggered" in message and "poisoned the device context" in message
    assert "abs" not in _remembered(tmp_path)  # an error, not a crash: nothing to isolate later
    assert run_states(db) == {1: "finished"}


def test_failures_of_isolation_itself_are_not_remembered_as_crashes(tmp_path):
    # the device cannot start in a child process: no op is to blame, and none is remembered
    db = tmp_path / "c.db"
    proc = conform(
        "run",
        "--ops",
        "aten::abs,aten::_cummax_helper",
        "--dtypes",
        "float32",
        "--device",
        "isolation_backends:DiesInChildrenBackend",
        "--examples",
        "2",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    outcome = {(op, dt): o for op, dt, o in cells(db)}
    assert set(outcome.values()) == {"skipped"}, outcome
    assert all("could not start" in m or "failed to start" in m for m in _messages(db).values()), _messages(db)
    assert _remembered(tmp_path) == ""
    crashed = list((tmp_path / ".conform" / "runs").glob("*/crashed-ops.txt"))
    assert all(p.read_text() == "" for p in crashed)
    assert run_states(db) == {1: "finished"}


def test_a_run_on_the_emulated_device_loses_one_cell_per_fault(tmp_path):
    # the real constraints (conform.backends.emulated): a runtime poisoned by fork(), a sticky
    # device-side assert (tripped by aten::abs), and an isolated op that aborts its process
    from conform.backends import emulated  # part of conform: a broken import fails here, never skips

    try:
        emulated.load()
    except emulated.EmulatorUnavailable as e:
        pytest.skip(f"the emulated device cannot be built here: {e}")
    db = tmp_path / "c.db"
    ops = "aten::_cummax_helper,aten::abs,aten::mul.Tensor,aten::native_batch_norm,aten::erfinv"
    args = [
        "run",
        "--ops",
        ops,
        "--dtypes",
        "float32",
        "--device",
        "isolation_backends:EmuWithFaults",
        "--examples",
        "2",
        "--seed",
        "1",
        "--db",
        db,
        "-q",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "conform.cli", *map(str, args)],
        cwd=tmp_path,
        env=conform_env(CONFORM_EMU_FALLBACK="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    outcome = {op: o for op, _, o in cells(db)}
    messages = {op: m for (op, _), m in _messages(db).items()}
    assert outcome.pop("aten::_cummax_helper") == "crash"  # its own process died, not the one running the cells
    assert outcome.pop("aten::abs") == "device_error" and "poisoned the device context" in messages["aten::abs"]
    assert outcome.pop("aten::mul.Tensor") == "pass"
    assert outcome.pop("aten::erfinv") == "fallback" and "'aten::erfinv.out'" in messages["aten::erfinv"]
    # the isolated batch norm ran in a clean process: a fork of a used device could not run it
    assert "re-initialize" not in messages["aten::native_batch_norm"]
    assert set(outcome.values()) <= {"pass", "fallback"}, {op: (o, messages[op]) for op, o in outcome.items()}
    assert _remembered(tmp_path) == ""
    assert run_states(db) == {1: "finished"}


class _Trap(Exception):
    pass


def _plant_a_trunc_trap(workdir, op_name: str, dtype: str) -> None:
    """Store a drawn case of the cell that divides INT_MIN by -1 in trunc mode as the cell's
    failing example in the run's example database (run_cell's key, conform/run/cell.py): a run
    replays it before it draws anything, so the cell's first case kills the CPU reference
    whatever the run seed draws (seeds 12, then 5, stopped reaching it as the generators changed).
    Generation only, no shrinking, one bug: the database holds that one case and nothing else."""
    import torch
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.database import DirectoryBasedExampleDatabase

    import generators
    import opdb
    from conform.config import CellSettings
    from conform.run.cell import _database_key

    op = opdb.lookup(op_name)
    names = [a.name for a in op.arguments]

    def trap(case):
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
        drawn = {**dict(zip(names, args)), **kwargs}
        if drawn.get("rounding_mode") != "trunc":
            return
        try:
            x, y = torch.broadcast_tensors(drawn["self"], drawn["other"])
        except RuntimeError:  # shapes the op rejects: no division runs
            return
        if bool(((x == torch.iinfo(x.dtype).min) & (y == -1)).any()):
            raise _Trap(case.describe())

    test = settings(
        database=DirectoryBasedExampleDatabase(str(workdir / "hypothesis")),
        max_examples=500,
        phases=[Phase.generate],
        report_multiple_bugs=False,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )(given(generators.from_schema(op, dtype, max_numel=CellSettings().max_numel))(trap))
    test._hypothesis_internal_database_key = _database_key(op.qualname, dtype)
    test._hypothesis_internal_use_seed = 0  # the same case each time
    with pytest.raises(_Trap):
        test()


def _div_trunc_int32(tmp_path, device: str):
    _plant_a_trunc_trap(tmp_path / ".conform", "aten::div.Tensor_mode", "int32")
    db = tmp_path / f"{device.replace(':', '-')}.db"
    proc = conform(
        "run",
        "--ops",
        "aten::div.Tensor_mode",
        "--dtypes",
        "int32",
        "--device",
        device,
        "--examples",
        "1",  # after the planted case, only the simplest (no stress, no INT_MIN): no second trap
        "--seed",
        "5",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    with sqlite3.connect(db) as c:
        outcome, message, findings = c.execute("SELECT outcome, message, findings FROM results").fetchone()
    return proc, outcome, message, findings


def test_the_cpu_references_own_crash_is_not_the_devices(tmp_path):
    # integer div trunc on INT_MIN / -1 kills the process in the CPU kernel (SIGFPE,
    # pytorch#138425). On a device other than the CPU that is the reference's crash: the cell
    # is no `crash` alarm, and says so in a reference finding. On the CPU it stays `crash`.
    proc, outcome, message, findings = _div_trunc_int32(tmp_path, "isolation_backends:TruncSafeBackend")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outcome in ("pass", "skipped"), message
    assert "the CPU reference died (signal 8)" in message and "div.Tensor_mode(" in message, message
    # ... and the cell is drawn again without that case, so its other examples still run (the
    # fault of tests.faulty:IntegerOnlyWrong, in floor mode, hid behind the trunc case's death)
    assert message.startswith("1 examples passed (drawn again without the case the CPU reference died on"), message
    assert '"kind": "reference"' in findings and "not to blame" in findings, findings
    proc, outcome, message, _ = _div_trunc_int32(tmp_path, "cpu")
    assert outcome == "crash", message


def test_a_death_on_the_reference_side_keeps_what_the_completed_cases_said():
    from dataclasses import replace

    from conform.plugin import died_result
    from conform.run.isolation import InFlight

    cell = ("aten::div.Tensor_mode", "int32")
    record = InFlight(op=cell[0], dtype=cell[1], describe="div(INT_MIN, -1)", passed=3)
    r = died_result(cell, replace(record, side="reference"), "mps", "(signal 8)")
    assert (r.outcome, r.examples_passed, r.case) == ("pass", 3, None)
    assert r.findings[0]["kind"] == "reference" and "died (signal 8) on div(INT_MIN, -1)" in r.findings[0]["message"]
    r = died_result(cell, replace(record, side="golden", passed=0, timeout=True, limit_s=5), "mps")
    assert (r.outcome, r.skip_reason) == ("skipped", "reference_crash") and "float64 golden hung" in r.message
    # the device's own death, or one after the device had failed a case, stays its crash
    assert died_result(cell, replace(record, side="device"), "mps", "(signal 11)").outcome == "crash"
    assert died_result(cell, replace(record, side="reference", failed=True), "mps").outcome == "crash"


def test_a_death_in_the_forms_relations_functional_is_the_functionals_not_the_cells():
    from conform.plugin import died_result
    from conform.run.isolation import InFlight

    cell = ("aten::abs.out", "float32")
    record = InFlight(op=cell[0], dtype=cell[1], case={"op": cell[0]}, describe="abs.out(float32[3])", passed=2)
    assert died_result(cell, record, "cpu", "(signal 6)").outcome == "crash"  # its own kernel: its crash
    r = died_result(cell, InFlight(**{**record.to_dict(), "functional": "aten::abs"}), "cpu", "(signal 6)")
    assert (r.outcome, r.examples_passed, r.case) == ("pass", 2, None), r.message
    assert "aten::abs died (signal 6) on the device" in r.message and "not this overload's" in r.message


def test_the_in_flight_record_round_trips_and_writes_only_what_is_set(tmp_path):
    from conform.run.isolation import InFlight, mark_idle, read_record

    record = InFlight(op="aten::abs", dtype="float32", case={"op": "aten::abs"}, passed=2, side="golden", timeout=True)
    assert record.to_dict() == {
        "op": "aten::abs",
        "dtype": "float32",
        "case": {"op": "aten::abs"},
        "passed": 2,
        "side": "golden",
        "timeout": True,
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps({**record.to_dict(), "from_a_newer_conform": 1}))
    assert read_record(path) == record  # an unknown key is ignored
    mark_idle(path)
    assert json.loads(path.read_text()) == {"op": "aten::abs", "dtype": "float32", "idle": True}
    path.write_text('{"op": "aten::ab')  # caught half-written
    assert read_record(path) is None


def test_a_failure_whose_shrinking_the_cpu_reference_kills_is_still_reported(tmp_path):
    # the fault (floor division truncating) is found, then a shrink step is a trunc INT_MIN / -1
    # case that kills the CPU reference: the failure died with the process and the cell was
    # `crash`; drawn again without that case it is the fault's mismatch
    db = tmp_path / "c.db"
    proc = conform(
        "run", "--ops", "aten::div.Tensor_mode", "--dtypes", "int64", "--device", "faulty:IntegerOnlyWrong",
        "--seed", "0", "--db", db, "-q", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with sqlite3.connect(db) as c:
        outcome, message = c.execute("SELECT outcome, message FROM results").fetchone()
    assert outcome == "mismatch" and "drawn again without the case the CPU reference died on" in message, message


def test_a_run_with_one_shot_children_warms_their_fork_server():
    """Each isolated cell is a fresh fork of the server: what the first dispatch mode imports
    (torch._dynamo) and the caller-drawn ops' derivatives.yaml are loaded there once, instead of
    1.5 s in every such cell."""
    script = (
        "from conform.run import isolation; import isolation_backends as b;"
        "isolation.start_server(warm_dispatch=True);"
        "c = isolation.CleanChild(b.warmth_setup); print(c.call('warmth')); c.close()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=conform_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str({"dynamo": True, "derivatives": True}), proc.stdout


def test_a_death_on_an_out_variant_is_recorded_with_that_variant(tmp_path):
    # the out= variants run the case again with its out written through other strides; a death
    # there was recorded with the drawn case (a contiguous or empty out), whose script passes
    db = tmp_path / "c.db"
    proc = conform(
        "run",
        "--ops",
        "aten::abs.out",
        "--dtypes",
        "float32",
        "--device",
        "isolation_backends:StridedOutAbortBackend",
        "--seed",
        "1",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode != 2, proc.stderr
    with sqlite3.connect(db) as c:
        outcome, message = c.execute("SELECT outcome, message FROM results").fetchone()
        (case,) = c.execute('SELECT f."case" FROM failures f').fetchone()
    assert outcome == "crash", message
    assert "variant)" in message, message
    out = json.loads(case)["kwargs"]["out"]["__tensor__"]
    assert out["layout"] not in (None, "contiguous"), out


def test_a_death_in_a_backward_gets_a_script_that_runs_the_backward():
    # float64 grid_sampler_2d_backward at a NaN coordinate segfaults: the forward alone, which
    # the script replayed, passes; on the plain CPU the in-flight record now keeps the phase
    from conform.plugin import died_result
    from conform.run.isolation import InFlight

    cell = ("aten::abs", "float32")
    case = {"op": "aten::abs", "args": [{"__tensor__": {"shape": [3], "dtype": "float32", "seed": 1}}], "kwargs": {}}
    record = InFlight(op=cell[0], dtype=cell[1], case=case, describe="abs(float32[3])")
    forward = died_result(cell, record, "cpu", "(signal 11)")
    backward = died_result(cell, InFlight(**{**record.to_dict(), "phase": "backward"}), "cpu", "(signal 11)")
    assert forward.outcome == backward.outcome == "crash"
    assert "PHASE = 'forward'" in forward.repro and "PHASE = 'backward'" in backward.repro

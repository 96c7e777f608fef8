"""The typed objects a cell travels in: a run's settings (RunConfig, WorkerSetup) from the command
line to the workers, and its result (CellResult) to its row in the store."""

from __future__ import annotations

import dataclasses
import json

import pytest
from sqlalchemy import select

from cli_helpers import conform_here
from conform.config import CellSettings, RunConfig, WorkerSetup
from conform.errors import ConformError
from conform.results import NOT_STORED, CellResult
from conform.store import Failure, Op, Result, Store
from opdb.spec import OpSpec

BAD_SETTINGS = [
    ({"examples": 0}, "--examples must be at least 1, not 0"),
    ({"max_numel": 0}, "--max-numel must be at least 1, not 0"),
    ({"case_timeout_s": 0.0}, "--case-timeout must be a positive number of seconds, not 0"),
    ({"memory_limit": "lots"}, "--memory-limit takes GiB, 'auto' or 'none', not 'lots'"),
    ({"resume": "yesterday"}, "--resume takes a run id or 'latest', not 'yesterday'"),
]


@pytest.mark.parametrize("options, message", BAD_SETTINGS)
def test_bad_run_settings_are_refused_as_the_run_config_is_built(options, message):
    with pytest.raises(ConformError) as e:
        RunConfig.from_options(**options)
    assert str(e.value) == message


def test_bad_run_settings_are_one_line_errors_before_anything_is_written(tmp_path):
    proc = conform_here("run", "--ops", "aten::relu", "--examples", "0", "--db", tmp_path / "c.db", cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.strip() == "conform: error: --examples must be at least 1, not 0"
    assert list(tmp_path.iterdir()) == []


def test_a_worker_gets_the_same_typed_settings_through_workerinput():
    config = RunConfig.from_options(
        device="cpu", ops="aten::relu", seed=7, examples=3, grad=False, case_timeout_s=8.0, memory_limit="1.5"
    )
    assert config.seed == 7 and config.cell == CellSettings(examples=3, grad=False)
    setup = WorkerSetup(
        config=config, device_name="cpu", run_dir="/r", crashers="/c", memory_limit=config.memory_limit_bytes("cpu")
    )
    # xdist sends workerinput as plain values: what a worker rebuilds is equal, and typed
    rebuilt = WorkerSetup.from_json(json.loads(json.dumps(setup.to_json())))
    assert rebuilt == setup and isinstance(rebuilt.config.cell, CellSettings)
    assert rebuilt.memory_limit == int(1.5 * (1 << 30))


def test_a_resumed_run_continues_with_its_own_stored_settings():
    stored = RunConfig.from_options(
        device="cpu", ops="aten::relu", dtypes="float32", examples=9, grad=False, derandomize=True, case_timeout_s=5.0
    )
    now = RunConfig.from_options(resume="latest", db="other.db", progress=True)
    resumed = now.resumed(json.loads(json.dumps(stored.stored_options())), seed=11)
    assert resumed == dataclasses.replace(stored, seed=11, resume="latest", db="other.db", progress=True)


def test_a_cell_result_is_its_store_row(tmp_path):
    """Every field of a CellResult (but NOT_STORED) is stored, and read back as it was sent."""
    op = OpSpec(
        name="aten::relu", overload="", schema="aten::relu(Tensor self) -> Tensor", arguments=(), returns=("Tensor",),
        variant="functional", tags=(), family="pointwise", kernels=("CPU",),
    )  # fmt: skip
    store = Store(tmp_path / "c.db")
    run = store.start_run(
        {"fingerprint": "f" * 32, "torch_version": "2.13.0", "backend": "cpu"},
        options={},
        seed=1,
        ops_total=1,
        cells_planned=1,
    )
    store.record_catalog(run, [op])
    sent = CellResult(
        op="aten::relu", dtype="float32", outcome="mismatch", phase="backward", examples_run=4, examples_passed=3,
        max_abs_err=0.5, max_rel_err=0.25, max_ulp_err=7.0, rtol=1e-5, atol=1e-6, device_golden_err=0.5, ref_golden_err=1e-7,
        message="Mismatched elements: 1 / 4", case={"op": "aten::relu", "args": [], "kwargs": {}}, repro="import torch\n",
        traceback="Traceback ...", duration_s=1.5, invalid_examples=2, findings=[{"kind": "reference", "phase": "forward", "message": "m"}],
        skip_reason="",
        further_failures=[{"outcome": "grad_mismatch", "phase": "backward", "message": "m2", "case": {"op": "aten::relu"}, "repro": "r2"}],
    )  # fmt: skip
    assert store.record_result(run, sent) is True
    with store.session() as s:
        result, qualname = s.execute(select(Result, Op.qualname).join(Op, Result.op_id == Op.id)).one()
        failure = s.scalars(select(Failure)).one()
        stored = [f.name for f in dataclasses.fields(CellResult) if f.name not in NOT_STORED | {"op"}]
        got = {"op": qualname, **{name: getattr(result if hasattr(Result, name) else failure, name) for name in stored}}
    store.close()
    assert got == {k: v for k, v in dataclasses.asdict(sent).items() if k not in NOT_STORED}


def test_the_hang_limit_is_short_on_the_cpu_and_longer_where_kernels_compile():
    # a hang holds a worker for the whole limit; an accelerator's first call of a kernel may compile it
    auto = RunConfig()
    assert auto.case_timeout_for("cpu") == auto.case_timeout_for("meta") == 10.0
    assert auto.case_timeout_for("mps") == auto.case_timeout_for("cuda") == 30.0
    given = RunConfig(case_timeout_s=4.0)
    assert given.case_timeout_for("cpu") == given.case_timeout_for("cuda") == 4.0
    # a run stored before the limit depended on the device resumes with the limit it recorded
    assert auto.resumed({"case_timeout": 30.0}, seed=1).case_timeout_for("cpu") == 30.0
    assert auto.resumed(auto.stored_options(), seed=1).case_timeout_for("cpu") == 10.0

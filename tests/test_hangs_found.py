"""The hangs of the first audit are found by a default sweep (every real bug it named
stays found): their cells draw the inputs the CPU kernels never return from, and the watchdog
records each as a timeout with the case and a script. Also: scalars drawn within the contract
that the public API states (hardtanh's ordered bounds, the shrinks' non-negative lambd)."""

from __future__ import annotations

import sqlite3

import torch
from hypothesis import HealthCheck, Phase, given, settings

import generators
import opdb
from cli_helpers import conform


def test_a_sweep_records_the_count_and_binomial_hangs_as_timeouts(tmp_path):
    db = tmp_path / "c.db"
    proc = conform(
        "run",
        "--ops",
        "aten::count,aten::binomial",
        "--dtypes",
        "float32",
        "--case-timeout",
        "4",
        "--seed",
        "3",
        "--db",
        db,
        "-q",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as c:
        rows = c.execute(
            "SELECT o.qualname, r.dtype, r.outcome, r.message, f.repro FROM results r JOIN ops o ON o.id = r.op_id "
            "LEFT JOIN failures f ON f.result_id = r.id WHERE o.qualname IN ('aten::count', 'aten::binomial') "
            "AND r.outcome != 'skipped'"
        ).fetchall()
    found = {(op, dt): (outcome, message, repro) for op, dt, outcome, message, repro in rows}
    outcome, message, repro = found[("aten::count", "none")]
    assert outcome == "timeout" and 'count("' in message and '", "", ' in message, message
    assert repro and "torch.ops.aten.count" in repro
    outcome, message, repro = found[("aten::binomial", "float32")]
    assert outcome == "timeout" and "edge pattern" in message, message
    assert repro and "binomial" in repro


def test_on_an_accelerator_a_hang_of_the_generators_cpu_call_is_not_the_devices(tmp_path):
    # binomial.out's generator runs the functional on the CPU to size the out, and a NaN count
    # hangs it there: on a device whose kernels are the CPU's (any device other than the plain CPU)
    # that is the CPU reference's hang, not the device's timeout (benchmarks/false_alarms.py
    # blamed the device for it)
    db = tmp_path / "c.db"
    proc = conform(
        "run", "--ops", "aten::binomial.out", "--dtypes", "float32", "--device", "cpu_kernels:CPUKernels",
        "--case-timeout", "4", "--seed", "3", "--db", db, "-q", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as c:
        ((outcome, skip_reason, message, findings),) = c.execute(
            "SELECT r.outcome, r.skip_reason, r.message, r.findings FROM results r JOIN ops o ON o.id = r.op_id "
            "WHERE o.qualname = 'aten::binomial.out' AND r.dtype = 'float32'"
        ).fetchall()
    assert outcome in ("pass", "skipped"), (outcome, message)
    assert outcome == "pass" or skip_reason == "reference_crash", (outcome, skip_reason, message)
    assert "CPU reference hung" in findings and "not to blame" in findings, findings


def _scalars(name: str, n: int = 40) -> list[list]:
    seen = []

    @settings(max_examples=n, phases=[Phase.generate], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(generators.from_schema(opdb.lookup(name), "float32"))
    def draw(case):
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
        seen.append([v for v in [*args, *kwargs.values()] if isinstance(v, (int, float)) and not isinstance(v, bool)])

    draw()
    return seen


def test_hardtanh_bounds_are_ordered_and_shrink_thresholds_nonnegative():
    bounds = [s for s in _scalars("aten::hardtanh_backward") if len(s) == 2]
    assert len(bounds) >= 30 and all(lo <= hi for lo, hi in bounds), bounds
    assert any(lo < hi for lo, hi in bounds)  # a window, not only equal bounds
    for name in ("aten::hardshrink_backward", "aten::softshrink"):
        lambds = [s[0] for s in _scalars(name) if s]
        assert lambds and all(x >= 0 for x in lambds) and any(x > 0 for x in lambds), (name, lambds)

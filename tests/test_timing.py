"""The timing pass: the timer's logic, the bench command's stored rows, and noise-aware regressions.

Nothing here asserts how fast anything is: timings on a shared machine are noise. Clock-driven
tests use a fake clock whose time advances only when the timed function "runs".
"""

import ctypes
import itertools
import json
import time

import pytest
import torch
from click.testing import CliRunner
from torch.utils._python_dispatch import TorchDispatchMode

from conform.backends import CPUBackend
from conform.errors import ConformError
from conform.results import CellResult
from conform.store import Store, queries
from conform.store.timings import record_timings
from conform.timing import bench
from conform.timing import changes as timing_changes
from conform.timing import inputs as bench_inputs
from conform.timing.timer import TARGET_BLOCKS, measure

ENV = {"fingerprint": "t" * 32, "torch_version": "2.13.0", "backend": "cpu", "device_name": "Test CPU"}


class FakeClock:
    """Time moves by `tick` per read (so reads are distinguishable) and by `cost` per fn() call."""

    def __init__(self, cost: float, tick: float = 1e-9):
        self.now = 0.0
        self.cost = cost
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now

    def fn(self):
        self.now += self.cost


# -- the timer -----------------------------------------------------------------------------


def test_calibrated_blocks_outlast_the_target_and_give_the_true_per_call_time():
    clock = FakeClock(cost=1e-6)
    m = measure(clock.fn, clock=clock, min_run_time=0.01, warmup=0.0)
    # one call is far below the clock-overhead floor: the block must hold many calls
    assert m.number * 1e-6 >= 0.01 / TARGET_BLOCKS
    assert m.median == pytest.approx(1e-6, rel=1e-3)
    assert m.iqr == pytest.approx(0.0, abs=1e-9)
    assert m.blocks >= 5 and m.repeats == m.number * m.blocks


def test_slow_calls_are_timed_one_per_block_and_stop_at_max_run_time():
    clock = FakeClock(cost=2.0)  # two "seconds" a call
    m = measure(clock.fn, clock=clock, min_run_time=0.05, max_run_time=5.0, warmup=0.0)
    assert m.number == 1
    assert m.median == pytest.approx(2.0, rel=1e-6)
    assert m.blocks == 3  # 3 blocks pass max_run_time; never fewer than 3 for a median and IQR


def test_median_of_a_sleeping_function_is_its_duration():
    # real clock: only what load cannot break (a sleep never returns early, load only lengthens
    # it); calibration and the spread have their fake-clock tests
    m = measure(lambda: time.sleep(0.002), min_run_time=0.03, warmup=0.0)
    assert min(m.times) >= 0.0019  # every block slept, none was cut short
    assert 0.0019 <= m.median < 0.5


def test_iqr_is_the_spread_of_the_middle_half_of_the_blocks():
    class CyclingClock(FakeClock):
        """Each call costs the next of `costs`, round and round: any 5 blocks of one call are 1..5 ms."""

        def __init__(self, costs):
            super().__init__(cost=0.0)
            self.costs = itertools.cycle(costs)

        def fn(self):
            self.now += next(self.costs)

    clock = CyclingClock([1e-3, 5e-3, 2e-3, 4e-3, 3e-3])
    m = measure(clock.fn, clock=clock, min_run_time=0.01, warmup=0.0)
    assert m.number == 1 and sorted(m.times) == pytest.approx([1e-3, 2e-3, 3e-3, 4e-3, 5e-3], rel=1e-5)
    assert m.median == pytest.approx(3e-3, rel=1e-5)
    assert m.iqr == pytest.approx(4e-3 - 2e-3, rel=1e-5)  # quartiles of 1..5 ms: 2 ms and 4 ms


def test_device_is_synchronised_before_every_clock_read():
    log = []

    def clock():
        log.append("clock")
        return time.perf_counter()

    m = measure(
        lambda: log.append("fn"), synchronize=lambda: log.append("sync"), clock=clock, min_run_time=0.005, warmup=0.0
    )
    assert m.blocks >= 5
    reads = [i for i, e in enumerate(log) if e == "clock"]
    assert reads
    for i in reads:
        before = [e for e in log[:i] if e != "clock"]
        # the last thing before reading the clock was a synchronise, never an unsynchronised call
        assert not before or before[-1] == "sync", log[max(0, i - 5) : i + 1]
    assert log.count("sync") >= 2 * m.blocks


def test_device_events_give_a_device_event_time():
    recorded = []

    class Event:
        def __init__(self):
            self.at = None

        def record(self):
            self.at = len(recorded)
            recorded.append(self)

        def elapsed_time(self, end):  # milliseconds, as torch.cuda.Event reports
            return 3.0

    m = measure(lambda: None, events=lambda: (Event(), Event()), min_run_time=0.005, warmup=0.0)
    assert m.event_median == pytest.approx(3e-3)  # per call: each pair brackets one call
    assert len(recorded) >= 2 * 3
    assert measure(lambda: None, min_run_time=0.005).event_median is None


class _BrokenEvent:
    def record(self):
        pass

    def elapsed_time(self, end):  # as MPS reports events it cannot time
        raise RuntimeError("Events were not created with timing enabled")


def test_a_failing_event_keeps_the_wall_clock_figure():
    clock = FakeClock(cost=2e-6)
    m = measure(clock.fn, clock=clock, events=lambda: (_BrokenEvent(), _BrokenEvent()), min_run_time=0.005, warmup=0.0)
    assert m.median == pytest.approx(2e-6, rel=1e-3)
    assert m.event_median is None and "not created with timing enabled" in m.event_error


class _BrokenEventsBackend(CPUBackend):
    name = "broken-events"

    def timing_events(self):
        return lambda: (_BrokenEvent(), _BrokenEvent())


def test_a_cell_whose_events_fail_is_stored_with_its_wall_time(stored_run):
    store, run = stored_run
    summary = bench.bench(
        store, run, _BrokenEventsBackend(), ops=["aten::relu"], sizes={"small": 64}, min_run_time=0.002, isolate=False
    )
    assert not summary.skipped
    (row,) = queries.timings_of(store, run)
    assert row["device_median_s"] > 0 and row["device_kernel_s"] is None


# -- sizes, inputs ---------------------------------------------------------------------------


def test_sizes_parse_and_bad_sizes_are_clear_errors():
    assert bench.parse_sizes("large=1e6, small=1e3,medium=100000") == {
        "small": 1000,
        "medium": 100000,
        "large": 1000000,
    }
    for bad in ("small", "small=0", "=5", "x=abc", ""):
        with pytest.raises(ConformError):
            bench.parse_sizes(bad)


def test_scaling_keeps_equal_dimensions_equal():
    from generators import Case, TensorSpec

    case = Case(
        "aten::mm",
        (TensorSpec((3, 4), "float32", layout="transposed", values="special"), TensorSpec((4, 5), "float32")),
    )
    scaled = bench_inputs.scale_case(case, 10_000, "uniform")
    a, b = scaled.tensor_specs()
    assert a.shape[1] == b.shape[0]  # the inner dimension still matches
    assert 10_000 / 3 <= max(a.numel, b.numel) <= 30_000
    assert a.layout == "contiguous" and a.values == "real"


def test_factories_sized_by_numbers_are_scaled_through_them():
    import opdb
    from generators import Case

    op = opdb.lookup("aten::randperm")
    scaled = bench_inputs.scale_scalars(op, Case("aten::randperm", (10,), {"device": {"device": "target"}}), 5_000)
    assert scaled.args == (5_000,)
    sc = bench_inputs.sized_case(op, "float32", 5_000)
    assert sc.numel == 5_000 and sc.shape == (5_000,)


# -- the pass over a stored run --------------------------------------------------------------

CELLS = [("aten::add.Tensor", "pass"), ("aten::relu", "pass"), ("aten::sum", "pass"), ("aten::neg", "mismatch")]
SIZES = {"small": 64, "medium": 512, "large": 4096}


@pytest.fixture()
def stored_run(tmp_path, monkeypatch):
    import opdb

    # these tests check what the pass stores, not how fast anything is: they may run under
    # `pytest -n`, where the pass itself refuses to run (see the test of that refusal below)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    store = Store(tmp_path / "c.db")
    run = store.start_run(ENV, options={}, seed=1, ops_total=4, cells_planned=4)
    store.record_catalog(run, [opdb.lookup(q) for q, _ in CELLS])
    for q, outcome in CELLS:
        store.record_result(run, CellResult(op=q, dtype="float32", outcome=outcome, examples_run=3, examples_passed=3))
    return store, run


def test_bench_stores_every_size_of_each_passing_cell(stored_run):
    store, run = stored_run
    summary = bench.bench(store, run, CPUBackend(), sizes=SIZES, min_run_time=0.002, isolate=False)
    rows = queries.timings_of(store, run)
    got = {(r["op"], r["size_label"]) for r in rows}
    assert got == {(q, label) for q, o in CELLS if o == "pass" for label in SIZES}, summary.skipped
    for r in rows:
        target = SIZES[r["size_label"]]
        assert target / 3 <= r["numel"] <= target * 3
        assert r["numel"] == __import__("math").prod(r["shape"])
        assert r["layout"] == "contiguous" and r["dtype"] == "float32"
        # a timing the machine's load kept from settling is stored as unstable, with no number
        for side in ("device", "ref"):
            assert (r[f"{side}_median_s"] or 0) > 0 or r.get(f"{side}_stable") is False, r
        assert r["repeats"] >= 5
        if r["device_median_s"] and r["ref_median_s"]:
            assert r["speedup"] == pytest.approx(r["ref_median_s"] / r["device_median_s"])
        else:  # a side the load kept from settling: no speedup either
            assert r["speedup"] is None, r
    # timing again replaces, never duplicates
    bench.bench(store, run, CPUBackend(), ops=["aten::relu"], sizes={"small": 64}, min_run_time=0.002, isolate=False)
    assert len(queries.timings_of(store, run)) == len(rows)


def test_bench_command_json(stored_run):
    from conform.cli.main import cli

    store, run = stored_run
    result = CliRunner().invoke(
        cli,
        [
            "bench",
            "--db",
            store.url.removeprefix("sqlite:///"),
            "--run",
            str(run),
            "--ops",
            "aten::relu",
            "--sizes",
            "small=64,large=4096",
            "--min-time",
            "0.002",
            "--format",
            "json",
            "-q",
            "--no-isolate",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["timings"] == 2 and out["cells"] == 1
    assert {r["size_label"] for r in out["rows"]} == {"small", "large"}


class _CrashOnRelu(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.relu.default:
            ctypes.string_at(0)  # a segfault, as a broken kernel would cause
        return func(*args, **(kwargs or {}))


class CrashingBackend(CPUBackend):
    """The CPU, except that relu on the device side kills the process."""

    def device_context(self):
        return _CrashOnRelu()


def test_a_crashing_op_costs_only_its_own_cell(stored_run):
    store, run = stored_run
    # cells run in name order: add.Tensor is timed before relu kills the child process
    summary = bench.bench(
        store, run, CrashingBackend(), ops=["aten::relu", "aten::add.Tensor"], sizes={"small": 64}, min_run_time=0.002
    )
    assert {r["op"] for r in queries.timings_of(store, run)} == {"aten::add.Tensor"}
    assert [(o, reason.split(" (")[0]) for o, _, _, reason in summary.skipped] == [
        ("aten::relu", "crashed the timing process")
    ]


def test_bench_refuses_to_run_in_a_parallel_worker(stored_run, monkeypatch):
    store, run = stored_run
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    with pytest.raises(ConformError, match="parallel worker"):
        bench.bench(store, run, CPUBackend(), sizes=SIZES)


# -- regressions -----------------------------------------------------------------------------


def _row(op, size, median, iqr, shape=(10, 10)):
    return {
        "op": op,
        "dtype": "float32",
        "size_label": size,
        "shape": list(shape),
        "layout": "contiguous",
        "numel": 100,
        "device_median_s": median,
        "device_iqr_s": iqr,
        "device_kernel_s": None,
        "ref_median_s": 1e-3,
        "ref_iqr_s": 1e-5,
        "repeats": 100,
    }


def test_a_regression_must_beat_both_the_percentage_and_the_spread(stored_run):
    store, base = stored_run
    new = store.start_run(ENV, options={}, seed=2, ops_total=4, cells_planned=4)
    record_timings(
        store,
        base,
        [
            _row("aten::add.Tensor", "small", 100e-6, 1e-6),  # +50%, tight: regression
            _row("aten::add.Tensor", "large", 100e-6, 40e-6),  # +50%, but inside the spread: noise
            _row("aten::relu", "small", 100e-6, 0.1e-6),  # +5%, tight: below the percentage
            _row("aten::relu", "large", 100e-6, 1e-6),  # -50%: an improvement
            _row("aten::sum", "small", 100e-6, 1e-6, shape=(5, 20)),  # other shape: not comparable
        ],
    )
    record_timings(
        store,
        new,
        [
            _row("aten::add.Tensor", "small", 150e-6, 1e-6),
            _row("aten::add.Tensor", "large", 150e-6, 20e-6),
            _row("aten::relu", "small", 105e-6, 0.1e-6),
            _row("aten::relu", "large", 50e-6, 1e-6),
            _row("aten::sum", "small", 300e-6, 1e-6, shape=(10, 10)),
        ],
    )
    old, now = queries.timings_of(store, base), queries.timings_of(store, new)
    regressions = timing_changes.slowdowns(old, now, pct=0.10)
    assert [(c.op, c.size_label) for c in regressions] == [("aten::add.Tensor", "small")]
    assert regressions[0].ratio == pytest.approx(1.5)
    changes = timing_changes.timing_changes(old, now, pct=0.10)
    assert {(c.op, c.size_label, c.kind) for c in changes} == {
        ("aten::add.Tensor", "small", "regression"),
        ("aten::relu", "large", "improvement"),
    }
    # a looser percentage lets the +5% through: the percentage threshold is real
    assert ("aten::relu", "small") in {(c.op, c.size_label) for c in timing_changes.slowdowns(old, now, pct=0.01)}


def test_significance_needs_both_thresholds():
    assert timing_changes.is_change(1.0, 0.01, 1.2, 0.01, pct=0.1)
    assert not timing_changes.is_change(1.0, 0.15, 1.2, 0.1, pct=0.1)  # inside the spread
    assert not timing_changes.is_change(1.0, 0.0, 1.05, 0.0, pct=0.1)  # below the percentage
    assert not timing_changes.is_change(0.0, 0.0, 1.0, 0.0)  # no baseline

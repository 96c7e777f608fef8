"""Timings that know when they are wrong: measure_stable's rule, the one change rule
(conform.timing.changes) that the gate and the site share, and where both are stored and shown.

The timer runs on a fake clock here: each call of the timed function advances it by a cost the
test chooses, so a round's blocks, an interference and a drifting clock are exact, not timed."""

import dataclasses
import math
import os
import sqlite3
import threading
import time

import pytest
from sqlalchemy import text

import sitedata
from conform.store import SCHEMA_VERSION, Store
from conform.store.timings import record_timings
from conform.timing import changes, timer
from conform.website import data as site_data
from conform.website.build import build_site


class FakeClock:
    """A clock that moves by 1 ns per read and by `cost(call)` per call of `fn`."""

    def __init__(self, cost):
        self.now, self.calls, self.cost = 0.0, 0, cost

    def __call__(self):
        self.now += 1e-9
        return self.now

    def fn(self):
        self.calls += 1
        self.now += self.cost(self.calls)


def _stable(cost, **kw):
    clock = FakeClock(cost)
    return timer.measure_stable(clock.fn, clock=clock, min_run_time=0.02, warmup=0.0, **kw)


def test_a_steady_function_is_stable_after_two_rounds_with_its_interval():
    m = _stable(lambda n: 1e-4)
    assert m.stable and m.rounds == 2 and not m.why
    assert abs(m.median - 1e-4) < 1e-6 and m.low <= m.median <= m.high


def test_an_interval_is_no_narrower_than_the_rounds_agreement():
    # blocks all alike: the quartiles collapse onto the figure, but two rounds agreeing within
    # AGREE tell the time no closer than that (a quiet anchor a few percent off stays inside)
    for m in (_stable(lambda n: 1e-4), _on_cpu(lambda n: 1e-4, lambda n: 0.0)):
        assert m.stable and m.low <= (1 - timer.AGREE / 2) * m.median * 1.0001
        assert m.high >= (1 + timer.AGREE / 2) * m.median * 0.9999


def test_a_timing_that_never_settles_is_unstable_and_says_why():
    # every other call 30x slower: blocks disagree in every round
    m = _stable(lambda n: 3e-3 if n % 7 < 3 else 1e-4)  # (a busy neighbour, never leaving)
    assert not m.stable and m.rounds == timer.MAX_ROUNDS
    assert m.why.startswith("unstable after") and m.low <= m.high


def test_interference_in_early_rounds_is_measured_again_and_left_out():
    # the machine is busy for the first 30 ms (calls 50x slower, and uneven), then quiet
    clock = FakeClock(lambda n: (5e-3 + (n % 3) * 2e-3) if clock.now < 0.03 else 1e-4)
    m = timer.measure_stable(clock.fn, clock=clock, min_run_time=0.02, warmup=0.0)
    assert m.stable and abs(m.median - 1e-4) < 1e-6 and m.rounds > 2


def test_a_moving_clock_makes_a_round_unclean():
    # a frequency change midway through the blocks: the halves disagree
    times = (1e-4,) * 10 + (1.5e-4,) * 10
    m = timer.Measurement(median=1.25e-4, iqr=0.0, number=1, times=times)
    assert "clock moved" in timer.unclean(m)
    fast = timer.Measurement(median=1e-4, iqr=0.0, number=1, times=(1e-4,) * 9 + (5e-5,))
    assert "faster than the median" in timer.unclean(fast)
    descheduled = timer.Measurement(median=1e-4, iqr=0.0, number=1, times=(1e-4,) * 10, scheduled=0.5)
    assert timer.unclean(descheduled) == "" and "ran 50%" in timer.unclean(descheduled, on_cpu=True)


class PreemptedClock(FakeClock):
    """A FakeClock whose process the scheduler preempts: `preempt(call)` seconds are added to a
    call, during which another process had the core (one involuntary context switch), and
    `late(call)` seconds during which the call waited for a worker thread that was woken but
    found no free core (no switch of the process: a wait for a core, what RunDelay reads)."""

    def __init__(self, cost, preempt, late=lambda n: 0.0):
        super().__init__(cost)
        self.preempt, self.late, self.switched, self.waited = preempt, late, 0, 0.0

    def fn(self):
        super().fn()
        lost = self.preempt(self.calls)
        if lost:
            self.now += lost
            self.switched += 1
            self.waited += lost
        waited = self.late(self.calls)
        self.now += waited
        self.waited += waited

    def switches(self):
        return self.switched

    def waits(self):
        return self.waited


def _on_cpu(cost, preempt, late=None):
    clock = PreemptedClock(cost, preempt, late or (lambda n: 0.0))
    counters = {"switches": clock.switches} if late is None else {"waits": clock.waits}
    return timer.measure_stable(clock.fn, clock=clock, on_cpu=True, min_run_time=0.02, warmup=0.0, **counters)


def _kernel(n):  # a kernel of 100-102 us
    return 1e-4 * (1 + 0.01 * (n % 3))


def test_preempted_calls_are_left_out_and_the_kernel_time_recovered():
    # three calls in five lose a 1 ms time slice to a busy neighbour: most blocks are 11x slower,
    # and so is their median
    m = _on_cpu(_kernel, lambda n: 1e-3 if n % 5 < 3 else 0.0)
    assert m.stable and abs(m.median / 1.01e-4 - 1) < 0.02, m
    assert m.low <= 1.01e-4 <= m.high and m.high < 1.1e-4
    assert m.unpreempted >= 2 * timer.UNPREEMPTED_MIN


def test_calls_that_waited_for_a_late_worker_are_left_out():
    # three calls in five wait 1 ms for an intra-op worker that found no free core: no context
    # switch of the process, but its threads waited for a core; a 1 us wake-up in every call is
    # the quiet machine's own (within WAIT_SHARE) and keeps its block
    m = _on_cpu(_kernel, lambda n: 0.0, late=lambda n: 1e-3 if n % 5 < 3 else 1e-6)
    assert m.stable and abs(m.median / 1.02e-4 - 1) < 0.02, m
    assert m.low <= 1.02e-4 <= m.high and m.high < 1.1e-4


def test_unpreempted_blocks_mostly_slowed_by_what_no_counter_sees_are_unstable():
    # four calls in five run 3x slower with no wait and no switch (a neighbour's memory traffic, a
    # worker woken on a loaded core): the lower quartile of the unpreempted blocks is the slowed
    # time, while the fast block shows the kernel's; a stable figure would be 3x off
    m = _on_cpu(lambda n: _kernel(n) * (1 if n % 5 == 0 else 3), lambda n: 0.0, late=lambda n: 0.0)
    assert not m.stable and "faster than the figure" in m.why, m


@pytest.mark.skipif(timer.RunDelay.available() is None, reason="no scheduler statistics (Linux schedstat)")
def test_a_thread_that_ends_mid_measurement_costs_one_block():
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    delay = timer.RunDelay()  # reads the worker too
    before = delay()
    done.set()
    worker.join()
    # join returns when the thread has cleared its id, a moment before the kernel releases it
    # (until then its schedstat still reads): wait for that, as a measurement's block lasts
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/self/task/{worker.native_id}") and time.monotonic() < deadline:
        time.sleep(0.001)
    assert math.isfinite(before) and delay() == math.inf  # the block around this read is not trusted
    assert math.isfinite(delay())  # the threads left are read anew


def test_a_quiet_distribution_keeps_its_median():
    # nothing preempted, blocks within 6% of each other as on a quiet machine: the figure (the
    # lower quartile) is within a few percent of the median of all blocks, what rule (a) alone
    # gives, and its interval holds that median
    def spread(n):
        return 1e-4 * (1 + 0.01 * (n % 7))

    counted = _on_cpu(spread, lambda n: 0.0)
    plain = _stable(spread)
    assert counted.stable and plain.stable
    assert abs(counted.median / plain.median - 1) < 0.03 and counted.low <= plain.median <= counted.high


def test_slowdowns_no_counter_sees_are_left_out_by_the_lower_quartile():
    # a neighbour on the other core slows 11 calls in 20 by 30% (shared caches and memory: no
    # wait for a core, no switch): the median of the blocks is the slowed time, the lower
    # quartile the quiet one, and the interval holds it
    m = _on_cpu(lambda n: 1.3e-4 if n % 20 < 11 else 1e-4, lambda n: 0.0)
    assert m.stable and abs(m.median / 1e-4 - 1) < 0.02, m
    assert m.low <= 1.001e-4 <= m.high  # (the fake clock adds 1 ns per read)


def test_a_kernel_preempted_in_every_call_is_unstable():
    m = _on_cpu(_kernel, lambda n: 4e-3)
    assert not m.stable and m.rounds == timer.MAX_ROUNDS and "preempted in" in m.why
    assert m.low <= m.high


def test_a_pause_after_a_preempted_round_lets_the_kernel_out_of_step_with_its_neighbours(monkeypatch):
    # every call waits 8 ms for the worker's next time slice (the threads fell into step with the
    # other processes' slices) until the process sleeps; a quiet round is never followed by a pause
    slept = []
    monkeypatch.setattr(timer.time, "sleep", slept.append)
    m = _on_cpu(_kernel, lambda n: 0.0, late=lambda n: 0.0 if slept else 8e-3)
    assert m.stable and slept == [timer.PAUSE] and abs(m.median / 1.01e-4 - 1) < 0.02, m
    assert m.rounds == 3


def test_a_round_with_too_few_unpreempted_blocks_is_not_figured():
    times = (1e-4,) * 9 + (5e-3,) * 91
    m = timer.Measurement(median=5e-3, iqr=0.0, number=1, times=times, switches=(0,) * 9 + (1,) * 91)
    assert timer.unpreempted(m).why == "preempted in 91 of 100 blocks"
    kept = timer.unpreempted(dataclasses.replace(m, switches=(0,) * 10 + (1,) * 90))
    assert not kept.why and kept.unpreempted == 10


def test_a_change_needs_both_the_share_and_intervals_apart():
    assert changes.is_change(1e-3, 1e-5, 1.5e-3, 1e-5)
    assert not changes.is_change(1e-3, 1e-5, 1.05e-3, 1e-5)  # within 10%
    assert not changes.is_change(1e-3, 4e-4, 1.5e-3, 2e-4)  # 50% slower, inside the spreads
    # the measured interval widens median +- IQR: overlapping intervals are noise
    assert not changes.is_change(1e-3, 1e-5, 1.5e-3, 1e-5, new_range=(0.9e-3, 1.6e-3))
    assert not changes.is_change(None, None, 1.5e-3, 1e-5)  # an unstable timing never changes


def test_speedups_within_the_noise_are_none():
    row = {"device_median_s": 1e-4, "device_iqr_s": 1e-6, "ref_median_s": 1.05e-4, "ref_iqr_s": 1e-6}
    assert not changes.speedup_is_real(row)
    assert changes.speedup_is_real({**row, "ref_median_s": 3e-4})
    assert not changes.speedup_is_real({**row, "ref_median_s": 3e-4, "device_low_s": 5e-5, "device_high_s": 4e-4})


def test_the_gate_ignores_unstable_timings_and_noise():
    base = {"op": "aten::mm", "dtype": "float32", "size_label": "small", "shape": [4]}
    old = [{**base, "device_median_s": 1e-4, "device_iqr_s": 1e-6}]
    assert [c.kind for c in changes.slowdowns(old, [{**base, "device_median_s": 3e-4, "device_iqr_s": 1e-6}])] == [
        "regression"
    ]
    unstable = {**base, "device_median_s": None, "device_iqr_s": None, "device_stable": False}
    assert not changes.slowdowns(old, [unstable])
    noisy = {**base, "device_median_s": 3e-4, "device_iqr_s": 1e-6, "device_low_s": 5e-5, "device_high_s": 4e-4}
    assert not changes.slowdowns(old, [noisy])


def test_a_schema_3_database_gains_timing_intervals(tmp_path):
    path = tmp_path / "c.db"
    Store(path).close()
    with sqlite3.connect(path) as c:  # as conform before schema 5 wrote it (the model tables stay)
        for name in ("device_low_s", "device_high_s", "device_stable", "ref_low_s", "ref_high_s", "ref_stable"):
            c.execute(f"ALTER TABLE timings DROP COLUMN {name}")
        c.execute("DELETE FROM conform_schema WHERE version > 3")
        c.execute(
            "INSERT OR IGNORE INTO conform_schema (version, description, applied_at) VALUES (3, 'v3', '2026-01-01')"
        )
    store = Store(path)
    assert store.schema_version() == SCHEMA_VERSION == 6
    run = sitedata.add_run(store, sitedata.env("2.13.0"), sitedata.OPS_213, {("aten::mm", "float32"): "pass"})
    row = {"op": "aten::mm", "dtype": "float32", "size_label": "small", "shape": [4], "layout": "contiguous"}
    row |= {"numel": 4, "device_median_s": None, "device_iqr_s": None, "device_stable": False, "repeats": 10}
    record_timings(store, run, [row | {"device_low_s": 1e-5, "device_high_s": 9e-5}])
    with store.engine.connect() as c:
        median, stable, low = c.execute(text("SELECT device_median_s, device_stable, device_low_s FROM timings")).one()
    assert median is None and not stable and low == 1e-5


def _site(tmp_path, backend: str, timings: dict):
    store = Store(tmp_path / "c.db")
    outcomes = {(q, d): "pass" for q, d, _ in timings}
    sitedata.add_run(store, sitedata.env("2.13.0", backend=backend), sitedata.OPS_213, outcomes, timings=timings)
    store.close()
    store = Store(tmp_path / "c.db", readonly=True)
    build_site(store, tmp_path / "out")
    store.close()
    return (tmp_path / "out/perf.html").read_text()


def test_a_cpu_run_says_its_device_is_the_cpu_instead_of_drawing_speedups(tmp_path):
    page = _site(tmp_path, "cpu", {("aten::mm", "float32", "small"): (1e-4, 2e-4)})
    assert "The device under test is the CPU itself" in page and "<svg" not in page


def test_a_device_run_shows_speedups_beyond_the_noise_only(tmp_path):
    timings = {("aten::mm", "float32", "small"): (1e-4, 1.05e-4), ("aten::relu", "float32", "small"): (1e-4, 4e-4)}
    page = _site(tmp_path, "mps", timings)
    assert "<svg" in page and "within noise" in page and "4×" in page
    assert "0 slower and 1 faster than the CPU beyond the noise" in page


def test_site_speedups_follow_the_rule():
    assert site_data.TIMING_PCT == changes.PCT

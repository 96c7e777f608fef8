"""A kernel timer: `measure(fn)` -> median and interquartile range of one call's time.

Why each step is there:

* The device is synchronised before every clock read. Accelerators run asynchronously: without
  a synchronise, the clock measures how fast the host *queues* kernels, not how fast they run.
* The first call is never timed (lazy initialisation, allocator growth, kernel compilation), and
  a short warm-up lets caches and clock frequencies settle.
* Calls are timed in blocks of `number` calls, with `number` calibrated so that one block lasts
  far longer than both the clock's effective resolution and the cost of one synchronise + clock
  read: their error, spread over the block, becomes negligible.
* Several blocks are taken; the median per-call time resists outliers (a scheduler hiccup on a
  shared machine hits one block, not the median) and the interquartile range says how noisy the
  measurement was, which is what the regression check (`conform.timing.changes`) weighs changes against.
* Where the device has timing events (CUDA, MPS, XPU), event pairs around single calls give a
  second figure, the *device-event time*. It is not a kernel time, and it is named for what it
  is: torch/cuda/streams.py `Event.elapsed_time` is the time between two events recorded on the
  stream, so at small sizes, where the host launches slower than the GPU runs, it measures the
  spacing of launches; torch/mps/event.py records into MPS's command stream, so the figure
  includes encoding and committing the command buffer. The wall-clock figure (blocks, device
  synchronised) is the primary one; an event failure costs only the event figure.

The same timer times the device and the CPU reference, so their ratio is like against like.

On a busy machine (a browser open on a Mac, other jobs on a shared runner) one measurement can be
wrong by orders of magnitude while looking tidy: every block slowed alike. `measure_stable` takes
the measurement in rounds and trusts it only when it knows it is right (rule in
docs/timing.md):

(a) a round is clean when its blocks agree (IQR within SPREAD of the median), no block ran far
    faster than the median (a minimum more than FAST_BLOCK below it: the median was slowed),
    the clock held still (the two halves' medians within SPREAD: no frequency change midway),
    and, for work on the CPU where context switches are not counted, this thread ran for at
    least SCHEDULED of the wall time (where they are counted, "On the CPU" below replaces (a));
(b) the timing is two clean rounds whose medians agree within AGREE, the fastest such pair:
    interference only ever adds time;
(c) otherwise, after MAX_ROUNDS rounds, the timing is *unstable*: stored as such with the range
    it was seen in, never as a number.

Its interval (`low`, `high`: the outer quartiles of the two rounds, and at least AGREE / 2 either
side of the figure, since rounds that agree within AGREE tell it no closer) is the uncertainty
stored with the timing; two timings differ only where their intervals do (conform.timing.changes).

On the CPU (`on_cpu`, where the OS tells how long our threads waited for a core, or counts their
context switches) the kernel shares the cores with whatever else runs: the scheduler time-slices
our threads with other processes, and a block in which one of them waited for a core measures the
neighbour's time slice, not the kernel. Under load every long block is hit alike (rule (a) then
never passes), but a short one often runs whole. So CPU rounds are taken in blocks of about
SHORT_BLOCK, and around each block the process's threads (torch's intra-op threads included) are
read: their run delay (`RunDelay`, Linux schedstat), or where there is none their involuntary
context switches. A block is unpreempted when they waited at most WAIT_SHARE of it (or saw no
switch). The run delay sees what switch counts miss: an intra-op worker woken for a parallel
region that finds no free core is not switched out, yet the calling thread waits for it. A
round's figure is the lower quartile of the unpreempted blocks: what no counter sees (a neighbour
on the other core sharing caches and memory bandwidth) only ever adds time too, so the low side of
the blocks is the quiet time, while on a quiet machine, where every block is unpreempted, the lower
quartile is within a few percent of the median. The interval of a timing figured so runs from the
fastest unpreempted block to the higher upper quartile of its two rounds. A round with fewer than
UNPREEMPTED_MIN such blocks, or fewer than UNPREEMPTED_SHARE of its blocks (the few that escaped
would be the short ones: a biased figure), or whose fastest unpreempted block ran more than
FAST_BLOCK below its figure (rule (a)'s check: something no counter sees slowed most blocks), is
not clean: it says why, and rule (b) and (c) go on as above. A parallel kernel whose threads waited for a
core in every call thus ends unstable: nothing tells its own time.

After a round that is not clean, the next one starts after a pause of PAUSE. Under load the
calling thread and torch's intra-op worker can fall into step with the other processes' time
slices: every call then waits for the worker's next slice (a 110 us kernel timed at 8 ms per call,
every block preempted, round after round, until the timing ends unstable). Sleeping lets the
scheduler place the threads anew when they wake (Linux's EEVDF keeps a thread's lag, the service it
is owed or owes, across a short sleep, which a long enough one lets lapse). Measured with both
cores of a 2-core machine kept busy by other processes (36 ops, three passes each): without a pause
5 and 8 of 108 timings ended unstable; with pauses of 2, 5 and 10 ms, 5, 7 and 3; with 20 and
50 ms, 0 of 144 (four passes). A quiet machine, whose rounds are clean, never pauses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

try:
    import resource
except ImportError:  # no getrusage (Windows): CPU rounds are judged by rule (a) alone
    resource = None

# a timed block lasts at least this many times the clock's effective resolution ...
RESOLUTION_FACTOR = 1000
# ... and at least this many times the cost of one synchronise + clock read
OVERHEAD_FACTOR = 100
# blocks aimed for within min_run_time (each block lasts about min_run_time / TARGET_BLOCKS)
TARGET_BLOCKS = 20
# single calls timed with device events, for the device-event time
EVENT_SAMPLES = 50
# measure_stable's rule (see the module doc)
SPREAD = 0.10
FAST_BLOCK = 0.25
SCHEDULED = 0.85
AGREE = 0.10
MAX_ROUNDS = 6
# CPU work (see the module doc, "On the CPU"): blocks this short (or the clock's floor, if longer),
# so that most of them run without the scheduler taking a core away ...
SHORT_BLOCK = 50e-6
# ... and a round's figure needs at least this many unpreempted blocks, at least this share of all
UNPREEMPTED_MIN = 8
UNPREEMPTED_SHARE = 0.10
# a block is unpreempted when the process's threads waited for a core at most this share of it
WAIT_SHARE = 0.02
# seconds of sleep before the round that follows one that was not clean (see the module doc)
PAUSE = 0.02


@dataclass(frozen=True)
class Measurement:
    """Per-call times of one function, in seconds."""

    median: float
    iqr: float  # interquartile range (q3 - q1) of the per-call time of each block
    number: int  # calls per timed block
    # per-call time of each block (measure_stable on the CPU: each unpreempted one, and `median` is
    # then their lower quartile, see the module doc)
    times: tuple[float, ...]
    event_median: float | None = None  # device-event time per call (see the module doc), if it has events
    event_iqr: float | None = None
    event_error: str = ""  # why the events gave no figure, when they failed
    wall_s: float = 0.0  # everything measure() spent: warm-up, calibration and the blocks
    scheduled: float = 1.0  # this thread's CPU time over the blocks' wall time
    stable: bool = True  # measure_stable: the rule found it trustworthy (measure alone: not checked)
    low: float | None = None  # the interval the per-call time lies in (measure_stable)
    high: float | None = None
    rounds: int = 1
    why: str = ""  # why a round was not clean, or why the timing is unstable
    # involuntary context switches of this process (any of its threads) during each block, where
    # counted: a block with none ran without the scheduler taking a core from the kernel
    switches: tuple[int, ...] = ()
    # seconds per call that this process's threads waited, runnable, for a core during each block,
    # where the OS tells (see RunDelay): a block with (almost) none ran without waiting on anyone
    waited: tuple[float, ...] = ()
    unpreempted: int | None = None  # blocks the figure comes from, where it comes from unpreempted ones

    @property
    def blocks(self) -> int:
        return len(self.times)

    @property
    def repeats(self) -> int:
        """Calls that were timed (calibration and warm-up calls not included)."""
        return self.number * len(self.times)

    def __str__(self) -> str:
        return f"{_fmt(self.median)} per call (IQR {_fmt(self.iqr)}, {self.blocks} blocks x {self.number})"


def _fmt(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def involuntary_switches() -> int:
    """Involuntary context switches of this process so far, all its threads (torch's intra-op
    threads included): the scheduler took a core away from one of them."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw


class RunDelay:
    """Seconds the threads of this process have spent runnable but waiting for a core, summed over
    the threads (Linux schedstat: /proc/self/task/<tid>/schedstat, second field, in ns).

    Unlike involuntary context switches it also sees a torch intra-op worker that was woken for a
    parallel region and waited for a core (a wake-up is no switch of ours, yet the calling thread
    waits for that worker). The threads are those alive when it is made (make it after a first
    call, so that torch's thread pool exists) or at the last read that found one of them gone:
    that read is an infinite wait (the block around it is not trusted), the next ones count anew."""

    def __init__(self):
        self._fds: list[int] = []
        self._open()

    def _open(self) -> None:
        self._close()
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                self._fds.append(os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY))

    def _close(self) -> None:
        while self._fds:
            os.close(self._fds.pop())

    @classmethod
    def available(cls) -> RunDelay | None:
        """A reader, or None where the kernel does not keep scheduler statistics."""
        try:
            reader = cls()
            reader()
        except (OSError, IndexError, ValueError):
            return None
        return reader

    def __call__(self) -> float:
        try:
            return sum(int(os.pread(fd, 64, 0).split()[1]) for fd in self._fds) * 1e-9
        except (OSError, IndexError, ValueError):
            self._open()
            return math.inf

    def __del__(self):
        if hasattr(self, "_fds"):
            self._close()


_resolution_cache: dict[Callable, float] = {}


def clock_resolution(clock: Callable[[], float] = time.perf_counter) -> float:
    """The clock's effective resolution: the smallest positive step between two successive
    reads. It includes the cost of a read, which `time.get_clock_info` does not (that reports
    1 ns for perf_counter on Linux, while two reads are some 50 ns apart)."""
    if clock in _resolution_cache:
        return _resolution_cache[clock]
    best = math.inf
    for _ in range(200):
        a = clock()
        b = clock()
        while b == a:
            b = clock()
        best = min(best, b - a)
    _resolution_cache[clock] = best
    return best


def _noop() -> None:
    pass


def device_events(device: torch.device | str) -> Callable[[], tuple] | None:
    """A factory of (start, end) timing-event pairs for `device`'s type, or None where the device
    has no timing events (the CPU, meta, most out-of-tree devices)."""
    kind = torch.device(device).type
    module = {
        "cuda": getattr(torch, "cuda", None),
        "mps": getattr(torch, "mps", None),
        "xpu": getattr(torch, "xpu", None),
    }.get(kind)
    event = getattr(module, "Event", None) if module is not None else None
    if event is None:
        return None
    return lambda: (event(enable_timing=True), event(enable_timing=True))


def measure(
    fn: Callable[[], object],
    *,
    synchronize: Callable[[], None] | None = None,
    events: Callable[[], tuple] | None = None,
    min_run_time: float = 0.05,
    max_run_time: float | None = None,
    warmup: float = 0.005,
    min_blocks: int = 5,
    clock: Callable[[], float] = time.perf_counter,
    switches: Callable[[], int] | None = None,
    waits: Callable[[], float] | None = None,
    block_time: float | None = None,
    min_unpreempted: int = 0,
) -> Measurement:
    """Time `fn()`: median and IQR of its per-call time over blocks of calibrated length.

    `synchronize` waits for the device to finish queued work; it is called before every clock
    read. `events` (see `device_events`) adds the device-event time; should they fail, the
    wall-clock figure stands and `event_error` says why.
    Blocks are taken until `min_run_time` seconds of blocks and `min_blocks` blocks are done, or,
    for very slow calls, `max_run_time` (default 20 x min_run_time, at least 1 s) and 3 blocks.
    `switches` (see `involuntary_switches`) and `waits` (see `RunDelay`) are read around each
    block, and blocks go on until `min_unpreempted` of them saw no switch and waited at most
    WAIT_SHARE of their time (or `max_run_time`); `block_time` replaces the
    min_run_time / TARGET_BLOCKS floor of a block's length (the clock's floors stay).
    """
    if min_run_time <= 0:
        raise ValueError("min_run_time must be positive")
    if min_blocks < 1:
        raise ValueError("min_blocks must be at least 1")
    sync = synchronize or _noop
    max_run_time = max(20 * min_run_time, 1.0) if max_run_time is None else max_run_time
    wall_start = time.perf_counter()

    def block(number: int) -> float:
        sync()
        t0 = clock()
        for _ in itertools.repeat(None, number):
            fn()
        sync()
        return clock() - t0

    # first call: lazy initialisation, allocations; never timed
    fn()
    sync()

    # the cost of one synchronise + clock read, which each block pays once
    overheads = []
    for _ in range(5):
        sync()
        a = clock()
        sync()
        overheads.append(clock() - a)
    overhead = statistics.median(overheads)
    floor = min_run_time / TARGET_BLOCKS if block_time is None else block_time
    target = max(RESOLUTION_FACTOR * clock_resolution(clock), OVERHEAD_FACTOR * overhead, floor)

    # warm-up, then calibrate: grow the block until it lasts `target`
    end_warmup = time.perf_counter() + warmup
    while time.perf_counter() < end_warmup:
        fn()
    sync()
    number = 1
    while True:
        elapsed = block(number)
        if elapsed >= target and switches is not None:
            elapsed = min(elapsed, block(number))  # where preemption is looked for, a second block confirms
        if elapsed >= target:
            break
        per_call = elapsed / number
        want = math.ceil(1.2 * target / per_call) if per_call > 0 else number * 100
        number = min(number * 100, max(number * 2, want))

    times: list[float] = []
    switched: list[int] = []
    waited: list[float] = []
    unswitched = 0
    total = 0.0
    thread0, wall0 = time.thread_time(), time.perf_counter()
    while True:
        before = switches() if switches is not None else 0
        waited0 = waits() if waits is not None else 0.0
        elapsed = block(number)
        if switches is not None:
            switched.append(switches() - before)
        if waits is not None:
            waited.append((waits() - waited0) / number)
        if switches is not None or waits is not None:
            unswitched += _quiet(elapsed / number, switched[-1] if switched else 0, waited[-1] if waited else 0.0)
        times.append(elapsed / number)
        total += elapsed
        if total >= min_run_time and len(times) >= min_blocks and unswitched >= min_unpreempted:
            break
        if total >= max_run_time and len(times) >= min(3, min_blocks):
            break
    blocks_wall = time.perf_counter() - wall0
    scheduled = (time.thread_time() - thread0) / blocks_wall if blocks_wall > 0 else 1.0

    # Device-event time: an event pair around each single call, recorded on the device's stream.
    # Unlike the blocks above it leaves out host time in which the stream is idle.
    events_s, event_error = (
        _event_times(fn, sync, events, max(3, min(EVENT_SAMPLES, len(times) * number)))
        if events is not None
        else ([], "")
    )

    median, iqr = _median_iqr(times)
    emedian, eiqr = _median_iqr(events_s) if events_s else (None, None)
    return Measurement(
        median=median,
        iqr=iqr,
        number=number,
        times=tuple(times),
        event_median=emedian,
        event_iqr=eiqr,
        event_error=event_error,
        wall_s=time.perf_counter() - wall_start,
        scheduled=scheduled,
        switches=tuple(switched),
        waited=tuple(waited),
    )


def _quiet(per_call: float, switched: int, waited: float) -> bool:
    """A block ran unpreempted: no involuntary switch, and its threads waited for a core at most
    WAIT_SHARE of its time."""
    return switched == 0 and waited <= WAIT_SHARE * per_call


def unclean(m: Measurement, *, on_cpu: bool = False) -> str:
    """Why one round is not clean (rule (a) of the module doc), or "" when it is."""
    if m.median <= 0:
        return "no time measured"
    if m.iqr > SPREAD * m.median:
        return f"blocks spread {m.iqr / m.median:.0%} of the median"
    if min(m.times) < (1 - FAST_BLOCK) * m.median:
        return f"a block ran {1 - min(m.times) / m.median:.0%} faster than the median"
    half = len(m.times) // 2
    if half >= 2:
        first, second = statistics.median(m.times[:half]), statistics.median(m.times[half:])
        if abs(second - first) > SPREAD * min(first, second):
            return f"the clock moved: halves {abs(second / first - 1):.0%} apart"
    if on_cpu and m.scheduled < SCHEDULED:
        return f"this thread ran {m.scheduled:.0%} of the time"
    return ""


def unpreempted(m: Measurement) -> Measurement:
    """A round's figure from its unpreempted blocks alone (the module doc, "On the CPU"): `m`
    with only those blocks, or `m` with `why` set when too few of its blocks ran unpreempted."""
    switched = m.switches or (0,) * len(m.times)
    waited = m.waited or (0.0,) * len(m.times)
    kept = [t for t, n, w in zip(m.times, switched, waited) if _quiet(t, n, w)]
    if len(kept) < max(UNPREEMPTED_MIN, UNPREEMPTED_SHARE * len(m.times)):
        return dataclasses.replace(m, why=f"preempted in {len(m.times) - len(kept)} of {len(m.times)} blocks")
    figure, iqr = _lower_quartile_iqr(kept)
    m = dataclasses.replace(m, median=figure, iqr=iqr, times=tuple(kept), unpreempted=len(kept))
    if min(kept) < (1 - FAST_BLOCK) * figure:
        # rule (a)'s fastest block, among the unpreempted ones: what slowed the rest no counter saw
        return dataclasses.replace(
            m, why=f"an unpreempted block ran {1 - min(kept) / figure:.0%} faster than the figure"
        )
    return m


def measure_stable(
    fn: Callable[[], object],
    *,
    on_cpu: bool = False,
    max_rounds: int = MAX_ROUNDS,
    min_run_time: float = 0.05,
    switches: Callable[[], int] | None = None,
    waits: Callable[[], float] | None = None,
    **kw,
) -> Measurement:
    """`measure` in rounds of `min_run_time / 2`, until two clean rounds agree (the module doc's
    rule); `stable` False when none do within `max_rounds`. `on_cpu`: the work runs on this
    process's CPU, so its rounds are taken in short blocks and figured from the unpreempted ones
    (`waits` reads how long the process's threads waited for a core, `switches` counts their
    involuntary context switches; given neither, a `RunDelay` where the OS keeps one, else
    `involuntary_switches`)."""
    if on_cpu and switches is None and waits is None:
        fn()  # torch's intra-op threads exist after a first call: RunDelay reads the threads it finds
        (kw.get("synchronize") or _noop)()
        waits = RunDelay.available()
        if waits is None and resource is not None:
            switches = involuntary_switches
    counted = on_cpu and (switches is not None or waits is not None)
    if counted:
        kw = {"block_time": SHORT_BLOCK, "min_unpreempted": UNPREEMPTED_MIN, "max_run_time": 2 * min_run_time} | kw
        kw["switches"], kw["waits"] = switches, waits
    rounds: list[Measurement] = []
    whys: list[str] = []
    for _ in range(max_rounds):
        if whys and whys[-1]:
            time.sleep(PAUSE)  # the module doc, "After a round that is not clean"
        m = measure(fn, min_run_time=min_run_time / 2, **kw)
        if counted:
            m = unpreempted(m)
        rounds.append(m)
        whys.append(m.why if counted else unclean(m, on_cpu=on_cpu))
        clean = sorted((r for r, w in zip(rounds, whys) if not w), key=lambda r: r.median)
        for a, b in zip(clean, clean[1:]):
            if b.median - a.median <= AGREE * a.median:
                return _combined((a, b), rounds, stable=True, why="")
    why = next((w for w in whys if w), f"no two rounds agreed within {AGREE:.0%}")
    return _combined(tuple(rounds), rounds, stable=False, why=f"unstable after {len(rounds)} rounds: {why}")


def _combined(chosen: tuple[Measurement, ...], rounds: list[Measurement], *, stable: bool, why: str) -> Measurement:
    times = [t for m in chosen for t in m.times]
    counted = all(m.unpreempted for m in chosen)
    median, iqr = _lower_quartile_iqr(times) if counted else _median_iqr(times)
    if stable and counted:
        # the quiet time lies between the fastest unpreempted block and the upper quartiles
        low = min(times)
        high = max(_median_iqr_bounds(m)[1] for m in chosen)
    elif stable:
        low = min(_median_iqr_bounds(m)[0] for m in chosen)
        high = max(_median_iqr_bounds(m)[1] for m in chosen)
    else:
        low, high = min(m.median for m in rounds), max(m.median for m in rounds)
    if stable:  # two rounds that agree within AGREE tell the time no closer than that
        low, high = min(low, (1 - AGREE / 2) * median), max(high, (1 + AGREE / 2) * median)
    first = chosen[0]
    return Measurement(
        median=median,
        iqr=iqr,
        number=first.number,
        times=tuple(times),
        event_median=first.event_median,
        event_iqr=first.event_iqr,
        event_error=first.event_error,
        wall_s=sum(m.wall_s for m in rounds),
        scheduled=min(m.scheduled for m in chosen),
        stable=stable,
        low=low,
        high=high,
        rounds=len(rounds),
        why=why,
        unpreempted=sum(m.unpreempted for m in chosen) if counted else None,
    )


def _median_iqr_bounds(m: Measurement) -> tuple[float, float]:
    if len(m.times) < 2:
        return m.median, m.median
    q1, _, q3 = statistics.quantiles(m.times, n=4, method="inclusive")
    return q1, q3


def _event_times(fn, sync, events, samples: int) -> tuple[list[float], str]:
    """Per-call device-event times in seconds, or ([], why) when the events fail (an event
    backend without timing support, a device error): the wall-clock figure is kept either way."""
    try:
        pairs = [events() for _ in range(samples)]
        sync()
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        sync()
        return [start.elapsed_time(end) / 1e3 for start, end in pairs], ""  # ms -> s
    except Exception as e:  # noqa: BLE001
        text = str(e).strip()
        return [], f"{type(e).__name__}: {text.splitlines()[0][:200] if text else ''}"


def _lower_quartile_iqr(values: list[float]) -> tuple[float, float]:
    """The lower quartile and the interquartile range: the figure of unpreempted blocks."""
    if len(values) < 2:
        return values[0], 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3 - q1


def _median_iqr(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], 0.0
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q2, q3 - q1

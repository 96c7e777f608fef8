"""The timing pass (`conform bench`): how fast each passing op runs on the device and on the CPU
reference, at a few sizes.

It times the cells that *passed* in a stored run, after the parallel sweep and serially (timings
taken while other workers load the machine are noise): one cell at a time in one child process,
which is replaced if an op crashes it; this process alone writes the store. For each (op, dtype)
it builds inputs at every requested size (conform.timing.inputs: by element count of the largest
input tensor), times the op on the device and on the CPU with `conform.timing.timer.measure`, and stores
one `Timing` row per size against the run; speedup = reference time / device time. Which timings
changed between two runs is conform.timing.changes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

import opdb
from conform.errors import ConformError, first_line
from conform.run.execute import is_plain_cpu
from conform.run.isolation import ChildDied, ChildTimedOut, CleanChild, IsolationError
from conform.store import queries
from conform.store.timings import record_timings
from conform.timing.inputs import NotTimeable, SeedPool, bound_call, sized_case
from conform.timing.timer import Measurement, device_events, measure_stable

DEFAULT_SIZES: dict[str, int] = {"small": 1_000, "medium": 100_000, "large": 1_000_000}
DEFAULT_MIN_RUN_TIME = 0.05  # seconds of timed blocks per side and size


def parse_sizes(expr: str) -> dict[str, int]:
    """ "small=1e3,medium=1e5,large=1e6" -> {"small": 1000, ...} (labels at most 16 characters)."""
    sizes: dict[str, int] = {}
    for part in expr.split(","):
        part = part.strip()
        if not part:
            continue
        label, sep, value = part.partition("=")
        label = label.strip()
        try:
            n = int(float(value))
        except ValueError:
            n = 0
        if not sep or not label or len(label) > 16 or n < 1:
            raise ConformError(
                f"--sizes takes LABEL=ELEMENTS pairs such as small=1e3,medium=1e5,large=1e6, not {part!r}"
            )
        sizes[label] = n
    if not sizes:
        raise ConformError("--sizes is empty")
    return dict(sorted(sizes.items(), key=lambda kv: kv[1]))


# -- timing one cell -----------------------------------------------------------------------


@dataclass
class CellTiming:
    """The timings of one (op, dtype) at each size, and why sizes were skipped."""

    op: str
    dtype: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (size label, reason)


def _events_for(backend):
    hook = getattr(backend, "timing_events", None)  # an out-of-tree backend may provide its own
    if callable(hook):
        return hook()
    return device_events(backend.device)


@contextlib.contextmanager
def _device_context(backend):
    with contextlib.ExitStack() as stack:
        device = torch.device(backend.device)
        if device.type == "cuda" and device.index is not None:
            # timing events record on the current device's stream: make it the device under test
            stack.enter_context(torch.cuda.device(device))
        # the optional hook conform.run.execute honours too: device-specific modes around device work
        hook = getattr(backend, "device_context", None)
        if callable(hook):
            stack.enter_context(hook())
        yield


def time_cell(
    op, dtype: str, backend, sizes: dict[str, int] | None = None, *, min_run_time: float = DEFAULT_MIN_RUN_TIME
) -> CellTiming:
    """Time one op x dtype at each size on `backend` and on the CPU reference."""
    sizes = DEFAULT_SIZES if sizes is None else sizes
    result = CellTiming(op.qualname, dtype)
    try:
        pool = SeedPool(op, dtype)
    except NotTimeable as e:
        result.skipped = [(label, str(e)) for label in sizes]
        return result
    events = _events_for(backend)
    prefer = None
    for label, target in sizes.items():
        try:
            sc = sized_case(op, dtype, target, pool=pool, prefer=prefer)
        except NotTimeable as e:
            result.skipped.append((label, str(e)))
            continue
        prefer = (sc.seed, sc.strategy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with _device_context(backend):
                    dev = measure_stable(
                        bound_call(op, sc.case, backend.to_device, backend.device),
                        synchronize=backend.synchronize,
                        events=events,
                        min_run_time=min_run_time,
                        on_cpu=torch.device(backend.device).type == "cpu",
                    )
            except Exception as e:
                result.skipped.append((label, f"device raised {first_line(e, 200)}"))
                continue
            ref: Measurement | None
            if is_plain_cpu(backend):
                # the device under test is the CPU reference: the same call, timed once (twice
                # was half of the timing pass `conform run` ends with)
                ref = dev
            else:
                try:
                    ref = measure_stable(
                        bound_call(op, sc.case, lambda t: t, torch.device("cpu")),
                        min_run_time=min_run_time,
                        on_cpu=True,
                    )
                except Exception:
                    ref = None  # the CPU has no kernel for this dtype: the device time still counts
        result.rows.append(
            {
                "op": op.qualname,
                "dtype": dtype,
                "size_label": label,
                "shape": list(sc.shape),
                "layout": sc.layout,
                "numel": sc.numel,
                # a timing the rule could not make stable is stored as unstable, never as a number:
                # its interval says where it was seen (conform.timing.timer.measure_stable)
                **_figures("device", dev),
                # the stored name predates the label: this is device-event time, not kernel time
                # (conform.timing.timer: launch spacing on CUDA at small sizes, encoding + commit on MPS)
                "device_kernel_s": dev.event_median,
                "device_event_error": dev.event_error,
                **_figures("ref", ref),
                "repeats": dev.repeats,
            }
        )
    return result


def _figures(side: str, m: Measurement | None) -> dict[str, Any]:
    if m is None:
        return {f"{side}_{k}": None for k in ("median_s", "iqr_s", "low_s", "high_s")} | {f"{side}_stable": None}
    return {
        f"{side}_median_s": m.median if m.stable else None,
        f"{side}_iqr_s": m.iqr if m.stable else None,
        f"{side}_low_s": m.low,
        f"{side}_high_s": m.high,
        f"{side}_stable": m.stable,
    }


# -- the pass ------------------------------------------------------------------------------


@dataclass
class BenchSummary:
    run_id: int
    cells: int = 0  # passing cells considered
    timings: int = 0  # rows stored
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)  # (op, dtype, size label, reason)
    elapsed_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "cells": self.cells,
            "timings": self.timings,
            "elapsed_s": round(self.elapsed_s, 3),
            "skipped": [{"op": o, "dtype": d, "size_label": s, "reason": r} for o, d, s, r in self.skipped],
            "rows": self.rows,
        }


def _time_by_name(qualname: str, dtype: str, backend, sizes: dict[str, int], min_run_time: float) -> CellTiming:
    try:
        op = opdb.lookup(qualname)
    except Exception:
        return CellTiming(qualname, dtype, skipped=[(label, "not in the installed torch's catalog") for label in sizes])
    return time_cell(op, dtype, backend, sizes, min_run_time=min_run_time)


def _timing_setup(backend, sizes, min_run_time, threads):
    """Set up the clean child of an isolated timing pass: it times the cells it is sent (Ctrl-C is
    the parent's: conform.run.isolation ignores it in the child)."""
    torch.set_num_threads(threads)

    def time_one(cell):
        try:
            return _time_by_name(*cell, backend, sizes, min_run_time)
        except Exception as e:  # noqa: BLE001 - a bug in building one op's input skips that cell, without a traceback on the user's terminal
            return CellTiming(
                cell[0], cell[1], skipped=[(label, f"could not be timed: {first_line(e, 200)}") for label in sizes]
            )

    return time_one


class _IsolatedTimer:
    """Times cells in one clean child process at a time (conform.run.isolation: never a fork of a
    process that used the device), so that an op that crashes the process (a segfault in a
    kernel, an abort) or hangs costs only its own cell: the child is replaced and the pass goes
    on. Still serial: the parent only waits while the child times."""

    def __init__(self, backend, sizes, min_run_time, cell_timeout: float):
        self.sizes = sizes
        self.cell_timeout = cell_timeout
        self.child = CleanChild(
            _timing_setup, (backend, sizes, min_run_time, torch.get_num_threads()), name="conform-timing"
        )

    def __call__(self, qualname: str, dtype: str) -> CellTiming:
        try:
            return self.child.call((qualname, dtype), timeout=self.cell_timeout)
        except ChildTimedOut:
            reason = f"timed out after {self.cell_timeout:.0f} s"
        except ChildDied as e:
            reason = f"crashed the timing process ({e})"
        except IsolationError as e:
            reason = str(e)
        return CellTiming(qualname, dtype, skipped=[(label, reason) for label in self.sizes])

    def close(self) -> None:
        self.child.close()


def _picklable(obj) -> bool:
    try:
        pickle.dumps(obj)
        return True
    except Exception:
        return False


def bench(
    store,
    run_id: int,
    backend,
    *,
    ops: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
    sizes: dict[str, int] | None = None,
    min_run_time: float = DEFAULT_MIN_RUN_TIME,
    isolate: bool = True,
    cell_timeout: float = 600.0,
    progress: Callable[[CellTiming, int, int], None] | None = None,
) -> BenchSummary:
    """Time every passing cell of `run_id` (restricted to the qualnames `ops`, if given) on
    `backend` and the CPU at each size, storing the timings against the run as each cell ends.
    `dtypes`, if given, keeps only those dtypes' cells.

    With `isolate` (the default, where the backend can be pickled), cells are timed in a child
    process, one cell at a time: a crash or a hang (over `cell_timeout` s) skips that cell with
    the reason instead of ending the pass. This process stays the only writer to the store."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        raise ConformError(
            "the timing pass never runs inside a parallel worker: timings there measure the other workers"
        )
    started = time.monotonic()
    sizes = DEFAULT_SIZES if sizes is None else sizes
    cells = queries.passing_cells(store, run_id)
    if ops is not None:
        wanted = set(ops)
        cells = [c for c in cells if c[0] in wanted]
    if dtypes is not None:
        cells = [c for c in cells if c[1] in set(dtypes)]
    summary = BenchSummary(run_id=run_id, cells=len(cells))
    isolated = _IsolatedTimer(backend, sizes, min_run_time, cell_timeout) if isolate and _picklable(backend) else None
    try:
        for n, (qualname, dtype) in enumerate(cells, 1):
            if isolated is not None:
                cell = isolated(qualname, dtype)
            else:
                cell = _time_by_name(qualname, dtype, backend, sizes, min_run_time)
            _record_cell(store, run_id, cell, summary, progress, n, len(cells))
    finally:
        if isolated is not None:
            isolated.close()
    summary.elapsed_s = time.monotonic() - started
    return summary


def _record_cell(store, run_id, cell: CellTiming, summary: BenchSummary, progress, n: int, total: int) -> None:
    record_timings(store, run_id, cell.rows)
    summary.timings += len(cell.rows)
    summary.rows += cell.rows
    summary.skipped += [(cell.op, cell.dtype, label, reason) for label, reason in cell.skipped]
    if progress is not None:
        progress(cell, n, total)


# -- the command ---------------------------------------------------------------------------


def format_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def render_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'op':<42} {'dtype':<9} {'size':<7} {'shape':<22} {'device':>10} {'+-iqr':>9} {'events':>9} {'cpu ref':>10} {'speedup':>8}"
    ]
    for r in rows:
        speed = r["ref_median_s"] / r["device_median_s"] if r.get("ref_median_s") and r.get("device_median_s") else None
        lines.append(
            f"{r['op']:<42} {r['dtype']:<9} {r['size_label']:<7} {str(list(r['shape'])):<22} {format_seconds(r['device_median_s']):>10} "
            f"{format_seconds(r['device_iqr_s']):>9} {format_seconds(r['device_kernel_s']):>9} {format_seconds(r['ref_median_s']):>10} "
            f"{(f'{speed:.2f}x' if speed else '-'):>8}"
        )
    return "\n".join(lines)

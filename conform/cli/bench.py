"""`conform bench`: the command line of conform.timing.bench."""

from __future__ import annotations

import os

import click
import torch

from conform import backends
from conform.errors import ConformError
from conform.run import selection
from conform.store import Store, queries
from conform.timing.bench import (
    DEFAULT_MIN_RUN_TIME,
    CellTiming,
    bench,
    format_seconds,
    parse_sizes,
    render_table,
)


@click.command("bench")
@click.option(
    "--run",
    "run_ref",
    default="latest",
    show_default=True,
    metavar="RUN_ID|latest",
    help="the stored run whose passing cells are timed",
)
@click.option(
    "--ops",
    "ops",
    default=None,
    help="only these ops (same syntax as `conform run --ops`: core, family:NAME, globs, @file) [default: every passing op]",
)
@click.option(
    "--sizes",
    default="small=1e3,medium=1e5,large=1e6",
    show_default=True,
    help="LABEL=ELEMENTS pairs: element count of the largest input",
)
@click.option("--device", default=None, help="the backend to time [default: the run's own backend]")
@click.option(
    "--min-time",
    "min_time",
    type=click.FloatRange(0.001),
    default=DEFAULT_MIN_RUN_TIME,
    show_default=True,
    help="seconds of timed blocks per op, size and side",
)
@click.option(
    "--threads",
    type=click.IntRange(1),
    default=None,
    help=f"CPU threads for torch on both sides [default: torch's default, here {torch.get_num_threads()}]",
)
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--isolate/--no-isolate",
    default=True,
    show_default=True,
    help="time in a child process, so that an op that crashes or hangs skips only its own cell",
)
@click.option(
    "--cell-timeout",
    type=click.FloatRange(1),
    default=600.0,
    show_default=True,
    help="seconds before an isolated cell counts as hung",
)
@click.option("--quiet", "-q", is_flag=True, help="no per-op progress on stderr")
@click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)
def bench_command(run_ref, ops, sizes, device, min_time, threads, fmt, isolate, cell_timeout, quiet, db):
    """Time the passing cells of a stored run on the device and on the CPU reference.

    The timing pass runs after `conform run`, serially: one cell at a time, in one child process
    (so that an op that crashes or hangs skips only its own cell), never in the run's parallel
    workers. Each passing op x dtype is timed at every size of --sizes (element count
    of its largest input) on the device and on the CPU: median and interquartile range over
    blocks of calibrated length, with the device synchronised before each clock read (the wall
    time, which speedups use), plus the device-event time where it has timing events (between
    events on its stream: on CUDA at small sizes that is launch spacing, on MPS it includes
    command-buffer encoding; an event failure leaves the wall time stored). Timings are stored against
    the run (speedup = CPU time / device time); timing it again replaces them. Ops for which no
    input of a size can be built are listed as skipped, with the reason.

    Example: conform bench --run latest --ops core --sizes small=1e3,medium=1e5,large=1e6
    """
    size_map = parse_sizes(sizes)
    if threads is not None:
        torch.set_num_threads(threads)
    store = Store(db, create=False)
    run_id = queries.run_id_of(store, run_ref)
    run = queries.run(store, run_id)
    env = run.environment
    run_device = (run.options or {}).get("device") or env.backend
    backend = backends.resolve(device or run_device)
    if backend.name != env.backend:
        raise ConformError(
            f"run {run_id} tested {env.backend}; its timings must come from the same device, not {backend.name}"
        )
    wanted = None
    if ops is not None:
        try:
            wanted = [s.qualname for s in selection.select_ops(ops)]
        except Exception as e:
            raise ConformError(str(e)) from None

    load, cores = _load()
    if load is not None and load >= cores:
        click.echo(
            f"conform: warning: load average {load:.1f} on {cores} cores: other processes will be in the timings "
            "(multi-threaded CPU ops suffer most; --threads 1 is steadier)",
            err=True,
        )

    def progress(cell: CellTiming, n: int, total: int) -> None:
        if quiet:
            return
        sizes_done = (
            ", ".join(f"{r['size_label']} {format_seconds(r['device_median_s'])}" for r in cell.rows) or "skipped"
        )
        click.echo(f"[{n}/{total}] {cell.op} {cell.dtype}: {sizes_done}", err=True)

    summary = bench(
        store,
        run_id,
        backend,
        ops=wanted,
        sizes=size_map,
        min_run_time=min_time,
        isolate=isolate,
        cell_timeout=cell_timeout,
        progress=progress,
    )
    if fmt == "json":
        click.echo(__import__("json").dumps(summary.to_dict(), indent=1))
        return
    if summary.rows:
        click.echo(render_table(summary.rows))
    skipped_cells = {(o, d) for o, d, _, _ in summary.skipped}
    click.echo(
        f"\ntimed {summary.cells} passing cells of run {run_id} at {len(size_map)} sizes: {summary.timings} timings stored, "
        f"{len(summary.skipped)} sizes skipped ({len(skipped_cells)} cells) in {summary.elapsed_s:.0f} s -> {store.where}"
    )
    for o, d, label, reason in summary.skipped:
        click.echo(f"  skipped {o} {d} {label}: {reason}")


def _load() -> tuple[float | None, int]:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        return os.getloadavg()[0], cores
    except OSError:
        return None, cores

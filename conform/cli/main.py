"""The `conform` command.

Bad input (an unknown op or dtype, a device that is not available, an unreadable or foreign
database) ends with one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time

import click
from tqdm import tqdm

from conform import __version__
from conform.config import AUTO_CASE_TIMEOUT_S, DEFAULT_DTYPES, CellSettings, RunConfig
from conform.errors import ConformError
from conform.run import interrupts

# Commands that live in their own modules, imported only when used: `conform --help` stays fast
# and one broken optional feature cannot take the whole CLI down.
LAZY_COMMANDS = {
    "coverage": ("conform.cli.coverage", "coverage_command"),
    "merge": ("conform.cli.merge", "merge_command"),
    "site": ("conform.cli.site", "site_command"),
    "gate": ("conform.cli.gate", "gate_command"),
    "expectations": ("conform.cli.expectations", "expectations_command"),
    "declared": ("conform.cli.declared", "declared_command"),
    "bench": ("conform.cli.bench", "bench_command"),
    "model": ("conform.cli.model", "model_command"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        names = set(super().list_commands(ctx))
        names |= {n for n, (mod, _) in LAZY_COMMANDS.items() if importlib.util.find_spec(mod) is not None}
        return sorted(names)

    def get_command(self, ctx, name):
        if name in LAZY_COMMANDS:
            mod, attr = LAZY_COMMANDS[name]
            if importlib.util.find_spec(mod) is not None:
                with interrupts.importing():  # most load torch
                    return getattr(importlib.import_module(mod), attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="conform")
def cli():
    """Op coverage and numerical conformance of a PyTorch backend against the CPU."""


db_option = click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _auto_workers(backend) -> int:
    """One worker per core; on a GPU no more than the backend's `workers_per_device`: each worker
    holds a device context of its own, and conform's small cases do not fill a GPU anyway."""
    per_device = getattr(backend, "workers_per_device", None)
    return max(1, min(_cpu_count(), per_device)) if per_device else _cpu_count()


@cli.command()
@click.option(
    "--ops",
    "ops",
    default=None,
    help=f"all, core, family:NAME, a comma list, globs (aten::add*, add*), or @file [default: {RunConfig.ops}]",
)
@click.option(
    "--dtypes",
    default=None,
    help=f"comma-separated dtypes (default: {','.join(DEFAULT_DTYPES)}; no float64 on cpu, whose reference is float64)",
)
@click.option(
    "--device",
    default=None,
    help="cpu, mps, cuda[:N], xpu, meta, a conform.backends entry point, or module:attr (default: best available)",
)
@click.option(
    "--examples",
    type=int,
    default=None,
    help=f"valid cases per cell, drawn ones and their value variants [default: {CellSettings.examples}]",
)
@click.option(
    "--values-per-draw",
    type=int,
    default=None,
    help="cases per drawn case: it, then the same case with other values; 1 draws every case "
    f"[default: {CellSettings.values_per_draw}]",
)
@click.option(
    "--further-failures",
    type=int,
    default=None,
    help="failures of other kinds a failing cell looks for after its first, within its own cases "
    f"[default: {CellSettings.further_failures}]",
)
@click.option("--seed", type=int, default=None, help="run seed, recorded with the run (default: random)")
@click.option(
    "-n",
    "--workers",
    "workers",
    default="auto",
    show_default=True,
    help="parallel worker processes (auto = number of cores, on cuda at most 4: each worker holds a CUDA context); "
    "at least 1, so a crash never takes the run down",
)
@click.option("--no-grad", "grad", flag_value=False, default=None, help="skip backward comparisons")
@click.option(
    "--case-timeout",
    "case_timeout_s",
    type=float,
    default=None,
    help=f"seconds before a case counts as hung [default: auto = {AUTO_CASE_TIMEOUT_S['cpu']:g} on cpu and meta, "
    f"{AUTO_CASE_TIMEOUT_S['accelerator']:g} on accelerators, whose first call of a kernel may compile it]",
)
@click.option("--max-numel", type=int, default=None, help=f"elements per case [default: {CellSettings.max_numel}]")
@click.option(
    "--memory-limit",
    default=None,
    metavar="GiB|auto|none",
    help=f"address-space cap per worker [default: {RunConfig.memory_limit} = 4 GiB on cpu/meta, none on GPUs]",
)
@click.option("--resume", "resume", default=None, metavar="RUN_ID|latest", help="continue an interrupted run")
@click.option("--derandomize", flag_value=True, default=None, help="same cases for the same op every time (for gating)")
@click.option("--junitxml", default=None, metavar="PATH", help="also write JUnit XML (one test case per cell)")
@click.option(
    "--bench/--no-bench",
    default=True,
    show_default=True,
    help="after the sweep, time the passing float32 cells of the core ops at 1e3 and 1e5 elements on the device "
    "and the CPU, for the site's Performance page (under a minute on 2 CPU cores; --no-bench skips it)",
)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
@db_option
def run(workers, junitxml, bench, quiet, **options):
    """Sweep ops x dtypes on the device under test and store every cell's outcome."""
    with interrupts.importing():
        import pytest  # pytest and the plugin: for this command only

        from conform.plugin import Controller

    n = None if workers == "auto" else _positive_int(workers, "-n")
    # every setting checked once, as the RunConfig is built; then what needs torch (the backend,
    # the ops, the dtypes, the store), as the controller starts the run: all before any worker.
    # From the moment the run exists (new, or marked `running` again by --resume) a Ctrl-C must
    # end in c.finish(), which stores `interrupted`: held until the controller is in hand (one
    # landing as the constructor returns would otherwise leave the run `running`), then raised
    # inside the try below. One before the run is started still stops the constructor itself
    # (conform.plugin.Controller checks for it first, held or not).
    c = None
    try:
        with interrupts.held(deliver=False):
            c = Controller(RunConfig.from_options(**options, progress=not quiet))
            session = _Session(c)
            started = time.monotonic()
        interrupts.check()
        if options["resume"] is None and options["device"] is None and c.backend.name == "cpu":
            click.echo("conform: no accelerator found; testing the CPU against a float64 golden reference", err=True)
        with _quiet_stdout():
            code = pytest.main(_pytest_args(c, n, junitxml), plugins=[session])
    except KeyboardInterrupt:  # before pytest started, or a second Ctrl-C during its own shutdown
        if c is None:  # no run was started: main() says so
            raise
        code = pytest.ExitCode.INTERRUPTED
    c.finish(pytest.ExitCode.INTERRUPTED)  # already done unless pytest never ran or its shutdown was cut short
    if code in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        raise ConformError(f"run {c.run_id} {c.state}: {session.error or f'pytest exit status {int(code)}'}")
    db = options["db"]
    db_arg = f" --db {db}" if db else ""
    if c.fatal:
        raise ConformError(
            f"{c.fatal}; run {c.run_id} stopped (continue with `conform run --resume {c.run_id}{db_arg}`)"
        )
    elapsed = time.monotonic() - started
    counts = ", ".join(f"{k} {v}" for k, v in sorted(c.counts.items(), key=lambda kv: -kv[1]))
    click.echo(
        f"run {c.run_id} {c.state}: {c.stored} of {c.planned} cells recorded, {c.recorded} in {elapsed:.0f} s ({counts}) -> {c.store.where}"
    )
    if c.state == "interrupted":
        click.echo(f"interrupted: continue with `conform run --resume {c.run_id}{db_arg}`", err=True)
        sys.exit(130)
    if bench:
        _timing_pass(c, db_arg, quiet)
    c.store.close()  # the last connection: SQLite folds its -wal file back into conform.db
    click.echo(f"next: conform report --run {c.run_id}{db_arg}; conform site{db_arg} --out conform-site")


# A run of at most this many cells runs them from the controller itself (xdist's -n 0) when the
# worker count is automatic: each worker process imports torch and builds the op catalog (seconds
# of CPU each, and more on a busy machine) before its first cell, which is longer than a few cells
# take. Cells still run in clean device processes, so a crash takes only its own cell.
SMALL_RUN_CELLS = 24


def _workers_for(c, n: int | None) -> int:
    if n is not None:
        return n
    return 0 if len(c.cells) <= SMALL_RUN_CELLS else _auto_workers(c.backend)


def _pytest_args(c, n: int | None, junitxml: str | None) -> list[str]:
    """The pytest session `conform run` starts: conform's suite of cells over xdist workers."""
    # -p conform.plugin: conform's hooks join this pytest session only (there is no pytest11 entry point);
    # -p no:conform: an older conform installed one under that name, which would register it twice
    args = [
        "-p",
        "no:conform",
        "-p",
        "conform.plugin",
        "--pyargs",
        "conform.suite",
        "-p",
        "xdist",
        "-n",
        str(_workers_for(c, n)),
    ]
    args += [
        "--max-worker-restart",
        "1000000",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-p",
        "no:benchmark",
        "-p",
        "no:faulthandler",
        # nothing in the suite asserts for pytest to explain: rewriting conform's modules as they
        # are imported, and collecting garbage five times at exit to find unraisable exceptions,
        # were seconds of every run's start and end (the heap holds the whole op catalog)
        "--assert=plain",
        "-p",
        "no:unraisableexception",
        # cells log nothing through `logging`; its capture, set up and torn down around each
        # cell's three phases, was a third of a worker's own time per cell
        "-p",
        "no:logging",
    ]
    args += ["-q", "--no-header", "--tb=no", "-rN", "--disable-warnings"]
    if junitxml is not None:
        args += ["--junitxml", junitxml]
    return args


# The timing pass `conform run` does after its sweep: float32 cells of the ops tagged core, at two
# sizes, so that the site's Performance page has data after the one command README gives.
# Not 1e6 elements: there one op alone (cdist, whose output is quadratic) took 270 of 585 s on a
# loaded 2-core machine. `conform bench` times any other selection; --no-bench skips this.
RUN_BENCH_OPS = "core"
RUN_BENCH_DTYPES = ("float32",)
RUN_BENCH_SIZES = {"small": 1_000, "medium": 100_000}


def _timing_pass(c, db_arg: str, quiet: bool) -> None:
    from conform.report.summary import plural  # the store and torch: for this pass only
    from conform.timing import bench

    ops = [s.qualname for s in _select(RUN_BENCH_OPS)]
    where = "the CPU" if c.backend.name == "cpu" else f"{c.backend.name} and the CPU"
    click.echo(
        f"timing pass: passing {'/'.join(RUN_BENCH_DTYPES)} cells of the {RUN_BENCH_OPS} ops on {where} (skip with --no-bench)",
        err=True,
    )
    bar = None

    def progress(cell, n, total):
        nonlocal bar
        if bar is None and not quiet:
            bar = tqdm(total=total, unit="cell", dynamic_ncols=True, file=sys.stderr)
        if bar is not None:
            bar.update(1)

    started = time.monotonic()
    try:
        summary = bench.bench(
            c.store, c.run_id, c.backend, ops=ops, dtypes=RUN_BENCH_DTYPES, sizes=RUN_BENCH_SIZES, progress=progress
        )
    except KeyboardInterrupt:
        # the run itself is complete and stays `finished`; only its timings are partial
        click.echo(
            f"timing pass interrupted: time again with `conform bench --run {c.run_id} --ops {RUN_BENCH_OPS}{db_arg}`",
            err=True,
        )
        sys.exit(130)
    finally:
        if bar is not None:
            bar.close()
    click.echo(
        f"timed {plural(summary.cells, 'cell')}: {plural(summary.timings, 'timing')} stored in {time.monotonic() - started:.0f} s"
    )


class _Session:
    """`conform run`'s side of the pytest session: registers the controller under its name as
    soon as this object is registered (pytest.main names the objects it is given by their ids;
    pytest_addhooks is the hook called at that moment), and keeps pytest's internal error."""

    error = ""

    def __init__(self, controller):
        self.controller = controller

    def pytest_addhooks(self, pluginmanager):
        from conform.plugin import CONTROLLER  # pytest: for `conform run` only

        pluginmanager.register(self.controller, CONTROLLER)

    def pytest_internalerror(self, excrepr, excinfo):
        self.error = str(excinfo.value)


class _quiet_stdout:
    """pytest's own terminal output (dots, summaries) is noise under a progress bar."""

    def __enter__(self):
        self.saved = os.dup(1)
        self.devnull = os.open(os.devnull, os.O_WRONLY)
        sys.stdout.flush()
        os.dup2(self.devnull, 1)

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)
        os.close(self.devnull)


def _positive_int(value: str, name: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ConformError(f"{name} takes a number of workers or 'auto', not {value!r}") from None
    if n < 1:
        raise ConformError(f"{name} must be at least 1 (workers isolate crashes)")
    return n


def _select(expr: str):
    with interrupts.importing():
        from conform.run import selection  # torch: for the commands that select ops
        from opdb import UnknownOpError

    try:
        return selection.select_ops(expr)
    except UnknownOpError as e:
        raise ConformError(str(e)) from None


@cli.command()
@click.argument("pattern", required=False, default="all")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per op, for machines")
def ops(pattern, as_json):
    """List the ATen operator overloads of the installed torch (the catalog)."""
    with interrupts.importing():
        import opdb  # torch: for this command only

    specs = _select(pattern)
    if as_json:
        click.echo(
            json.dumps(
                {"count": len(specs), "counts": opdb.counts(specs), "ops": [s.to_dict() for s in specs]}, indent=1
            )
        )
        return
    for s in specs:
        click.echo(f"{s.qualname:<55} {s.variant:<10} {s.family:<12} {','.join(s.kernels)}")
    counts = opdb.counts(specs)
    click.echo(
        f"\n{len(specs)} ops" + "".join(f", {k} {v}" for k, v in counts.items() if isinstance(v, int) and k != "total")
    )
    for key, table in counts.items():
        if isinstance(table, dict):
            click.echo(f"by {key}: " + ", ".join(f"{k} {v}" for k, v in sorted(table.items(), key=lambda kv: -kv[1])))


@cli.command()
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True)
@click.option(
    "--run", "run_id", type=int, default=None, help="one run only (default: every environment, newest result per cell)"
)
@db_option
def report(fmt, run_id, db):
    """Summarise stored results per environment (torch version x backend x chip)."""
    with interrupts.importing():
        from conform.report import summary as rep  # the store: for this command only
        from conform.store import Store

    store = Store(db, readonly=True)
    items = rep.summaries(store, run_id=run_id)
    click.echo(rep.render(items, fmt))


def main(argv=None) -> None:
    interrupts.install()
    try:
        interrupts.check()  # one that came while the command was being loaded (conform.cli.main)
        _main(argv)
    except KeyboardInterrupt:  # also while torch is still being imported
        signal.signal(
            signal.SIGINT, signal.SIG_IGN
        )  # one interrupt is said once; a second (or one re-sent) would kill the exit
        click.echo("conform: interrupted", err=True)
        sys.exit(130)
    finally:
        # the command's work is stored and said; a Ctrl-C during the interpreter's own teardown
        # (torch.library's atexit finalizers) would only print a traceback over it
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _unknown_op_error() -> type[Exception]:
    """opdb's UnknownOpError where a command loaded opdb, without importing it (and torch, seconds
    of start-up) for the commands that never read the catalog: --help, report, merge."""
    catalog = sys.modules.get("opdb.catalog")
    return catalog.UnknownOpError if catalog is not None else ConformError


def _main(argv) -> None:
    try:
        cli.main(args=argv, prog_name="conform", standalone_mode=False)
    except (ConformError, _unknown_op_error()) as e:
        click.echo(f"conform: error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("conform: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()

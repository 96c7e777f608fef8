"""`conform model SPEC`: will a model run on the device, how exactly, and how fast."""

from __future__ import annotations

import sys

import click

from conform import __version__
from conform.backends import resolve
from conform.environment import capture
from conform.errors import ConformError, first_line
from conform.model import backendbench
from conform.model import spec as spec_mod
from conform.model.verdict import PASSING, check_model, render
from conform.store import Store
from conform.store.model_results import record_model


@click.command("model")
@click.argument("spec")
@click.option(
    "--device",
    default=None,
    help="cpu, mps, cuda[:N], xpu, a conform.backends entry point, or module:attr (default: best available)",
)
@click.option("--dtype", default="float32", show_default=True, type=click.Choice(["float32", "float16", "bfloat16"]))
@click.option(
    "--train/--no-train",
    default=True,
    show_default=True,
    help="forward + backward of a scalar loss, or forward only",
)
@click.option(
    "--timing/--no-timing", default=True, show_default=True, help="time each traced call on the device and the CPU"
)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text", show_default=True)
@click.option("--store/--no-store", "store_it", default=True, show_default=True, help="record the verdict in --db")
@click.option("--export-trace", default=None, metavar="PATH", help="also write the trace in BackendBench's text format")
@click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)
def model_command(spec, device, dtype, train, timing, fmt, store_it, export_trace, db):
    """Trace a model (forward and backward), judge every op it dispatches, compare the whole model
    on the device, the CPU and float64, and give one verdict: runs, runs_with_fallback, fails,
    diverges.

    SPEC: torchvision:NAME, timm:NAME, hf:MODEL_TYPE (a tiny config, built offline), or
    package.module:factory (a callable returning (model, example_inputs)).
    Exit status: 0 runs (with or without fallback), 1 fails or diverges, 2 bad input.
    """

    spec_mod.parse(spec)  # a malformed SPEC is one line before anything is imported or built
    if dtype != "float32" and train:
        raise ConformError(f"--dtype {dtype} is for --no-train: gradients are compared in float32 only")
    backend = resolve(device)
    store = None
    if store_it:  # a database that cannot be written is said before the model runs, not after
        store = Store(db)

    def progress(message: str) -> None:
        if fmt == "text":
            click.echo(f"conform: {message}", err=True)

    bar = None

    def case_progress(done: int, total: int) -> None:
        nonlocal bar
        if fmt != "text" or not sys.stderr.isatty():
            return
        if bar is None:
            from tqdm import tqdm  # here, not at the top: the progress bar is only loaded when it is shown

            bar = tqdm(total=total, unit="case", dynamic_ncols=True, file=sys.stderr, leave=False)
        bar.update(1)

    try:
        report = check_model(
            spec, backend, train=train, dtype=dtype, timing=timing, progress=progress, case_progress=case_progress
        )
    except spec_mod.SpecError:
        raise
    except ConformError:
        raise
    except Exception as e:  # building the model itself failed: the SPEC, not the device
        raise ConformError(f"model {spec!r} could not be built and run on the CPU: {first_line(e, 300)}") from None
    finally:
        if bar is not None:
            bar.close()
    if export_trace:
        with open(export_trace, "w", encoding="utf-8") as f:
            f.write(backendbench.dumps(report.trace))
    if store is not None:
        repros = {o.op: o.failing.repro for o in report.ops if o.failing is not None and o.failing.repro}
        div = report.whole.divergence if report.whole else None
        record_model(
            store,
            capture(backend),
            report.to_dict(),
            repros=repros,
            divergence_repro=div.repro if div else "",
            conform_version=__version__,
        )
        store.close()
    click.echo(render(report, fmt))
    sys.exit(0 if report.verdict in PASSING else 1)

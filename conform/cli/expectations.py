"""`conform expectations`: the command line of conform.ci.expectations."""

from __future__ import annotations

from pathlib import Path

import click

from conform.ci.expectations import (
    from_run,
    load,
    loads,
)
from conform.store import Store, queries


@click.command("expectations")
@click.option(
    "--from-run",
    "from_run_ref",
    default=None,
    metavar="latest|ID",
    help="write expectations that match this run's results",
)
@click.option(
    "--check",
    "check_path",
    default=None,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="validate an expectations file (exit 2 with FILE:LINE if malformed)",
)
@click.option("-o", "--output", default="-", show_default=True, metavar="FILE", help="where to write (- for stdout)")
@click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)
def expectations_command(from_run_ref, check_path, output, db):
    """Write an expectations file from a run, or check one (the baseline `conform gate` reads)."""
    if (from_run_ref is None) == (check_path is None):
        raise click.UsageError("give one of --from-run latest|ID or --check FILE")
    if check_path is not None:
        ex = load(check_path)
        click.echo(
            f"{check_path}: {len(ex.entries)} expectations over {len(ex.ops)} ops"
            + (f" x {len(ex.dtypes)} dtypes" if ex.dtypes else "")
        )
        return
    store = Store(db, readonly=True, create=False)
    try:
        run_id = queries.run_id_of(store, from_run_ref, option="--from-run")
        text = from_run(store, run_id)
    finally:
        store.close()
    if output == "-":
        click.echo(text, nl=False)
    else:
        Path(output).write_text(text, encoding="utf-8")
        loads(text, output)  # what we write must read back
        click.echo(f"wrote {output}: expectations of run {run_id}", err=True)

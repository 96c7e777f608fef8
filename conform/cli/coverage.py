"""`conform coverage`: the command line of conform.report.coverage."""

from __future__ import annotations

import click

from conform.report.coverage import (
    NOT_SELECTED,
    REASON_WIDTH,
    coverage,
    render,
    status,
    totals,
)
from conform.store import Store, queries


@click.command("coverage")
@click.option("--run", "run", default="latest", show_default=True, metavar="ID|latest", help="the run to describe")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option(
    "--full",
    is_flag=True,
    help=f"every reason whole (the table cuts them at {REASON_WIDTH} characters; JSON never does)",
)
@click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)
def coverage_command(run, fmt, full, db):
    """Which catalog ops a run exercised (a valid case ran), how many valid cases, and why not."""
    store = Store(db, readonly=True)
    click.echo(render(coverage(store, queries.run_id_of(store, run)), fmt, full=full))


__all__ = ["NOT_SELECTED", "coverage", "coverage_command", "render", "status", "totals"]

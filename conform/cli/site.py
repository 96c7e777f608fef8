"""`conform site`: the command line of conform.website.build."""

from __future__ import annotations

from pathlib import Path

import click

from conform.report.summary import plural
from conform.store import Store
from conform.website.build import build_site


@click.command("site")
@click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)
@click.option(
    "--out", "out", default="conform-site", show_default=True, metavar="DIR", help="output folder (rebuilt in place)"
)
def site_command(db, out):
    """Build the static website: overview, coverage matrix, one page per op, diffs, performance."""
    store = Store(db, readonly=True)
    try:
        stats = build_site(store, out)
    finally:
        store.close()
    index = Path(out).resolve() / "index.html"
    click.echo(
        f"site: {plural(stats.environments, 'environment')}, {plural(stats.ops, 'op')}, {plural(stats.cells, 'cell')} -> {plural(stats.pages, 'page')}, "
        f"{plural(stats.files, 'file')}, {stats.bytes / 1e6:.1f} MB in {stats.seconds:.1f} s; "
        f"largest page {stats.largest_page[0]} {stats.largest_page[1] / 1e3:.0f} kB"
    )
    click.echo(f"open {index.as_uri()}")

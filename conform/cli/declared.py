"""`conform declared`: the command line of conform.report.declared."""

from __future__ import annotations

from pathlib import Path

import click

from conform.errors import ConformError
from conform.report.declared import (
    BACKEND_KEYS,
    declared_coverage,
    read_installed,
    read_wheel,
    record,
    render_coverage,
)
from conform.store import Store


@click.command("declared")
@click.option(
    "--wheel",
    "wheels",
    multiple=True,
    metavar="PATH",
    help="a torch wheel of any platform and version (or a folder of them); repeatable",
)
@click.option("--installed", is_flag=True, help="the installed torch")
@click.option("--keys", default=",".join(BACKEND_KEYS), show_default=True, help="dispatch keys to count")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table", show_default=True)
@click.option("--no-cache", is_flag=True, help="parse wheels again even when a cached result exists")
@click.option(
    "--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)"
)
def declared_command(wheels, installed, keys, fmt, no_cache, db):
    """Store which ops each backend has a kernel for, as declared by torch releases.

    Reads native_functions.yaml from each --wheel (fetch one for any platform with
    `pip download --no-deps --only-binary=:all: --platform macosx_11_0_arm64 --python-version 3.10
    torch==2.4.1`) or from the installed torch, stores it as a "declared" environment per torch
    version, and prints declared coverage of every declared version in the database. Without
    --wheel or --installed it only prints.
    """
    key_list = tuple(k.strip() for k in keys.split(",") if k.strip())
    if not key_list:
        raise ConformError("--keys needs at least one dispatch key, e.g. MPS")
    releases = [read_wheel(w, cache=not no_cache) for w in _wheels(wheels)]
    if installed:
        releases.append(read_installed())
    if releases:
        store = Store(db)
        for rel in releases:
            env_id = record(store, rel)
            click.echo(
                f"torch {rel.torch_version} ({rel.source}): {len(rel.kernels)} ops -> declared environment {env_id}",
                err=True,
            )
    else:
        store = Store(db, readonly=True)
    rows = declared_coverage(store, keys=key_list)
    if not rows:
        raise ConformError(f"no declared environments in {store.where}: add some with --wheel PATH or --installed")
    click.echo(render_coverage(rows, fmt, keys=key_list))


def _wheels(paths) -> list[Path]:
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            found = sorted(p.glob("torch-*.whl"))
            if not found:
                raise ConformError(f"no torch-*.whl in {p}")
            out += found
        else:
            out.append(p)
    return out

"""`conform merge`: combine the databases of many machines and torch versions into one.

Rows are matched by their stable keys, never by their ids (which differ from one database to the
next): environments by `fingerprint`, runs by `uuid`, ops by `qualname`, a run's catalog entry by
(run, op), a result by its cell (run, op, dtype), a timing by (run, op, dtype, size). A row whose
key is already in the destination is left as it is, so merging the same run twice adds nothing,
and merging a later copy of a run that was still going adds only the cells it did not have.

Tables this conform does not know are reported, not silently dropped.
"""

from __future__ import annotations

import json

import click

from conform.errors import ConformError
from conform.report.summary import plural
from conform.store.merging import merge_databases


@click.command("merge")
@click.argument("sources", nargs=-1, required=True, metavar="DB...")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    metavar="PATH|URL",
    help="database to merge into (created if missing; may be one of the sources)",
)
@click.option("--json", "as_json", is_flag=True, help="what was added, as JSON")
def merge_command(sources, output, as_json):
    """Combine runs from many machines and torch versions into one database.

    Environments, runs and ops are matched by fingerprint, uuid and qualified name, so merging
    the same run twice adds nothing.
    """
    all_stats = merge_databases(sources, output)
    if as_json:
        click.echo(json.dumps({"output": output, "sources": [s.to_dict() for s in all_stats]}, indent=2))
        return
    for s in all_stats:
        parts = [
            plural(s.runs, "run"),
            plural(s.results, "result"),
            plural(s.failures, "failure"),
            plural(s.timings, "timing"),
            plural(s.environments, "environment"),
            plural(s.ops, "op"),
        ]
        if s.runs_extended:
            parts.append(plural(s.runs_extended, "run") + " extended")
        if s.declared_kernels:
            parts.append(plural(s.declared_kernels, "declared kernel"))
        click.echo(f"{s.source}: added " + ", ".join(parts) if s.added else f"{s.source}: nothing new")
        for t in s.skipped_tables:
            click.echo(
                f"conform merge: warning: table {t!r} of {s.source} is unknown to this conform and was not merged",
                err=True,
            )
    if not all_stats:
        raise ConformError("nothing to merge")

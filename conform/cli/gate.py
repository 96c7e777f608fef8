"""`conform gate`: the command line of conform.ci.gate."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import click

from conform.ci.gate import (
    gate,
    junit_xml,
    model_gate,
    render_markdown,
    render_model_gate,
    render_text,
)
from conform.errors import ConformError
from conform.timing.changes import PCT


@click.command("gate")
@click.option(
    "--baseline",
    required=True,
    metavar="FILE.toml|DB[#RUN]|run:ID",
    help="expectations file, database (its newest run, or #RUN_ID), or run:ID in --db",
)
@click.option("--run", "run_id", type=int, default=None, help="the run to gate (default: the newest in --db)")
@click.option(
    "--summary",
    "summary_path",
    default=None,
    metavar="PATH",
    help="write a markdown summary (a PR comment; $GITHUB_STEP_SUMMARY)",
)
@click.option(
    "--junitxml", default=None, metavar="PATH", help="write JUnit XML: one test case per cell, regressions as failures"
)
@click.option(
    "--timing-threshold",
    "timing_pct",
    type=click.FloatRange(0, min_open=True),
    default=PCT * 100,
    show_default=True,
    help="percent a slowdown must exceed (and the spread of both timings) to count",
)
@click.option("--no-timing", is_flag=True, help="do not compare timings")
@click.option(
    "--db", default=None, metavar="PATH|URL", help="database of the run to gate (default: conform.db, or $CONFORM_DB)"
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="SPEC",
    help="gate model verdicts (`conform model SPEC`) instead of cells: fail if a model that ran on the baseline "
    "now fails or diverges (repeatable)",
)
def gate_command(baseline, run_id, summary_path, junitxml, timing_pct, no_timing, db, models):
    """Compare a run with a baseline; exit 1 if any cell regressed (or a timing, beyond noise).

    Regressions (expected to pass, now anything else) fail the gate. Stale expectations (expected
    to fail, now pass), changed failures, new and vanished ops are reported without failing.
    Exit status: 0 nothing regressed, 1 regressions, 2 bad input.
    """
    if models:
        model_result = model_gate(baseline, list(models), db=db)
        click.echo(render_model_gate(model_result))
        if summary_path:
            _write(summary_path, "```\n" + render_model_gate(model_result) + "\n```\n")
        sys.exit(model_result.exit_code)
    result = gate(baseline, db=db, run_id=run_id, timing=not no_timing, timing_pct=timing_pct / 100)
    click.echo(render_text(result))
    if summary_path:
        _write(summary_path, render_markdown(result))
    if junitxml:
        tree = junit_xml(result)
        _write(junitxml, ET.tostring(tree.getroot(), encoding="unicode", xml_declaration=True) + "\n")
    # sys.exit, not click's Exit: `conform` runs click with standalone_mode=False, which turns
    # Exit into a return value that nobody reads
    sys.exit(result.exit_code)


def _write(path: str, text: str) -> None:
    p = Path(path)
    try:
        if p.parent and not p.parent.exists():
            p.parent.mkdir(parents=True)
        p.write_text(text, encoding="utf-8")
    except OSError as e:
        raise ConformError(f"cannot write {path}: {e.strerror or e}") from None

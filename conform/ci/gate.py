"""`conform gate`: compare a run with a baseline, cell by cell, and give CI a verdict."""

# The baseline is a stored run or an expectations file (see conform.ci.expectations). Each cell (op x
# dtype) of the current run falls in one class:
#
# * regression: expected to pass (the baseline passed, or the file expects "pass"), now anything
#   else. Any regression makes the gate fail (exit 1);
# * fixed: expected to fail, now passes. Against an expectations file this is a **stale
#   expectation**: the entry should go. Reported, not failing;
# * changed: expected one failure, now a different one (not_implemented -> mismatch). Reported;
# * expected: as expected (pass, or the known failure);
# * new: the baseline does not cover the cell (a new op, or a new dtype of a known op).
#
# Baseline cells the run lacks are reported as missing ops (no cell of the op ran) or missing cells.
# When both runs have timings (`conform bench`), slowdowns beyond noise are timing regressions and
# fail the gate too. Exit status: 0 nothing regressed, 1 something did, 2 bad input.
#
# The gate reads the store only; it never imports torch.

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conform.ci import expectations
from conform.errors import ConformError, first_line
from conform.outcomes import Outcome
from conform.store import Store, database_url, queries
from conform.store.model_results import model_history
from conform.timing.changes import PCT, slowdowns

PASS = Outcome.PASS.value

# what a class is called in the reports, one and many
KIND_WORDS = {
    "regression": ("regression", "regressions"),
    "stale": ("stale expectation", "stale expectations"),
    "fixed": ("fix", "fixes"),
    "changed": ("changed failure", "changed failures"),
}


# -- the two sides ------------------------------------------------------------------------------


@dataclass
class CellState:
    outcome: str
    message: str = ""
    result_id: int | None = None


@dataclass
class RunSide:
    """A stored run and its cells (the newest result of each)."""

    store: Any
    run_id: int
    uuid: str
    state: str
    seed: int
    options: dict
    env: dict[str, str]
    cells: dict[tuple[str, str], CellState]
    cells_planned: int = 0

    @property
    def label(self) -> str:
        return f"run {self.run_id} of {self.store.where}"

    def describe_env(self) -> str:
        e = self.env
        chip = f" ({e['device_name']})" if e.get("device_name") else ""
        return f"{e.get('backend', '?')}{chip}, torch {e.get('torch_version', '?')}, {e.get('os', '')} {e.get('os_version', '')}".strip()

    def describe_determinism(self) -> str:
        if self.options.get("derandomize"):
            return "derandomized (cases follow from each cell's name; stored failing examples replay first)"
        return f"seed {self.seed} (not derandomized: a rerun may draw other cases)"


@dataclass
class ExpectationsSide:
    expectations: Any  # conform.ci.expectations.Expectations

    @property
    def label(self) -> str:
        return f"expectations {self.expectations.path}"


def load_run(store, run_id: int) -> RunSide:
    run = queries.run(store, run_id)
    if run is None:
        raise ConformError(f"no run {run_id} in {store.where}")
    e = run.environment
    env = {
        k: str(getattr(e, k) or "")
        for k in ("torch_version", "torch_git", "python_version", "os", "os_version", "backend", "device_name")
    }
    side = RunSide(store, run.id, run.uuid, run.state, run.seed, dict(run.options or {}), env, {}, run.cells_planned)
    for key, r in queries.latest_cells(store, e.id, run_id).items():
        side.cells[key] = CellState(r.outcome, r.message or "", r.id)
    return side


def _run_id(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConformError(f"{what}: {text!r} is not a run id") from None


def resolve_baseline(spec: str, current_store, current_run: int):
    """A RunSide or ExpectationsSide for `--baseline SPEC`: a .toml expectations file, `run:ID`
    in the current database, or a database (path or URL) with `#ID` for one of its runs (else its
    newest run; the newest other than the current run when it is the current database)."""
    if not spec.strip():
        raise ConformError("--baseline is empty")
    if spec.lower().endswith(".toml"):
        return ExpectationsSide(expectations.load(spec))
    if spec.startswith("run:"):
        run_id = _run_id(spec[4:], "--baseline run:ID")
        if run_id == current_run:
            raise ConformError(f"--baseline {spec} is the run being gated; give an earlier run")
        return load_run(current_store, run_id)
    where, run_ref = spec, None
    head, sep, tail = spec.rpartition("#")
    if sep and tail.isdigit():
        where, run_ref = head, int(tail)
    if "://" not in where:
        p = Path(where)
        if p.is_file() and _looks_like_toml(p):
            return ExpectationsSide(expectations.load(p))
        if not p.exists():
            raise ConformError(
                f"baseline {where} does not exist (give an expectations .toml file, a database, or run:ID)"
            )
    same = database_url(where) == current_store.url or database_url(where) == database_url(current_store.where)
    store = current_store if same else Store(where, readonly=True, create=False)
    if run_ref is None:
        run_ref = queries.latest_run_id(store, other_than=current_run if same else None)
        if run_ref is None:
            raise ConformError(
                f"no run in {store.where} to use as the baseline" + (" other than the one being gated" if same else "")
            )
    elif same and run_ref == current_run:
        raise ConformError(f"--baseline {spec} is the run being gated; give an earlier run")
    return load_run(store, run_ref)


def _looks_like_toml(p: Path) -> bool:
    """Text that is not a database: a file named *.db or holding binary data is opened as a
    database, and refused as one ("not a readable conform database"), not parsed as TOML."""
    try:
        with open(p, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head.startswith(b"SQLite format 3") or p.suffix.lower() in (".db", ".sqlite", ".sqlite3") or b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start > len(head) - 4  # a character cut at the end of the block read
    return True


# -- comparing ----------------------------------------------------------------------------------


@dataclass
class CellVerdict:
    op: str
    dtype: str
    kind: str  # regression | stale | fixed | changed | expected | new
    expected: tuple[str, ...]  # what the baseline says (() for a new cell)
    outcome: str  # what the run measured
    message: str = ""  # the run's message for the cell
    reason: str = ""  # the expectation's reason, if one decided
    issue: str = ""
    where: str = ""  # FILE:LINE of the deciding [[expect]] entry
    baseline_message: str = ""
    result_id: int | None = None

    @property
    def cell(self) -> str:
        return f"{self.op}[{self.dtype}]"

    @property
    def expected_text(self) -> str:
        return " or ".join(self.expected) if self.expected else "-"


@dataclass
class GateResult:
    current: RunSide
    baseline: Any  # RunSide | ExpectationsSide
    cells: list[CellVerdict] = field(default_factory=list)
    new_ops: list[str] = field(default_factory=list)
    missing_ops: list[str] = field(default_factory=list)
    missing_cells: list[tuple[str, str]] = field(default_factory=list)  # baseline cells of ops that did run
    timing: list[Any] = field(default_factory=list)  # conform.timing.changes.TimingChange
    timing_note: str = ""
    notes: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[CellVerdict]:
        return [c for c in self.cells if c.kind == kind]

    @property
    def regressions(self) -> list[CellVerdict]:
        return self.of("regression")

    @property
    def compared(self) -> list[CellVerdict]:
        return [c for c in self.cells if c.kind != "new"]

    @property
    def failed(self) -> bool:
        return bool(self.regressions or self.timing)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0


def _classify(expected: tuple[str, ...], outcome: str) -> str:
    if outcome in expected:
        return "expected"
    if PASS in expected:
        return "regression"
    if outcome == PASS:
        return "fixed"
    return "changed"


def compare_with_baseline(current: RunSide, baseline, *, timing: bool = True, timing_pct: float = PCT) -> GateResult:
    """Every cell of the current run classified against the baseline (and, between two runs,
    the timing slowdowns): conform.judge.compare compares tensors, this compares runs."""
    result = GateResult(current, baseline)
    if isinstance(baseline, ExpectationsSide):
        _compare_expectations(result, current, baseline.expectations)
        result.timing_note = "timings not compared: the baseline is an expectations file (timings need a baseline run)"
    else:
        _compare_runs(result, current, baseline)
        if timing:
            result.timing, result.timing_note = timing_verdict(baseline, current, pct=timing_pct)
        else:
            result.timing_note = "timings not compared (--no-timing)"
    order = {"regression": 0, "changed": 1, "stale": 2, "fixed": 3, "new": 4, "expected": 5}
    result.cells.sort(key=lambda c: (order[c.kind], c.op, c.dtype))
    return result


def _compare_runs(result: GateResult, current: RunSide, base: RunSide) -> None:
    base_ops = {op for op, _ in base.cells}
    cur_ops = {op for op, _ in current.cells}
    for (op, dtype), cur in current.cells.items():
        b = base.cells.get((op, dtype))
        if b is None:
            result.cells.append(CellVerdict(op, dtype, "new", (), cur.outcome, cur.message, result_id=cur.result_id))
            continue
        kind = _classify((b.outcome,), cur.outcome)
        result.cells.append(
            CellVerdict(
                op,
                dtype,
                kind,
                (b.outcome,),
                cur.outcome,
                cur.message,
                baseline_message=b.message,
                result_id=cur.result_id,
            )
        )
    result.new_ops = sorted(cur_ops - base_ops)
    result.missing_ops = sorted(base_ops - cur_ops)
    result.missing_cells = sorted(k for k in base.cells if k[0] in cur_ops and k not in current.cells)
    if base.env.get("backend") != current.env.get("backend") or base.env.get("device_name") != current.env.get(
        "device_name"
    ):
        result.notes.append(f"the baseline ran on {base.describe_env()}; this run on {current.describe_env()}")


def _compare_expectations(result: GateResult, current: RunSide, ex) -> None:
    seen_ops = set()
    for (op, dtype), cur in current.cells.items():
        if not ex.covers(op, dtype):
            result.cells.append(CellVerdict(op, dtype, "new", (), cur.outcome, cur.message, result_id=cur.result_id))
            continue
        seen_ops.add(op)
        expected, entry = ex.expected(op, dtype, current.env)
        kind = _classify(expected, cur.outcome)
        if kind == "fixed":
            kind = "stale"
        v = CellVerdict(op, dtype, kind, expected, cur.outcome, cur.message, result_id=cur.result_id)
        if entry is not None:
            v.reason, v.issue, v.where = entry.reason, entry.issue, f"{ex.path}:{entry.line}"
        result.cells.append(v)
    result.new_ops = sorted({c.op for c in result.cells if c.kind == "new" and not ex.covers_op(c.op)})
    result.missing_ops = sorted(set(ex.named_ops()) - {op for op, _ in current.cells})


def timing_verdict(base: RunSide, current: RunSide, *, pct: float = PCT) -> tuple[list, str]:
    """The gate's view of timings: the significant slowdowns from the baseline run to this one
    (conform.timing.changes, over each side's own rows, so two databases compare as one does),
    and a note that says what was compared or why nothing could be."""
    counts = {side.label: queries.timing_count(side.store, side.run_id) for side in (base, current)}
    lacking = [label for label, n in counts.items() if not n]
    if lacking:
        return [], f"timings not compared: no timings in {' and '.join(lacking)} (`conform bench` records them)"
    base_rows, rows = queries.timings_of(base.store, base.run_id), queries.timings_of(current.store, current.run_id)
    found = slowdowns(base_rows, rows, pct=pct)
    unstable = sum(r.get("device_stable") is False for r in base_rows + rows)
    note = f"timings compared: {len(found)} slower beyond noise (> {pct:.0%} and outside both intervals)"
    return found, note + (f"; {unstable} unstable timings not compared" if unstable else "")


# -- reports ------------------------------------------------------------------------------------


def _count(n: int, kind: str) -> str:
    one, many = KIND_WORDS[kind]
    return f"{n} {one if n == 1 else many}"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _short_list(items: list[str], limit: int = 12) -> str:
    return ", ".join(items[:limit]) + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


def verdict_line(r: GateResult) -> str:
    if r.failed:
        parts = [_count(len(r.regressions), "regression")] if r.regressions else []
        if r.timing:
            parts.append(_plural(len(r.timing), "timing regression"))
        return "FAIL: " + ", ".join(parts)
    return "PASS: nothing regressed"


def render_text(r: GateResult) -> str:
    cur = r.current
    out = [
        f"gate: run {cur.run_id} ({cur.describe_env()}) against {r.baseline.label}: {_plural(len(r.compared), 'cell')} compared"
    ]
    for kind, how in (
        ("regression", lambda c: f"{c.cell} {c.expected_text} -> {c.outcome}: {first_line(c.message, 160)}"),
        ("changed", lambda c: f"{c.cell} {c.expected_text} -> {c.outcome}: {first_line(c.message, 160)}"),
        (
            "stale",
            lambda c: (
                f"{c.cell} expected {c.expected_text}{_why(c)}, now passes: remove or narrow the entry at {c.where or r.baseline.label}"
            ),
        ),
        ("fixed", lambda c: f"{c.cell} {c.expected_text} -> pass"),
    ):
        cells = r.of(kind)
        if cells:
            out.append(f"{_count(len(cells), kind)}:")
            out += [f"  {how(c)}" for c in cells]
    if r.new_ops:
        out.append(f"{_plural(len(r.new_ops), 'new op')} (not in the baseline, not gated): {_short_list(r.new_ops)}")
    new_cells = [c for c in r.of("new") if c.op not in set(r.new_ops)]
    if new_cells:
        out.append(
            f"{_plural(len(new_cells), 'new cell')} of known ops (not gated): {_short_list([c.cell for c in new_cells])}"
        )
    if r.missing_ops:
        out.append(f"{_plural(len(r.missing_ops), 'op')} of the baseline not in this run: {_short_list(r.missing_ops)}")
    if r.missing_cells:
        out.append(
            f"{_plural(len(r.missing_cells), 'cell')} of the baseline not in this run: {_short_list([f'{o}[{d}]' for o, d in r.missing_cells])}"
        )
    if r.timing:
        out.append(f"{_plural(len(r.timing), 'timing regression')}:")
        out += [f"  {t.describe()}" for t in r.timing]
    if r.timing_note:
        out.append(r.timing_note)
    out += [f"note: {n}" for n in r.notes]
    out.append(verdict_line(r))
    return "\n".join(out)


def _why(c: CellVerdict) -> str:
    bits = [b for b in (c.reason, c.issue) if b]
    return f" ({'; '.join(bits)})" if bits else ""


def _md_section(title: str, header: str, rows: list[str], intro: tuple[str, ...] = ()) -> list[str]:
    """Markdown lines: a heading, the `intro` lines, a table of `rows` under `header`, a blank line."""
    return [f"### {title}", "", *intro, header, "|" + "---|" * (header.count("|") - 1), *rows, ""]


def _md(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


# reproduction scripts, all together: room for one (about 57,000 characters, most of it the
# tensor builder verbatim) with the tables around it inside MAX_SUMMARY; the tables before them
# come out of it too, with REPROS_RESERVE left for the sections after them
MAX_REPROS_CHARS = 61_000
REPROS_RESERVE = 1_500
MAX_SUMMARY = 64_000  # GitHub refuses comments over 65,536 characters


def render_markdown(r: GateResult) -> str:
    cur = r.current
    icon = "❌" if r.failed else "✅"
    out = [
        f"## {icon} conform gate: {verdict_line(r)}",
        "",
        f"Run {cur.run_id} (`{cur.uuid[:8]}`) on {_md(cur.describe_env())} against {_md(r.baseline.label)}: "
        f"{_plural(len(r.compared), 'cell')} compared, {cur.describe_determinism()}.",
        "",
    ]
    kinds = Counter(c.kind for c in r.cells)
    out.append(
        "| "
        + " | ".join(
            k for k in ("regression", "changed", "stale", "fixed", "expected", "new") if k in kinds or k == "regression"
        )
        + " |"
    )
    shown = [
        k for k in ("regression", "changed", "stale", "fixed", "expected", "new") if k in kinds or k == "regression"
    ]
    out.append("|" + "---:|" * len(shown))
    out.append("| " + " | ".join(str(kinds.get(k, 0)) for k in shown) + " |")
    out.append("")
    regs = r.regressions
    if regs:
        out += [f"### {_count(len(regs), 'regression')}", "", "| cell | was | now | message |", "|---|---|---|---|"]
        out += [
            f"| `{c.cell}` | {c.expected_text} | **{c.outcome}** | {_md(first_line(c.message, 200))} |" for c in regs
        ]
        out.append("")
        budget = min(MAX_REPROS_CHARS, MAX_SUMMARY - REPROS_RESERVE - len("\n".join(out)))
        left_out = 0
        for c in regs:
            repro = queries.repro_of(cur.store, c.result_id).rstrip()
            if not repro:
                continue
            if len(repro) > budget:
                left_out += 1
                continue
            budget -= len(repro)
            out += [
                f"<details><summary>reproduce <code>{html.escape(c.cell)}</code></summary>",
                "",
                "```python",
                repro.replace("```", "`\u200b``"),
                "```",
                "",
                "</details>",
                "",
            ]
        if left_out:
            out += [
                f"Reproduction scripts of {_plural(left_out, 'other regression')}: `conform report --run {cur.run_id}`.",
                "",
            ]
    changed = r.of("changed")
    if changed:
        out += _md_section(
            f"{_count(len(changed), 'changed')} (failing before and now, differently)",
            "| cell | expected | now | message |",
            [f"| `{c.cell}` | {c.expected_text} | {c.outcome} | {_md(first_line(c.message, 200))} |" for c in changed],
        )
    stale = r.of("stale")
    if stale:
        out += _md_section(
            _count(len(stale), "stale"),
            "| cell | expected | entry | reason | issue |",
            [
                f"| `{c.cell}` | {c.expected_text} | `{_md(c.where)}` | {_md(c.reason)} | {_md(c.issue)} |"
                for c in stale
            ],
            intro=("These cells now pass: remove their entries (or narrow their dtypes or conditions).", ""),
        )
    fixed = r.of("fixed")
    if fixed:
        out += [
            f"### {_count(len(fixed), 'fixed')}",
            "",
            ", ".join(f"`{c.cell}` ({c.expected_text} -> pass)" for c in fixed),
            "",
        ]
    if r.new_ops or r.missing_ops or r.missing_cells:
        out += ["### Coverage changes", ""]
        if r.new_ops:
            out.append(
                f"- {_plural(len(r.new_ops), 'new op')} (not gated): " + _short_list([f"`{o}`" for o in r.new_ops], 30)
            )
        if r.missing_ops:
            out.append(
                f"- {_plural(len(r.missing_ops), 'op')} of the baseline not in this run: "
                + _short_list([f"`{o}`" for o in r.missing_ops], 30)
            )
        if r.missing_cells:
            out.append(
                f"- {_plural(len(r.missing_cells), 'cell')} of the baseline not in this run: "
                + _short_list([f"`{o}[{d}]`" for o, d in r.missing_cells], 30)
            )
        out.append("")
    if r.timing:
        out += [
            f"### {_plural(len(r.timing), 'timing regression')}",
            "",
            "| op | dtype | size | shape | before | now | change |",
            "|---|---|---|---|---:|---:|---:|",
        ]
        out += [
            f"| `{t.op}` | {t.dtype} | {t.size_label} | {list(t.shape)} | {t.old_s * 1e6:.1f} µs | {t.new_s * 1e6:.1f} µs | {(t.ratio - 1) * 100:+.0f}% |"
            for t in r.timing
        ]
        out.append("")
    footer = [r.timing_note] if r.timing_note else []
    footer += r.notes
    if footer:
        out += [f"<sub>{_md(n)}</sub><br>" for n in footer]
    text = "\n".join(out).rstrip() + "\n"
    if len(text) > MAX_SUMMARY:
        text = (
            text[: MAX_SUMMARY - 200].rsplit("\n", 1)[0]
            + "\n\n_(summary truncated; the full list: `conform gate` output or its JUnit XML)_\n"
        )
    return text


def junit_xml(r: GateResult) -> ET.ElementTree:
    """One test case per cell of the run (and per baseline op the run lacks, as skipped)."""
    suite = ET.Element("testsuite", name="conform gate")
    counts = Counter()
    for c in sorted(r.cells, key=lambda c: (c.op, c.dtype)):
        case = ET.SubElement(suite, "testcase", classname=c.op, name=c.dtype, time="0")
        counts["tests"] += 1
        if c.kind == "regression":
            counts["failures"] += 1
            f = ET.SubElement(
                case,
                "failure",
                message=f"regression: {c.expected_text} -> {c.outcome}: {first_line(c.message, 160)}",
                type=c.outcome,
            )
            f.text = c.message
        elif c.kind == "expected" and c.outcome != PASS:
            counts["skipped"] += 1
            ET.SubElement(
                case,
                "skipped",
                message=f"expected {c.outcome}: {c.reason or first_line(c.message, 160)}"
                + (f" ({c.issue})" if c.issue else ""),
            )
        elif c.kind == "new" and c.outcome != PASS:
            counts["skipped"] += 1
            ET.SubElement(
                case, "skipped", message=f"not in the baseline (not gated): {c.outcome}: {first_line(c.message, 160)}"
            )
        elif c.kind in ("stale", "fixed", "changed"):
            out = ET.SubElement(case, "system-out")
            if c.kind == "changed":
                out.text = f"changed failure (not gated): {c.expected_text} -> {c.outcome}: {c.message}"
            else:
                out.text = (
                    f"{'stale expectation' if c.kind == 'stale' else 'fixed'}: expected {c.expected_text}{_why(c)}, now passes"
                    + (f"; entry at {c.where}" if c.where else "")
                )
    for op in r.missing_ops:
        case = ET.SubElement(suite, "testcase", classname=op, name="*", time="0")
        counts["tests"] += 1
        counts["skipped"] += 1
        ET.SubElement(case, "skipped", message="in the baseline, not in this run")
    for t in r.timing:
        case = ET.SubElement(suite, "testcase", classname=f"timing.{t.op}", name=f"{t.dtype}.{t.size_label}", time="0")
        counts["tests"] += 1
        counts["failures"] += 1
        ET.SubElement(case, "failure", message=f"timing regression: {t.describe()}", type="timing")
    for k in ("tests", "failures", "skipped"):
        suite.set(k, str(counts[k]))
    suite.set("errors", "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.ElementTree(root)


# -- the command --------------------------------------------------------------------------------


def gate(
    baseline: str, *, db: str | None = None, run_id: int | None = None, timing: bool = True, timing_pct: float = PCT
) -> GateResult:
    """The Python side of `conform gate`: compare run `run_id` (default: the newest) of `db`
    with `baseline`. ConformError on bad input."""
    store = Store(db, readonly=True, create=False)
    if run_id is None:
        run_id = queries.latest_run_id(store)
        if run_id is None:
            raise ConformError(f"no run in {store.where} to gate")
    current = load_run(store, run_id)
    if current.state != "finished":
        raise ConformError(
            f"run {run_id} of {store.where} is {current.state} ({len(current.cells)} of {current.cells_planned} cells): "
            f"finish it (`conform run --resume {run_id}`) before gating it"
        )
    base = resolve_baseline(baseline, store, run_id)
    result = compare_with_baseline(current, base, timing=timing, timing_pct=timing_pct)
    if not result.compared:
        raise ConformError(f"nothing to compare: run {run_id} and {base.label} have no cell in common")
    if not current.options.get("derandomize"):
        result.notes.append(
            "this run was not derandomized: run it with `conform run --derandomize` so the same code gives the same verdict"
        )
    return result


# -- models (`conform gate --model SPEC`) --------------------------------------------------------

MODEL_PASSING = ("runs", "runs_with_fallback")


@dataclass
class ModelGateResult:
    """Each gated model's baseline and current verdict; a model that passed on the baseline and
    now fails or diverges is a regression."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["regression"]]

    @property
    def exit_code(self) -> int:
        return 1 if self.regressions else 0


def _model_verdicts(store, spec: str) -> list:

    return model_history(store, spec)


def model_gate(baseline: str, specs: list[str], *, db: str | None = None) -> ModelGateResult:
    """Compare the newest stored verdict of each model SPEC in `db` with `baseline` (a database
    path or URL: its newest verdict of the SPEC; the same database: the verdict before the newest)."""

    store = Store(db, readonly=True, create=False)
    where = baseline.rpartition("#")[0] if "#" in baseline else baseline
    same = database_url(where) == store.url or database_url(where) == database_url(store.where)
    if not same and "://" not in where and not Path(where).exists():
        raise ConformError(f"baseline {where} does not exist (give a database with stored model verdicts)")
    base_store = store if same else Store(where, readonly=True, create=False)
    result = ModelGateResult()
    for spec in specs:
        current = _model_verdicts(store, spec)
        if not current:
            raise ConformError(f"no verdict of model {spec!r} in {store.where}: run `conform model {spec}` first")
        base = _model_verdicts(base_store, spec)[1:] if same else _model_verdicts(base_store, spec)
        now = current[0]
        before = base[0] if base else None
        result.rows.append(
            {
                "model": spec,
                "baseline": before.verdict if before else None,
                "current": now.verdict,
                "regression": before is not None
                and before.verdict in MODEL_PASSING
                and now.verdict not in MODEL_PASSING,
                "why": _model_why(now),
            }
        )
    return result


def _model_why(row) -> str:
    if row.verdict == "fails" and row.fails_at:
        return f"fails at {row.fails_at.get('op')} in {row.fails_at.get('module') or 'the top level'}"
    if row.verdict == "diverges" and row.divergence:
        return f"diverges at {row.divergence.get('op')} in {row.divergence.get('module') or 'the top level'}"
    return ""


def render_model_gate(r: ModelGateResult) -> str:
    lines = []
    for row in r.rows:
        mark = "REGRESSION" if row["regression"] else "ok"
        why = f" ({row['why']})" if row["why"] else ""
        lines.append(f"{mark:<10} {row['model']}: {row['baseline'] or 'no baseline'} -> {row['current']}{why}")
    n = len(r.regressions)
    lines.append(
        f"gate failed: {_plural(n, 'model')} broken"
        if n
        else f"gate passed: {_plural(len(r.rows), 'model')}, none broken"
    )
    return "\n".join(lines)

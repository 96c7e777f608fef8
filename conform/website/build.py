"""`conform site`: the static website of stored results.

The output folder works from file:// and from any static host: every asset is local, and the
data the matrix and diff pages need comes as small `data/*.js` files that assign to
`window.CONFORM_DATA` (Chromium refuses fetch() from file://, but loads <script src>). Pages are
rendered with jinja2 with autoescaping on, and the JavaScript puts database strings into the page
with textContent only, so an error message holding `<script>` shows as text.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import jinja2

from conform import __version__
from conform.judge.references import origin_of
from conform.outcomes import SEVERITY
from conform.report.declared import BACKEND_KEYS, how_on
from conform.store import model_results
from conform.timing import changes
from conform.timing.changes import change_js, describe_rule
from conform.website import charts as site_charts
from conform.website import data as site_data
from conform.website.data import (
    CODES,
    DTYPE_ORDER,
    R_FINDINGS,
    R_OUTCOME,
    R_RUN,
    R_SKIP,
    SIZE_ORDER,
    T_DEV,
    T_DEV_STABLE,
    T_NUMEL,
    T_REF,
    T_REF_STABLE,
    SiteData,
)

CHUNK_OPS = 400  # ops per matrix data file: keeps each file small whatever the number of columns
MAX_TEXT = 20_000  # characters of one message / script / traceback shown on a page (the rest is said to be cut)
SLOWEST_PER_ENV = 100  # rows of the "slowest relative to the CPU" table per environment
DECLARED_CODES = {"kernel": "K", "structured_delegate": "K", "composite_explicit": "C", "composite_implicit": "D"}
DIFF_ROWS = 1000  # rows per section of a precomputed diff page; the interactive diff lists all


def site_files() -> Path:
    """The templates and static assets: installed as `conform.sitefiles`, or the repo's site/."""
    try:
        # a data folder without __init__.py is a namespace package: importlib.resources gives a
        # MultiplexedPath whose str() is no file path, so take the folder from the spec
        spec = importlib.util.find_spec("conform.sitefiles")
    except ModuleNotFoundError:
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        if (Path(location) / "templates").is_dir():
            return Path(location)
    here = Path(__file__).resolve().parents[2] / "site"  # conform/website/ -> the repository
    if (here / "templates").is_dir():
        return here
    raise FileNotFoundError("conform's site templates are missing (neither conform.sitefiles nor site/ was found)")


@dataclass
class BuildStats:
    out: str
    pages: int
    files: int
    bytes: int
    largest_page: tuple[str, int]
    largest_file: tuple[str, int]
    seconds: float
    environments: int
    ops: int
    cells: int


def _js_data(name: str, payload) -> str:
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    # inert inside any HTML context, should a file ever be inlined
    text = text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"window.CONFORM_DATA=window.CONFORM_DATA||{{}};window.CONFORM_DATA[{json.dumps(name)}]={text};\n"


def _cut(text: str | None, limit: int = MAX_TEXT) -> tuple[str, int]:
    """The text to show and how many characters were left out (shown on the page, never silent)."""
    text = text or ""
    return (text, 0) if len(text) <= limit else (text[:limit], len(text) - limit)


class Builder:
    def __init__(self, data: SiteData, out: Path):
        self.data = data
        self.out = out
        self.files = site_files()
        self.jinja = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(self.files / "templates")),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
            undefined=jinja2.StrictUndefined,
        )
        self.jinja.filters["seconds"] = lambda s: site_charts.fmt_seconds(s) if s else "–"
        self.jinja.filters["num"] = _num
        self.jinja.filters["pct"] = lambda x: f"{100 * x:.1f}%"
        self.jinja.globals.update(
            version=__version__,
            generated_at=data.generated_at,
            outcome_order=[o.value for o in SEVERITY],
            codes=CODES,
            cut=_cut,
            row_limit=DIFF_ROWS,
        )
        self.written: list[tuple[str, int]] = []
        self.changed: dict[int, bool] = {}
        self.timings_by_op: dict[int, list] = {}
        for e in data.envs:
            for k, t in e.timings.items():
                self.timings_by_op.setdefault(k[0], []).append((e, k, t))
        # declared beside measured, computed once: {declared env id: {op id: {key: how}}}
        self.declared_by_env = site_data.declared_by_env(data)
        self.declared_vs = {e.id: site_data.declared_vs_measured(data, self.declared_by_env, e) for e in data.envs}
        # run id -> its position in its environment's run list (what a matrix cell refers to)
        self.run_index = {r["id"]: i for e in data.envs for i, r in enumerate(e.runs)}

    # -- output ---------------------------------------------------------------------------

    def write(self, rel: str, text: str) -> None:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = text.encode("utf-8")
        path.write_bytes(raw)
        self.written.append((rel, len(raw)))

    def render(self, rel: str, template: str, **ctx) -> None:
        root = "../" * rel.count("/")
        self.write(rel, self.jinja.get_template(template).render(root=root, page=rel, **ctx))

    # -- the site ---------------------------------------------------------------------------

    def build(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        for old in ("ops", "data"):  # pages of ops or columns gone since the last build must not linger
            if (self.out / old).is_dir():
                shutil.rmtree(self.out / old)
        shutil.copytree(self.files / "static", self.out / "static", dirs_exist_ok=True)
        families = self.matrix_data()
        self.timing_data(families)
        self.write_index(families)
        self.render(
            "index.html", "index.html", envs=self.overview_rows(), declared=self.data.declared, title="Overview"
        )
        self.declared_pages()
        self.render("matrix.html", "matrix.html", families=families, envs=self.data.envs, title="Coverage matrix")
        diffs = [site_data.diff(self.data, a, b) for a, b in zip(self.data.envs, self.data.envs[1:])]
        for d in diffs:
            self.render(
                d.slug,
                "diff.html",
                diff=d,
                diffs=diffs,
                envs=self.data.envs,
                title=f"Diff {d.a.short_label} → {d.b.short_label}",
                timing_rule=describe_rule(),
            )
        self.render(
            "diff.html",
            "diff.html",
            diff=None,
            diffs=diffs,
            envs=self.data.envs,
            title="Diff",
            timing_rule=describe_rule(),
        )
        self.render("perf.html", "perf.html", perf=self.perf(), timing_pct=site_data.TIMING_PCT, title="Performance")
        self.render("op.html", "op.html", title="Op")
        self.render("findings.html", "findings.html", findings=site_data.findings(self.data), title="Findings")
        self.model_pages()
        for op in self.data.ops.values():
            self.write(f"data/op/{op.slug}.js", _js_data(f"op/{op.slug}", self.op_payload(op)))

    def referenced_share(self, env) -> float:
        """The share of the environment's exercised ops that have an independent reference
        (conform.judge.references): a second expectation that does not run the op's kernel."""

        exercised = {op for (op, _), row in env.cells.items() if row[site_data.R_EXAMPLES] > 0}
        if not exercised:
            return 0.0
        names = [self.data.ops[i].qualname for i in exercised if i in self.data.ops]
        return sum(bool(origin_of(q)) for q in names) / len(exercised)

    def overview_rows(self) -> list[dict]:
        rows = []
        for e in self.data.envs:
            counts = e.outcome_counts()
            total = sum(counts.values())
            rows.append(
                {
                    "env": e,
                    "counts": counts,
                    "cells": total,
                    "coverage": e.ops_exercised() / e.ops_total if e.ops_total else 0.0,
                    "referenced": self.referenced_share(e),
                    "pass": counts.get("pass", 0) / total if total else 0.0,
                    "timed": len({k[0] for k in e.timings}),
                    "vs": self.declared_vs.get(e.id),
                }
            )
        return rows

    def matrix_data(self) -> list[dict]:
        data = self.data
        by_family: dict[str, list] = {}
        for op in sorted(data.ops.values(), key=lambda o: o.qualname):
            by_family.setdefault(op.family, []).append(op)
        families = []
        from opdb import FAMILIES  # torch: the site is built without it

        describe = dict(FAMILIES)
        order = {name: i for i, (name, _) in enumerate(FAMILIES)}
        for fam in sorted(by_family, key=lambda f: (order.get(f, len(order)), f)):
            rows, summary = [], [Counter() for _ in data.envs]
            changed_n = 0
            for op in by_family[fam]:
                cells = [site_data.cell_codes(data, e, op.id) for e in data.envs]
                if all(c is None for c in cells) and data.envs:
                    continue  # an op known only from another column set: nothing to show
                ch = self.changed[op.id] = site_data.changed(data, op.id)
                changed_n += ch
                for i, e in enumerate(data.envs):
                    for d in data.dtypes:
                        r = e.cells.get((op.id, d))
                        if r is not None:
                            summary[i][r[R_OUTCOME]] += 1
                rows.append(
                    [
                        op.qualname,
                        op.slug,
                        op.variant,
                        int(ch),
                        cells,
                        [self.run_refs(e, op.id) if c is not None else None for e, c in zip(data.envs, cells)],
                        self.declared_codes(op.id),
                    ]
                )
            if not rows:
                continue
            chunks = []
            for k in range(0, len(rows), CHUNK_OPS):
                name = f"matrix-{fam}" if len(rows) <= CHUNK_OPS else f"matrix-{fam}-{k // CHUNK_OPS}"
                self.write(f"data/{name}.js", _js_data(name, {"family": fam, "ops": rows[k : k + CHUNK_OPS]}))
                chunks.append(name)
            families.append(
                {
                    "name": fam,
                    "description": describe.get(fam, ""),
                    "ops": len(rows),
                    "changed": changed_n,
                    "chunks": chunks,
                    "summary": [dict(c) for c in summary],
                    "timings": None,
                }
            )
        return families

    def declared_codes(self, op_id: int) -> str:
        """One character per column: how the release of its torch version declares the op on its
        backend's key. K kernel, C composite kernel, D decomposes, 0 not available, _ not in that
        release's yaml, . no release stored."""
        out = []
        for e in self.data.envs:
            vs = self.declared_vs[e.id]
            if vs is None:
                out.append(".")
                continue
            by_key = self.declared_by_env.get(vs["declared"].id, {}).get(op_id)
            out.append("_" if by_key is None else DECLARED_CODES.get(how_on(by_key, vs["dispatch_key"]), "0"))
        return "".join(out)

    def run_refs(self, env, op_id: int):
        """Which of the environment's runs each dtype's result came from: one index into
        index.envs[i].runs when all came from the same run, else one per dtype (null: untested)."""
        refs = [
            self.run_index[r[R_RUN]] if (r := env.cells.get((op_id, d))) is not None else None for d in self.data.dtypes
        ]
        found = {x for x in refs if x is not None}
        if len(found) <= 1:
            return found.pop() if found else None
        return refs

    def declared_pages(self) -> None:
        """declared.html: declared coverage per torch version and key (table and chart), and per
        measured environment what its release declares against what was measured; one
        declared-<env>.html per measured environment lists the ops."""
        data = self.data
        coverage = site_data.declared_coverage(data, self.declared_by_env)
        versions: list[dict] = []
        for r in coverage:
            if not versions or versions[-1]["id"] != r["environment_id"]:
                env = next(e for e in data.declared if e.id == r["environment_id"])
                versions.append({"id": r["environment_id"], "env": env, "total": r["ops_total"], "keys": {}})
            versions[-1]["keys"][r["dispatch_key"]] = {
                "kernel": r["ops_with_kernel"],
                "available": r["ops_with_kernel"] + r["ops_via_composite"],
            }
        series = []
        for key in BACKEND_KEYS:
            series.append((f"{key} kernels", [v["keys"][key]["kernel"] for v in versions], False))
        for key in BACKEND_KEYS:
            series.append((f"{key} incl. composite", [v["keys"][key]["available"] for v in versions], True))
        labels = [v["env"].torch_version for v in versions]
        chart = (
            site_charts.count_chart(
                series, labels, title="Ops with a kernel per dispatch key, by torch release (dashed: incl. composite)"
            )
            if versions
            else ""
        )
        pages = {}
        for e in data.envs:
            vs = self.declared_vs[e.id]
            if vs is None:
                continue
            page = f"declared-{e.key}.html"
            pages[e.id] = page
            self.render(
                page, "declared_env.html", env=e, vs=vs, ops=data.ops, title=f"Declared vs measured: {e.short_label}"
            )
        self.render(
            "declared.html",
            "declared.html",
            versions=versions,
            keys=BACKEND_KEYS,
            chart=chart,
            envs=data.envs,
            vs=self.declared_vs,
            pages=pages,
            title="Declared kernels",
        )

    def write_index(self, families: list[dict]) -> None:
        data = self.data
        index = {
            "envs": [
                e.to_json()
                | {
                    "runs": [
                        [
                            r["uuid"][:8],
                            r["started_at"].strftime("%Y-%m-%d %H:%M") if r["started_at"] else "",
                            r["state"],
                        ]
                        for r in e.runs
                    ]
                }
                | {
                    "declared": [vs["declared"].torch_version, vs["dispatch_key"]]
                    if (vs := self.declared_vs[e.id])
                    else None
                }
                for e in data.envs
            ],
            "has_declared": bool(data.declared),
            "dtypes": data.dtypes,
            "codes": {v: k for k, v in CODES.items()}
            | {site_data.UNKNOWN_CODE: "unknown", site_data.UNTESTED_CODE: "not tested"},
            "outcomes": [o.value for o in SEVERITY],
            "failing": sorted(site_data.FAILING_VALUES),
            "families": families,
            "has_timings": data.has_timings(),
            "generated_at": data.generated_at,
        }
        self.write("data/index.js", _js_data("index", index))

    def timing_data(self, families: list[dict]) -> None:
        """Device medians and IQRs per (op, dtype/size) per column, per family, and the rule of
        what counts as a change (conform.timing.changes): the diff page's timing changes for any
        two columns."""
        rule = f"{{describe:{json.dumps(describe_rule())},significant:{change_js()}}}"
        self.write(
            "data/timing-rule.js",
            f'window.CONFORM_DATA=window.CONFORM_DATA||{{}};window.CONFORM_DATA["timing-rule"]={rule};\n',
        )
        if not self.data.has_timings():
            return
        by_op: dict[int, list] = {}
        for i, e in enumerate(self.data.envs):
            for (op, d, size), t in e.timings.items():
                if t[T_DEV]:
                    # the median and its interval: conform.js tells a change from noise by the same rule
                    lo, hi = site_data.interval(t)
                    by_op.setdefault(op, [{} for _ in self.data.envs])[i][f"{d}/{size}"] = [t[T_DEV], lo, hi]
        per_family: dict[str, dict] = {}
        for op_id, per_env in by_op.items():
            op = self.data.ops[op_id]
            per_family.setdefault(op.family, {})[op.qualname] = per_env
        for fam in families:
            fam["timings"] = f"timings-{fam['name']}" if fam["name"] in per_family else None
            if fam["timings"]:
                self.write(f"data/{fam['timings']}.js", _js_data(fam["timings"], per_family[fam["name"]]))

    def op_payload(self, op) -> dict:
        """Everything op.html?op=<slug> shows for one op, as compact JSON: long texts (messages,
        scripts, tracebacks) are stored once per op and referred to by index."""
        data = self.data
        col = {e.key: i for i, e in enumerate(data.envs)}
        envs = data.op_envs(op.id)
        dtypes = [d for d in data.dtypes if any((op.id, d) in e.cells for e in envs)]
        texts: list = []
        seen: dict[str, int] = {}

        def text(value) -> int | None:
            if not value:
                return None
            if value not in seen:
                shown, left = _cut(value)
                seen[value] = len(texts)
                texts.append([shown, left])
            return seen[value]

        cells = []
        for e in envs:
            for d in dtypes:
                r = e.cells.get((op.id, d))
                if r is None:
                    continue
                f = data.failures.get(r[0]) if r[R_OUTCOME] != "pass" else None
                failure = None
                if f:
                    further = [
                        [m.get("outcome", ""), m.get("phase", ""), text(m.get("message", "")), text(m.get("repro", ""))]
                        for m in f[3]
                        if isinstance(m, dict)
                    ]
                    failure = [
                        text(f[1]),
                        text(f[2]),
                        text(json.dumps(f[0], indent=1)) if f[0] is not None else None,
                        further,
                    ]
                found = [
                    [f.get("kind", ""), f.get("phase", ""), text(f.get("message", ""))]
                    for f in (r[R_FINDINGS] or [])
                    if isinstance(f, dict)
                ]
                cells.append(
                    [
                        col[e.key],
                        d,
                        r[R_OUTCOME],
                        r[4],
                        r[5],
                        r[6],
                        r[7],
                        r[8],
                        r[9],
                        r[10],
                        r[11],
                        r[12],
                        r[13],
                        text(r[14]),
                        r[15],
                        failure,
                        self.run_index[r[R_RUN]],
                        found,
                        r[R_SKIP] or "",
                    ]
                )
        timed = self.timings_by_op.get(op.id, [])
        charts, timings = [], []
        for d in sorted(
            {k[1] for _, k, _ in timed}, key=lambda d: (DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 99, d)
        ):
            sizes = sorted({(t[T_NUMEL], SIZE_ORDER.get(k[2], 9), k[2]) for _, k, t in timed if k[1] == d})
            labels = [sz[2] for sz in sizes]
            series = []
            for e in envs:
                ys = [e.timings.get((op.id, d, sz)) for sz in labels]
                if any(ys):
                    series.append((e.short_label, [t[T_DEV] if t else None for t in ys]))
            ref = next((e for e in envs if any(e.timings.get((op.id, d, sz)) for sz in labels)), None)
            if ref is not None and ref.backend != "cpu":
                series.append(
                    (
                        f"CPU ({ref.short_label})",
                        [(ref.timings.get((op.id, d, sz)) or (None,) * 11)[T_REF] for sz in labels],
                    )
                )
            # build-time SVG: every label in it went through markupsafe.escape
            charts.append(
                str(
                    site_charts.line_chart(
                        series,
                        [f"{sz[2]} ({sz[0]:,})" for sz in sizes],
                        title=f"{op.short_name} {d}: device median time",
                    )
                )
            )
        for e, k, t in sorted(timed, key=lambda x: (col[x[0].key], x[1][1], x[2][T_NUMEL])):
            real = bool(t[T_DEV] and t[T_REF]) and changes.speedup_is_real(t._asdict(), pct=site_data.TIMING_PCT)
            timings.append(
                [
                    col[e.key],
                    k[1],
                    k[2],
                    t[3],
                    t[T_NUMEL],
                    t[T_DEV],
                    t[T_REF],
                    (t[T_REF] / t[T_DEV]) if real else None,
                    # why no speedup is shown (conform.timing.changes): the times are one within
                    # the noise, or one of them could not be made stable
                    ""
                    if real
                    else "unstable"
                    if t[T_DEV_STABLE] is False or t[T_REF_STABLE] is False
                    else "within noise"
                    if t[T_DEV] and t[T_REF]
                    else "",
                ]
            )
        return {
            "qualname": op.qualname,
            "family": op.family,
            "variant": op.variant,
            "tags": op.tags,
            "schema": op.schema,
            "changed": self.changed.get(op.id, False),
            "dtypes": dtypes,
            "envs": [col[e.key] for e in envs],
            "kernels": [[col[e.key], e.catalog.get(op.id), e.coverage_notes.get(op.id, "")] for e in envs],
            "declared": self.op_declared(op.id),
            "cells": cells,
            "texts": texts,
            "charts": charts,
            "timings": timings,
            # [model SPEC, the op's outcome in it, environment, model page slug]
            "models": self.models_by_op.get(op.qualname, []),
        }

    # -- models (conform model) -------------------------------------------------------------

    models: list = []  # (ModelRow, [ModelOpRow]) of the newest verdicts, set by build_site
    model_envs: dict = {}
    models_by_op: dict = {}

    def set_models(self, models, env_names: dict) -> None:
        self.models, self.model_envs = models, env_names
        self.models_by_op = {}
        for row, ops in models:
            for o in ops:
                self.models_by_op.setdefault(o.op, []).append(
                    [row.spec, o.outcome, env_names.get(row.environment_id, ""), model_slug(row)]
                )

    def model_pages(self) -> None:
        """models.html (models x environments) and one page per model verdict."""
        envs = sorted({row.environment_id for row, _ in self.models})
        matrix = {}
        for row, _ in self.models:
            matrix.setdefault(row.spec, {})[row.environment_id] = row
        self.render(
            "models.html",
            "models.html",
            matrix=matrix,
            envs=[(e, self.model_envs.get(e, str(e))) for e in envs],
            slug=model_slug,
            title="Models",
        )
        for row, ops in self.models:
            total = sum(o.device_s or 0.0 for o in ops)
            ordered = sorted(ops, key=lambda o: -(o.device_s or 0.0))
            self.render(
                f"models/{model_slug(row)}.html",
                "model.html",
                m=row,
                ops=ordered,
                total=total,
                env=self.model_envs.get(row.environment_id, ""),
                op_slugs={op.qualname: op.slug for op in self.data.ops.values()},
                title=row.spec,
            )

    def op_declared(self, op_id: int) -> dict:
        """Per declared release, oldest first: how the op reaches each backend key (null: the
        release does not have the op)."""
        rows = []
        for e in site_data.declared_in_order(self.data):
            by_key = self.declared_by_env.get(e.id, {}).get(op_id)
            rows.append([e.torch_version, None if by_key is None else [how_on(by_key, k) for k in BACKEND_KEYS]])
        return {"keys": list(BACKEND_KEYS), "releases": rows}

    def perf(self) -> list[dict]:
        out = []
        for e in self.data.envs:
            unstable = sum(1 for t in e.timings.values() if t[T_DEV_STABLE] is False or t[T_REF_STABLE] is False)
            sp = site_data.speedups(e)
            if not sp and not unstable:
                continue
            # a speedup within the noise is shown as none (conform.timing.changes)
            sp.sort(key=lambda x: x[3] if x[4] else 1.0)
            slowest = [
                {
                    "op": self.data.ops[op],
                    "dtype": d,
                    "t": t,
                    "speedup": s,
                    "real": real,
                    "device": site_data.interval(t, "device"),
                    "cpu": site_data.interval(t, "ref"),
                }
                for op, d, t, s, real in sp[:SLOWEST_PER_ENV]
            ]
            values = sorted(s if real else 1.0 for *_, s, real in sp)
            # the device under test is the CPU itself: its "speedup" over the CPU is noise by
            # construction, said so instead of drawn
            itself = e.backend == "cpu"
            out.append(
                {
                    "env": e,
                    "itself": itself,
                    "count": len(sp),
                    "unstable": unstable,
                    "median": values[len(values) // 2] if values else 1.0,
                    "slower": sum(1 for *_, s, real in sp if real and s < 1),
                    "faster": sum(1 for *_, s, real in sp if real and s > 1),
                    "chart": ""
                    if itself or not values
                    else site_charts.histogram(values, title=f"{e.label}: speedup per op and dtype (largest size)"),
                    "slowest": slowest,
                }
            )
        return out


def _num(x) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):  # a non-finite float stored in JSON ("inf")
        return x
    if isinstance(x, float):
        return f"{x:.3g}"
    return f"{x:,}"


def model_slug(row) -> str:
    """A file name for one model verdict: its SPEC, dtype, mode and environment."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", row.spec).strip("_")
    return f"{base}-{row.dtype}-{'train' if row.train else 'eval'}-{row.environment_id}"


def build_site(store, out: str | os.PathLike) -> BuildStats:
    started = time.perf_counter()
    data = site_data.load(store)
    b = Builder(data, Path(out))

    latest = model_results.latest_models(store)
    b.set_models([(r, model_results.model_ops(store, r.id)) for r in latest], model_results.environment_names(store))
    b.build()
    pages = [(r, n) for r, n in b.written if r.endswith(".html")]
    static = [(f"static/{p.name}", p.stat().st_size) for p in (Path(out) / "static").rglob("*") if p.is_file()]
    everything = b.written + static
    return BuildStats(
        out=str(out),
        pages=len(pages),
        files=len(everything),
        bytes=sum(n for _, n in everything),
        largest_page=max(pages, key=lambda x: x[1]),
        largest_file=max(everything, key=lambda x: x[1]),
        seconds=time.perf_counter() - started,
        environments=len(data.envs),
        ops=len(data.ops),
        cells=sum(len(e.cells) for e in data.envs),
    )

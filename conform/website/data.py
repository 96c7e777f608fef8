"""What the site shows, read from the store in a few bulk queries.

A full sweep is ~3,800 ops x 8 dtypes per environment; ten environments are ~300k results, so
everything here reads plain rows (no ORM objects) and keeps, per environment, only the newest
result of each cell: a later run's cell replaces an earlier one's, as in `conform report`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from conform import versions
from conform.outcomes import FAILING, SEVERITY
from conform.report import declared
from conform.store import Store, queries
from conform.store.queries import EnvironmentRow, OpRow, ResultRow, TimingRow
from conform.timing import changes

# One letter per outcome: the matrix data files stay small (a cell is one character per dtype).
CODES = {
    "pass": "P",
    "mismatch": "M",
    "grad_mismatch": "G",
    "meta_mismatch": "T",
    "not_implemented": "N",
    "fallback": "F",
    "unsupported_dtype": "U",
    "device_error": "E",
    "missing_error": "R",
    "crash": "C",
    "timeout": "H",
    "skipped": "S",
}
UNKNOWN_CODE = "X"  # an outcome this conform does not know (a newer conform wrote it)
UNTESTED_CODE = "-"
RANK = {o.value: i for i, o in enumerate(SEVERITY)}  # most severe first
FAILING_VALUES = frozenset(o.value for o in FAILING)
DTYPE_ORDER = [
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "none",
]
SIZE_ORDER = {"small": 0, "medium": 1, "large": 2}
# a timing changed between two environments, and a device time differs from the CPU's, by the one
# rule of conform.timing.changes: by more than this share, outside both intervals
TIMING_PCT = changes.PCT


def outcome_rank(outcome: str) -> int:
    return RANK.get(outcome, -1)  # unknown outcomes sort as the most severe: they need a look


def worst(outcomes) -> str | None:
    outcomes = list(outcomes)
    return min(outcomes, key=outcome_rank) if outcomes else None


@dataclass
class Env(EnvironmentRow):
    """An environment (a column of the site) with the newest of everything measured there."""

    runs: list[dict] = field(default_factory=list)
    catalog: dict[int, list] = field(default_factory=dict)  # op id -> declared kernels (newest run)
    coverage_notes: dict[int, str] = field(default_factory=dict)
    cells: dict[tuple[int, str], ResultRow] = field(default_factory=dict)  # (op id, dtype) -> result row
    timings: dict[tuple[int, str, str], TimingRow] = field(default_factory=dict)  # (op, dtype, size) -> row

    @property
    def key(self) -> str:
        """Short, stable, file-name safe."""
        return self.fingerprint[:10]

    @property
    def label(self) -> str:
        dev = self.device_name or self.backend
        return f"torch {self.torch_version} · {dev}"

    @property
    def short_label(self) -> str:
        return f"{self.torch_version} {self.backend}"

    @property
    def last_run_at(self) -> str:
        times = [r["started_at"] for r in self.runs if r["started_at"]]
        return max(times).strftime("%Y-%m-%d %H:%M") if times else ""

    @property
    def ops_total(self) -> int:
        return max([r["ops_total"] for r in self.runs] + [len(self.catalog)])

    def outcome_counts(self) -> Counter:
        return Counter(row[R_OUTCOME] for row in self.cells.values())

    def ops_exercised(self) -> int:
        return len({op for (op, _), row in self.cells.items() if row[R_EXAMPLES] > 0})

    def ops_tested(self) -> int:
        return len({op for op, _ in self.cells})

    def to_json(self) -> dict:
        counts = self.outcome_counts()
        total = sum(counts.values())
        return {
            "key": self.key,
            "kind": self.kind,
            "label": self.label,
            "torch": self.torch_version,
            "backend": self.backend,
            "device": self.device_name,
            "os": f"{self.os} {self.os_version}".strip(),
            "date": self.last_run_at,
            "ops_total": self.ops_total,
            "ops_exercised": self.ops_exercised(),
            "cells": total,
            "pass": counts.get("pass", 0),
        }


# result and timing rows: named tuples (conform.store.queries), indexed by position where speed counts
(R_ID, R_OP, R_DTYPE, R_OUTCOME, R_PHASE, R_EXAMPLES, R_PASSED, R_ABS, R_REL, R_ULP, R_RTOL, R_ATOL, R_DEV_GOLD, R_REF_GOLD,
 R_MESSAGE, R_DURATION, R_FINDINGS, R_SKIP, R_RUN) = range(len(ResultRow._fields))  # fmt: skip
(
    T_OP,
    T_DTYPE,
    T_SIZE,
    T_SHAPE,
    T_NUMEL,
    T_DEV,
    T_DEV_IQR,
    T_REF,
    T_REF_IQR,
    T_REPEATS,
    T_LAYOUT,
    T_RUN,
    T_DEV_LOW,
    T_DEV_HIGH,
    T_DEV_STABLE,
    T_REF_LOW,
    T_REF_HIGH,
    T_REF_STABLE,
) = range(len(TimingRow._fields))


@dataclass
class OpInfo(OpRow):
    slug: str = ""  # the file name of its page

    @property
    def short_name(self) -> str:
        return self.qualname.split("::", 1)[-1]


@dataclass
class SiteData:
    envs: list[Env]  # measured environments with results, in column order
    declared: list[Env]  # kind="declared" environments (kernels read from a release), if any
    ops: dict[int, OpInfo]
    dtypes: list[str]
    failures: dict[int, tuple]  # result id -> (case, repro, traceback, further failures)
    declared_kernels: dict[tuple[int, int], list[tuple[str, str]]]  # (env id, op id) -> [(key, how)]
    generated_at: str
    runs: dict[int, dict] = field(default_factory=dict)  # run id -> its row (uuid, started_at, state, ...)

    def op_envs(self, op_id: int) -> list[Env]:
        return [e for e in self.envs if op_id in e.catalog or any((op_id, d) in e.cells for d in self.dtypes)]

    def has_timings(self) -> bool:
        return any(e.timings for e in self.envs)


def _slugs(ops: dict[int, OpInfo]) -> None:
    """File names of op pages: the short name, plus a hash where two names differ only in case
    (they would collide on macOS and Windows file systems)."""
    seen: set[str] = set()
    for op in sorted(ops.values(), key=lambda o: o.qualname):
        slug = re.sub(r"[^A-Za-z0-9_.-]", "_", op.short_name) or "op"
        if slug.lower() in seen or slug.startswith("."):
            slug = f"{slug}-{hashlib.sha1(op.qualname.encode()).hexdigest()[:6]}"
        seen.add(slug.lower())
        op.slug = slug


def env_sort_key(e: Env):
    return (versions.sort_key(e.torch_version), e.device_name.lower(), e.backend, e.os, e.python_version, e.key)


def load(store: Store) -> SiteData:
    snap = queries.snapshot(store)
    ops = {r.id: OpInfo(**vars(r)) for r in snap.ops}
    _slugs(ops)
    envs: dict[int, Env] = {}
    for r in snap.environments:
        row = dataclasses.asdict(r)
        row.update({k: "" for k, v in row.items() if v is None})  # fields an older conform left empty
        envs[r.id] = Env(
            **row | {"kind": r.kind or "measured", "torch_version": r.torch_version or "?", "details": r.details or {}}
        )
    # the snapshot's rows come oldest run first: a later run's row of a cell replaces an earlier one's
    run_env: dict[int, int] = {}
    runs: dict[int, dict] = {}
    for r in snap.runs:
        run_env[r["id"]] = r["environment_id"]
        runs[r["id"]] = r
        envs[r["environment_id"]].runs.append(r)
    for row in snap.catalog:
        e = envs[run_env[row.run_id]]
        e.catalog[row.op_id] = list(row.kernels or [])
        if row.coverage:
            e.coverage_notes[row.op_id] = row.coverage
    dtypes: set[str] = set()
    for cell in snap.results:
        envs[run_env[cell.run_id]].cells[(cell.op_id, cell.dtype)] = cell
        dtypes.add(cell.dtype)
    failures = queries.failures(
        store, {cell.id for e in envs.values() for cell in e.cells.values() if cell.outcome != "pass"}
    )
    for t in snap.timings:
        envs[run_env[t.run_id]].timings[(t.op_id, t.dtype, t.size_label)] = t
    declared_kernels: dict[tuple[int, int], list] = defaultdict(list)
    for env_id, op_id, key, how in snap.declared_kernels:
        declared_kernels[(env_id, op_id)].append((key, how))
    measured = sorted((e for e in envs.values() if e.kind != "declared" and (e.runs or e.cells)), key=env_sort_key)
    declared_ids = {env_id for env_id, _ in declared_kernels}
    declared = sorted(
        (e for e in envs.values() if e.kind == "declared" and (e.id in declared_ids or e.runs)), key=env_sort_key
    )
    order = {d: i for i, d in enumerate(DTYPE_ORDER)}
    return SiteData(
        envs=measured,
        declared=declared,
        ops=ops,
        dtypes=sorted(dtypes, key=lambda d: (order.get(d, len(order)), d)),
        failures=failures,
        declared_kernels=dict(declared_kernels),
        runs=runs,
        generated_at=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


# -- derived views ---------------------------------------------------------------------------


def cell_codes(data: SiteData, env: Env, op_id: int) -> str | None:
    """One character per dtype, or None when the op is absent from that environment."""
    codes = []
    any_result = False
    for d in data.dtypes:
        row = env.cells.get((op_id, d))
        if row is None:
            codes.append(UNTESTED_CODE)
        else:
            any_result = True
            codes.append(CODES.get(row[R_OUTCOME], UNKNOWN_CODE))
    if not any_result and op_id not in env.catalog:
        return None
    return "".join(codes)


def changed(data: SiteData, op_id: int) -> bool:
    """True when some dtype of this op has different outcomes in two environments."""
    for d in data.dtypes:
        seen = {e.cells[(op_id, d)][R_OUTCOME] for e in data.envs if (op_id, d) in e.cells}
        if len(seen) > 1:
            return True
    return False


@dataclass
class Diff:
    a: Env
    b: Env
    newly_failing: list[tuple] = field(default_factory=list)  # (op, dtype, outcome a, outcome b)
    newly_passing: list[tuple] = field(default_factory=list)
    other_changes: list[tuple] = field(default_factory=list)
    new_ops: list[OpInfo] = field(default_factory=list)
    removed_ops: list[OpInfo] = field(default_factory=list)
    regressions: list[tuple] = field(default_factory=list)  # (op, dtype, size, time a, time b, ratio)
    improvements: list[tuple] = field(default_factory=list)

    @property
    def slug(self) -> str:
        return f"diff-{self.a.key}-{self.b.key}.html"


def diff(data: SiteData, a: Env, b: Env) -> Diff:
    """What changed from environment a to b. Timing changes follow conform.timing.changes, the
    rule the site's JavaScript also gets for the diff of any two columns."""
    out = Diff(a, b)
    for key, ra in a.cells.items():
        rb = b.cells.get(key)
        if rb is None or ra[R_OUTCOME] == rb[R_OUTCOME]:
            continue
        oa, ob = ra[R_OUTCOME], rb[R_OUTCOME]
        item = (data.ops[key[0]], key[1], oa, ob)
        if oa == "pass" and ob in FAILING_VALUES:
            out.newly_failing.append(item)
        elif oa in FAILING_VALUES and ob == "pass":
            out.newly_passing.append(item)
        else:
            out.other_changes.append(item)
    for items in (out.newly_failing, out.newly_passing, out.other_changes):
        items.sort(key=lambda x: (x[0].qualname, x[1]))
    ops_a = set(a.catalog) | {op for op, _ in a.cells}
    ops_b = set(b.catalog) | {op for op, _ in b.cells}
    out.new_ops = sorted((data.ops[i] for i in ops_b - ops_a), key=lambda o: o.qualname)
    out.removed_ops = sorted((data.ops[i] for i in ops_a - ops_b), key=lambda o: o.qualname)
    for key in sorted(
        set(a.timings) & set(b.timings), key=lambda k: (data.ops[k[0]].qualname, k[1], SIZE_ORDER.get(k[2], 9))
    ):
        ra, rb = a.timings[key], b.timings[key]
        ta, tb = ra[T_DEV], rb[T_DEV]
        if not ta or not tb or not changes.row_change(ra._asdict(), rb._asdict(), pct=TIMING_PCT):
            continue  # unstable on either side, or a difference within the noise
        item = (data.ops[key[0]], key[1], key[2], ta, tb, tb / ta)
        (out.regressions if tb > ta else out.improvements).append(item)
    out.regressions.sort(key=lambda x: -x[5])
    out.improvements.sort(key=lambda x: x[5])
    return out


def speedups(env: Env) -> list[tuple]:
    """Per (op, dtype): the speedup (CPU time / device time) at the largest size timed, and
    whether it is one (conform.timing.changes.speedup_is_real: else the two times are one within
    the noise). Unstable timings have no median and no speedup."""
    best: dict[tuple[int, str], tuple] = {}
    for (op, d, _), t in env.timings.items():
        if not t[T_DEV] or not t[T_REF]:
            continue
        cur = best.get((op, d))
        if cur is None or (t[T_NUMEL], SIZE_ORDER.get(t[T_SIZE], 0)) > (cur[T_NUMEL], SIZE_ORDER.get(cur[T_SIZE], 0)):
            best[(op, d)] = t
    return [
        (op, d, t, t[T_REF] / t[T_DEV], changes.speedup_is_real(t._asdict(), pct=TIMING_PCT))
        for (op, d), t in best.items()
    ]


def interval(t, side: str = "device") -> tuple[float, float] | None:
    """A timing row's interval on `side` (conform.timing.changes.interval)."""
    if side == "device":
        return changes.interval(t[T_DEV], t[T_DEV_IQR], t[T_DEV_LOW], t[T_DEV_HIGH])
    return changes.interval(t[T_REF], t[T_REF_IQR], t[T_REF_LOW], t[T_REF_HIGH])


# -- declared beside measured ------------------------------------------------------------------
# conform.report.declared's pure functions over the rows load() already holds, instead of re-reading the
# database once per environment.


def declared_by_env(data: SiteData) -> dict[int, dict[int, dict[str, str]]]:
    """{declared env id: {op id: {dispatch key: how}}}, as queries.declared_kernels has it by qualname."""
    out: dict[int, dict[int, dict[str, str]]] = {e.id: {} for e in data.declared}
    for (env_id, op_id), pairs in data.declared_kernels.items():
        by_key = out.setdefault(env_id, {}).setdefault(op_id, {})
        for key, how in pairs:
            if key:
                by_key[key] = how
    return out


def declared_coverage(data: SiteData, by_env: dict, *, keys=declared.BACKEND_KEYS) -> list[dict]:
    """declared.coverage_rows of every declared release, oldest first."""
    return [row for e in declared_in_order(data) for row in declared.coverage_rows(e, by_env.get(e.id, {}), keys)]


def declared_in_order(data: SiteData) -> list[Env]:
    return declared.in_release_order(data.declared)


def declared_vs_measured(data: SiteData, by_env: dict, env: Env) -> dict | None:
    """declared.beside_measured for one measured environment, by op id (ordered by qualname),
    with "declared" (the Env of its release) and "dispatch_key"; None without a declared release."""
    release = declared.release_for(declared_in_order(data), env.torch_version)
    if release is None:
        return None
    seen: dict[int, set[str]] = defaultdict(set)
    for (op_id, _), row in env.cells.items():
        seen[op_id].add(row[R_OUTCOME])
    outcomes = {op_id: seen[op_id] for op_id in sorted(seen, key=lambda i: data.ops[i].qualname)}
    key = declared.dispatch_key_of(env.backend)
    return {
        "declared": release,
        "dispatch_key": key,
        **declared.beside_measured(by_env.get(release.id, {}), outcomes, key),
    }


def findings(data: SiteData) -> list[dict]:
    """Every stored finding of the newest cells (conform.judge.verdict.FINDING_KINDS): facts about the
    CPU reference or the case that are no device's failure, reference findings first."""
    order = {"reference": 0, "cpu_wrong": 1, "precision_edge": 2}
    rows = []
    for e in data.envs:
        for (op_id, dtype), cell in e.cells.items():
            for f in cell[R_FINDINGS] or []:
                op = data.ops.get(op_id)
                if op is None or not isinstance(f, dict):
                    continue
                rows.append(
                    {
                        "env": e,
                        "op": op,
                        "dtype": dtype,
                        "outcome": cell[R_OUTCOME],
                        "kind": f.get("kind", ""),
                        "phase": f.get("phase", ""),
                        "message": f.get("message", ""),
                        "ref_golden_err": f.get("ref_golden_err"),
                        "device_golden_err": f.get("device_golden_err"),
                    }
                )
    rows.sort(key=lambda r: (order.get(r["kind"], 9), r["op"].qualname, r["dtype"], r["env"].key))
    return rows

"""Do the stored scripts of a sweep's alarm cells reproduce their verdicts?

For every alarm cell of a run (mismatch, grad_mismatch, meta_mismatch, device_error, crash,
timeout) this runs the cell's stored reproduction script (failures.repro) in a fresh Python
process with a time limit and compares what it shows with the stored outcome:

* a value verdict (mismatch, grad_mismatch, meta_mismatch, device_error): the script's last
  `verdict: <outcome>` line must name the stored outcome;
* `crash`: the script's process must die (a signal, or glibc's abort for a corrupted heap);
* `timeout`: the script must still be running at the time limit.

It writes a table (markdown, one row per cell: op, dtype, stored outcome, what the script
showed, reproduced or not, and the cell's message) and prints the reproduction rate. Classes of
noise found by reading the cells are in docs/evaluation/sweep_audit.md, with the real bugs' repros.

`--regenerate` rebuilds each script from the stored case with this checkout's conform/report/repro.py
first (the stored result's phase, tolerance and outcome): what a sweep made today would store.
`--rerun` instead judges each value alarm's stored case (failures.case: the minimal case) again
with this checkout's oracle on the plain CPU: what the verdict rule says of the same case now.
`--classify` labels each alarm cell by the audit catalog (docs/evaluation/audit/*.toml: one [[bug]]
entry per real kernel bug, one [[noise]] entry per noise class still present) as a real bug, noise
or unaudited, and prints the precision: real-bug cells over all alarm cells.

    python benchmarks/sweep_audit.py sweep/conform.db [--run ID] [--timeout 60] [--out table.md] [--only aten::gelu,...]
    python benchmarks/sweep_audit.py sweep/conform.db --rerun
    python benchmarks/sweep_audit.py sweep/conform.db --classify [--catalog docs/evaluation/audit]
    python benchmarks/sweep_audit.py sweep/conform.db --classify --sample 40 --sample-seed 2026

`--further` does any of these for the cells' further failures instead (failures.further_failures:
the failures of other kinds a cell found after its verdict), each as if it were a cell of its own.

`--sample N` keeps N alarm cells drawn by random.Random(sample_seed).sample from the alarm cells
sorted by (op, dtype): the same database and seed give the same cells, for a hand audit.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# the alarm outcomes (README's table of outcomes): every cell a backend developer must look at
ALARMS = ("mismatch", "grad_mismatch", "meta_mismatch", "missing_error", "device_error", "crash", "timeout")
_VERDICT = re.compile(r"^verdict: (\S+)", re.MULTILINE)


def sample_cells(cells: list[dict], n: int, seed: int) -> list[dict]:
    """n cells drawn reproducibly: random.Random(seed).sample over the cells sorted by (op, dtype, outcome)."""
    ordered = sorted(cells, key=lambda c: (c["op"], c["dtype"], c["outcome"]))
    return sorted(random.Random(seed).sample(ordered, min(n, len(ordered))), key=lambda c: (c["op"], c["dtype"]))


def alarm_cells(db: str, run: int | None, *, further: bool = False) -> list[dict]:
    """The run's alarm cells; with `further`, their further failures instead, each as a cell (the
    cell's op, dtype and family, the failure's own outcome, message, script and case)."""
    if not Path(db).is_file():
        sys.exit(f"sweep_audit: no database at {db}")
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        if run is None:
            run = c.execute("SELECT max(id) FROM runs").fetchone()[0]
        has_further = any(r[1] == "further_failures" for r in c.execute("PRAGMA table_info(failures)"))
        if further and not has_further:
            sys.exit(f"sweep_audit: {db} stores no further failures (made before conform looked for them)")
        marks = ",".join("?" * len(ALARMS))
        rows = c.execute(
            'SELECT o.qualname, r.dtype, r.outcome, r.message, f.repro, f."case", r.phase, r.rtol, r.atol, o.family, '
            + ("f.further_failures " if has_further else "NULL ")
            + "FROM results r JOIN ops o ON o.id = r.op_id "
            f"LEFT JOIN failures f ON f.result_id = r.id WHERE r.run_id = ? AND r.outcome IN ({marks}) ORDER BY r.outcome, o.qualname, r.dtype",
            (run, *ALARMS),
        ).fetchall()
    cells = []
    for q, d, o, m, s, c, p, rt, at, fam, more in rows:
        cell = {"op": q, "dtype": d, "outcome": o, "message": m, "repro": s or "", "case": c, "phase": p}
        cell |= {"rtol": rt, "atol": at, "family": fam}
        if not further:
            cells.append(cell)
            continue
        for f in (json.loads(more) if more else None) or ():
            if f["outcome"] in ALARMS:
                cells.append(
                    cell | {k: f[k] for k in ("outcome", "message", "repro", "phase")} | {"case": json.dumps(f["case"])}
                )
    return cells


def regenerate(cell: dict) -> str:
    """The cell's script as this checkout's repro.py writes it (the stored one without a case)."""
    if not cell["case"]:
        return cell["repro"]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from types import SimpleNamespace

    import opdb
    from conform.report.repro import repro_script
    from generators.case import Case

    case_json = json.loads(cell["case"])
    result = SimpleNamespace(
        outcome=cell["outcome"],
        phase=cell["phase"] or "forward",
        rtol=cell["rtol"],
        atol=cell["atol"],
        message=cell["message"] or "",  # names the independent reference where the verdict came from it
    )
    return repro_script(
        opdb.lookup(case_json.get("op") or cell["op"]),
        Case.from_json(case_json),
        "cpu",
        result=result,
        golden_is_expectation=True,
    )


def shown_by(script: str, timeout: float, folder: Path) -> tuple[str, str]:
    """(what the script showed: a verdict, 'died (signal N)', 'timeout', 'exit N', 'no script';
    the tail of its output)."""
    if not script.strip() or script.lstrip().startswith("# could not build"):
        return "no script", ""
    path = folder / "repro.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONFAULTHANDLER="0")
    env.pop("PYTHONPATH", None)  # the script needs torch only
    proc = subprocess.Popen(
        [sys.executable, str(path)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return "timeout", (out or "")[-400:]
    found = _VERDICT.findall(out or "")
    if proc.returncode < 0:
        return f"died (signal {-proc.returncode})", (out or "")[-400:]
    if found:
        return found[-1], (out or "")[-400:]
    return f"exit {proc.returncode}", (out or "")[-400:]


PROCESS_RUNS = 5


def replay(cell: dict, timeout: float, *, regenerated: bool = False) -> dict:
    """The cell with what its script showed (`shown`), whether that reproduces its verdict, and
    the output's tail. A script that does not reproduce runs again, in up to PROCESS_RUNS fresh
    processes: a kernel that reads memory it never wrote gives what that process's memory holds
    (to.prim_dtype's uninitialised dtype segfaults in about one process of three and raises
    "Unsupported TypeMeta" in the others; special_shifted_chebyshev_polynomial_w's result at NaN
    is the garbage of the first two processes of five), the same in every call of one process,
    so the script's own attempts do not help."""
    script = regenerate(cell) if regenerated else cell["repro"]
    for k in range(1, PROCESS_RUNS + 1):
        with tempfile.TemporaryDirectory(prefix="conform-audit-") as tmp:
            shown, tail = shown_by(script, timeout, Path(tmp))
        runs, ok = k, reproduced(cell["outcome"], shown)
        if ok or cell["outcome"] == "timeout":  # a timeout shows or not in its own time
            break
    if runs > 1:
        shown += f" (process {runs} of {PROCESS_RUNS})"
    return dict(cell, shown=shown, reproduced=ok, tail=tail)


def reproduced(outcome: str, shown: str) -> bool:
    if outcome == "crash":
        return shown.startswith("died")
    return shown == outcome


def rerun(cells: list[dict]) -> None:
    """The stored minimal case of each value alarm, judged again by this checkout's oracle."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import opdb
    from conform.backends import CPUBackend
    from conform.run.execute import run_case
    from generators.case import Case

    now = Counter()
    for cell in cells:
        if cell["outcome"] in ("crash", "timeout") or not cell["case"]:
            continue
        r = run_case(opdb.lookup(cell["op"]), Case.from_json(json.loads(cell["case"])), CPUBackend())
        outcome = getattr(r.outcome, "value", r.outcome)
        now[(cell["outcome"], outcome)] += 1
        print(
            f"{cell['op']} {cell['dtype']}: {cell['outcome']} -> {outcome}  {' '.join(r.message.split())[:200]}",
            flush=True,
        )
    for (was, is_now), n in sorted(now.items()):
        print(f"{was:14} -> {is_now:14} {n}")
    print(f"{sum(n for (w, i), n in now.items() if i == 'pass')} of {sum(now.values())} value alarms pass now")


# The audit catalog's format (docs/evaluation/audit/*.toml). `ops` are fnmatch globs on the qualname;
# `dtypes`, `outcomes` and `message` (a regex searched in the cell's message, whitespace collapsed)
# narrow an entry and may be left out.
_MATCH_KEYS = {"id", "ops", "dtypes", "outcomes", "message", "description"}
_KEYS = {
    "bug": _MATCH_KEYS | {"repro", "issue", "note"},
    "noise": _MATCH_KEYS | {"why_not_fixed", "note", "fixed"},  # fixed: the class no longer alarms on this code
}
_REQUIRED = {"bug": {"id", "ops", "description", "repro"}, "noise": {"id", "ops", "description", "why_not_fixed"}}


def load_catalog(folder: Path) -> list[dict]:
    """Every entry of folder/*.toml, [[bug]] entries before [[noise]] ones (file order within each):
    a cell takes the first entry that matches, so a real bug wins over a noise class."""
    files = sorted(folder.glob("*.toml"))
    if not files:
        sys.exit(f"sweep_audit: no audit catalog (*.toml) in {folder}")
    entries: dict[str, list[dict]] = {"bug": [], "noise": []}
    seen: dict[str, str] = {}
    for path in files:
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as e:
            sys.exit(f"sweep_audit: {path}: {e}")
        for kind in data:
            if kind not in _KEYS:
                sys.exit(f"sweep_audit: {path}: unknown table [[{kind}]] (use [[bug]] or [[noise]])")
        for kind, keys in _KEYS.items():
            for e in data.get(kind, []):
                where = f"{path.name} [[{kind}]] {e.get('id', '?')}"
                if set(e) - keys:
                    sys.exit(f"sweep_audit: {where}: unknown key(s) {sorted(set(e) - keys)}")
                if _REQUIRED[kind] - set(e):
                    sys.exit(f"sweep_audit: {where}: missing {sorted(_REQUIRED[kind] - set(e))}")
                if e["id"] in seen:
                    sys.exit(f"sweep_audit: {where}: id already used in {seen[e['id']]}")
                seen[e["id"]] = path.name
                try:
                    pattern = re.compile(e.get("message", ""))
                except re.error as err:
                    sys.exit(f"sweep_audit: {where}: bad message regex: {err}")
                entries[kind].append(dict(e, kind=kind, file=path.name, _re=pattern))
    return entries["bug"] + entries["noise"]


def matches(entry: dict, cell: dict) -> bool:
    op = cell["op"]
    if not any(fnmatch.fnmatchcase(op, g) or fnmatch.fnmatchcase(op.removeprefix("aten::"), g) for g in entry["ops"]):
        return False
    if "dtypes" in entry and cell["dtype"] not in entry["dtypes"]:
        return False
    if "outcomes" in entry and cell["outcome"] not in entry["outcomes"]:
        return False
    return not entry["_re"].pattern or bool(entry["_re"].search(" ".join((cell["message"] or "").split())))


def classify(cells: list[dict], catalog: list[dict]) -> list[dict]:
    """Each cell with its label: ('bug' | 'noise' | 'unaudited', entry id)."""
    out = []
    for cell in cells:
        entry = next((e for e in catalog if matches(e, cell)), None)
        out.append(dict(cell, label=entry["kind"] if entry else "unaudited", entry=entry["id"] if entry else ""))
    return out


def print_classes(rows: list[dict], catalog: list[dict], out: str | None, as_json: str | None) -> None:
    by_entry = Counter(r["entry"] for r in rows if r["entry"])
    by_label = Counter(r["label"] for r in rows)
    total = len(rows)
    for e in catalog:
        if by_entry[e["id"]]:
            print(f"{e['kind']:6} {by_entry[e['id']]:4}  {e['id']}: {' '.join(e['description'].split())[:100]}")
    for r in rows:
        if r["label"] == "unaudited":
            print(f"unaudited    {r['op']} {r['dtype']} {r['outcome']}")
    print(
        f"alarm cells {total}: real bugs {by_label['bug']}, noise {by_label['noise']}, unaudited {by_label['unaudited']}; "
        f"precision {by_label['bug']}/{total} = {100 * by_label['bug'] / max(1, total):.0f}%"
    )
    fixed = {e["id"] for e in catalog if e.get("fixed")}
    gone = sum(1 for r in rows if r["entry"] in fixed)
    if gone:
        left = total - gone
        print(
            f"noise in classes marked fixed: {gone} cells; without them {by_label['bug']}/{left} = "
            f"{100 * by_label['bug'] / max(1, left):.0f}% (a class marked fixed may leave a few cells behind: --rerun measures)"
        )
    if out:
        lines = ["| op | dtype | outcome | label | entry |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {r['op']} | {r['dtype']} | {r['outcome']} | {r['label']} | {r['entry']} |" for r in rows]
        Path(out).write_text("\n".join(lines) + "\n")
    if as_json:
        keep = ("op", "dtype", "outcome", "label", "entry")
        Path(as_json).write_text(json.dumps([{k: r[k] for k in keep} for r in rows], indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--run", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per script (a timeout cell must outlast it)")
    ap.add_argument("--out", default=None, help="markdown table (default: print only the summary)")
    ap.add_argument("--json", default=None, help="the rows as JSON")
    ap.add_argument("--only", default="", help="comma-separated qualnames")
    ap.add_argument("--family", default="", help="comma-separated op families (ops.family)")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--sample", type=int, default=0, help="keep N alarm cells drawn at random (after --only/--family)")
    ap.add_argument("--sample-seed", type=int, default=2026, help="the seed of --sample's draw")
    ap.add_argument(
        "--regenerate",
        action="store_true",
        help="rebuild each script from its stored case with this checkout's repro.py (a plain-CPU sweep)",
    )
    ap.add_argument(
        "--rerun", action="store_true", help="judge each value alarm's stored case again with this checkout's oracle"
    )
    ap.add_argument("--classify", action="store_true", help="label each alarm cell by the audit catalog")
    ap.add_argument(
        "--further", action="store_true", help="the cells' further failures instead of their verdicts, each as a cell"
    )
    ap.add_argument(
        "--catalog",
        default=str(Path(__file__).resolve().parents[1] / "docs" / "evaluation" / "audit"),
        help="folder of the audit *.toml files",
    )
    args = ap.parse_args()
    cells = alarm_cells(args.db, args.run, further=args.further)
    if args.only:
        keep = set(args.only.split(","))
        cells = [c for c in cells if c["op"] in keep]
    if args.family:
        families = set(args.family.split(","))
        cells = [c for c in cells if c["family"] in families]
    if args.sample:
        cells = sample_cells(cells, args.sample, args.sample_seed)
        print(f"sample of {len(cells)} alarm cells, seed {args.sample_seed}:")
        for c in cells:
            print(f"  {c['op']} {c['dtype']} {c['outcome']}")
    if args.rerun:
        rerun(cells)
        return
    if args.classify:
        catalog = load_catalog(Path(args.catalog))
        print_classes(classify(cells, catalog), catalog, args.out, args.json)
        return
    started = time.monotonic()

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        rows = list(pool.map(lambda cell: replay(cell, args.timeout, regenerated=args.regenerate), cells))
    took = time.monotonic() - started
    by_outcome = Counter(r["outcome"] for r in rows)
    ok = Counter(r["outcome"] for r in rows if r["reproduced"])
    lines = ["| op | dtype | stored | script shows | reproduced | message |", "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        msg = " ".join(r["message"].split())[:160].replace("|", "\\|")
        lines.append(
            f"| {r['op']} | {r['dtype']} | {r['outcome']} | {r['shown']} | {'yes' if r['reproduced'] else 'NO'} | {msg} |"
        )
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    if args.json:
        Path(args.json).write_text(
            json.dumps([{k: v for k, v in r.items() if k not in ("repro", "case")} for r in rows], indent=1)
        )
    for o in ALARMS:
        if by_outcome[o]:
            print(f"{o:14} {ok[o]:4} of {by_outcome[o]:4} reproduced")
    for r in rows:
        if not r["reproduced"]:
            print(f"  not reproduced: {r['op']} {r['dtype']} {r['outcome']}: script shows {r['shown']}")
    total = sum(by_outcome.values())
    print(f"{sum(ok.values())} of {total} alarm cells reproduced by their stored scripts ({took:.0f} s)")


if __name__ == "__main__":
    main()

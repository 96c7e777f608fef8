"""`conform coverage`: which catalog ops a run exercised, with how many valid cases, and why not.

An op is *exercised* when at least one of its cells ran examples (`examples_run > 0`: the CPU
reference accepted the input and both sides were compared). Its valid cases are the sum of
`examples_run` over its cells. An op that was not exercised gets the first reason that applies:

1. its cells' messages: an untestable rule ("untestable: ..."), a dispatch error of the CPU
   reference (no CPU kernel), or "no valid case: the CPU reference rejected all N generated
   inputs; first: <error>", or another outcome's message;
2. with no cell in the run: the op's untestable rule in the installed opdb, if any;
3. otherwise "not in this run's op selection".
"""

# Each op also gets a `status`, which the totals count against three denominators:
#
# - `catalog`: every op of the installed torch;
# - `runnable`: the ops that have a kernel, or a composite that decomposes into kernels, reachable
#   on this machine (opdb asks the dispatcher: `torch._C._dispatch_has_kernel_for_dispatch_key` for
#   the CPU, CPU-layout and composite keys), plus the TorchScript builtins, which the interpreter
#   runs; an op without one is "no kernel here";
# - `public functional` ops among the runnable ones.
#
# Among runnable ops, "untestable" (a property of the op, with its reason in opdb) is a verdict;
# "no valid case" is not: it is a generator defect, and the table lists those ops first.

from __future__ import annotations

import json
import re
from collections import Counter

from conform.judge.references import origin_of
from conform.outcomes import REFERENCE_CRASH as CRASH_SKIP
from conform.store import Store, queries

NOT_SELECTED = "not in this run's op selection"
_CPU_DISPATCH = re.compile(r"Could not run '[^']*' with arguments from the 'CPU' backend")


def is_public_functional(op: str, variant: str) -> bool:
    """Public functional overloads: the name has no leading underscore, the variant is functional."""
    return not op.split("::", 1)[-1].startswith("_") and variant == "functional"


def _reference_origin(qualname: str) -> str:
    try:
        return origin_of(qualname)
    except Exception:  # no opdb for this run's torch: none known
        return ""


def _rule_reason(qualname: str) -> str:
    try:
        import opdb  # torch: reports are read without it

        return opdb.lookup(qualname).rules.untestable
    except Exception:  # an op of another torch, or no opdb: the run's own record is all there is
        return ""


def _cell_reason(cells: list[tuple[str, ...]]) -> str:
    """Why cells (dtype, outcome, message, skip reason) ran no example: the most telling message among them."""
    from opdb.rules import NO_CPU_KERNEL_REASON  # torch: reports are read without it

    messages = [(c[1], c[2]) for c in cells]
    for _, m in messages:
        if m.startswith("untestable: "):
            return m[len("untestable: ") :]
    if messages and all(_CPU_DISPATCH.search(m) for _, m in messages):
        return NO_CPU_KERNEL_REASON
    for o, m in messages:
        if o != "skipped":
            return f"{o}: {m}" if m else o
    return messages[0][1] if messages and messages[0][1] else "no example ran"


def coverage(store: Store, run_id: int) -> dict:
    """{"run": id, "ops": [{"op", "family", "variant", "exercised", "valid_cases", "reason"}], "totals": {...}}."""
    ops = queries.catalog_of(store, run_id)
    results = queries.run_cells(store, run_id)
    cells: dict[str, list[tuple[str, ...]]] = {}
    valid: Counter = Counter()
    skips: dict[str, dict[str, list[str]]] = {}  # op -> skip reason kind -> dtypes
    for qualname, dtype, outcome, examples_run, message, skip_reason in results:
        cells.setdefault(qualname, []).append((dtype, outcome, message or "", skip_reason or ""))
        valid[qualname] += examples_run or 0
        if outcome == "skipped" and skip_reason:
            skips.setdefault(qualname, {}).setdefault(skip_reason, []).append(dtype)
    rows = []
    for qualname, family, variant, recorded in ops:
        n = valid.get(qualname, 0)
        if n > 0:
            reason = ""
        elif qualname in cells:
            reason = _cell_reason(cells[qualname])
        else:
            reason = _rule_reason(qualname) or recorded or NOT_SELECTED
        rows.append(
            {
                "op": qualname,
                "family": family,
                "variant": variant,
                "exercised": n > 0,
                "valid_cases": n,
                "reason": reason,
                "status": status(n, reason, cells.get(qualname)),
                # the second expectation that does not run the op's kernel (conform.judge.references)
                "reference": _reference_origin(qualname),
                **({"skipped": skips[qualname]} if qualname in skips else {}),
            }
        )
    # the defects first: an op this machine can run that got no valid case
    rows.sort(key=lambda r: r["status"] != NO_VALID_CASE)
    return {"run": run_id, "ops": rows, "totals": totals(rows)}


EXERCISED, NO_VALID_CASE, NO_KERNEL, UNTESTABLE = "exercised", "no valid case", "no kernel here", "untestable"
NOT_RUN, OTHER = "not selected", "other outcome"
# on an accelerator, the CPU reference (or float64 golden) died or hung before any case of the op
# passed (conform.plugin._reference_died): neither the device's failure nor a generator defect
REFERENCE_CRASH = "reference crash"
_NOT_RUNNABLE = (NO_KERNEL,)


def status(valid_cases: int, reason: str, cells: list[tuple[str, ...]] | None) -> str:
    """What an op's row says: exercised, no valid case (a generator defect), no kernel here,
    untestable (with the op's reason), not selected, reference crash (the CPU reference died on
    every cell that ran), or another outcome (crash, timeout, ...)."""
    from opdb.rules import NO_CPU_KERNEL_REASON  # torch: reports are read without it

    if valid_cases > 0:
        return EXERCISED
    if reason == NO_CPU_KERNEL_REASON:
        return NO_KERNEL
    if reason == NOT_SELECTED:
        return NOT_RUN
    if reason.startswith("no valid case"):
        return NO_VALID_CASE
    if cells is None or any(c[2].startswith("untestable: ") for c in cells):
        return UNTESTABLE  # an opdb rule, or the generator's reason (an argument type it cannot draw)
    if any(len(c) > 3 and c[3] == CRASH_SKIP for c in cells):
        return REFERENCE_CRASH
    return OTHER


def totals(rows: list[dict]) -> dict:
    pub = [r for r in rows if is_public_functional(r["op"], r["variant"])]
    done = sum(r["exercised"] for r in rows)
    pub_done = sum(r["exercised"] for r in pub)
    reasons = Counter(_reason_group(r["reason"]) for r in rows if not r["exercised"])
    runnable = [r for r in rows if r.get("status") not in _NOT_RUNNABLE]
    pub_runnable = [r for r in runnable if is_public_functional(r["op"], r["variant"])]
    statuses = Counter(r.get("status", OTHER) for r in rows)
    return {
        "ops": len(rows),
        "exercised": done,
        "exercised_pct": _pct(done, len(rows)),
        "public_functional": len(pub),
        "public_functional_exercised": pub_done,
        "public_functional_pct": _pct(pub_done, len(pub)),
        "runnable": len(runnable),
        "runnable_exercised": sum(r["exercised"] for r in runnable),
        "runnable_pct": _pct(sum(r["exercised"] for r in runnable), len(runnable)),
        "public_functional_runnable": len(pub_runnable),
        "public_functional_runnable_exercised": sum(r["exercised"] for r in pub_runnable),
        "public_functional_runnable_pct": _pct(sum(r["exercised"] for r in pub_runnable), len(pub_runnable)),
        "no_valid_case": statuses.get(NO_VALID_CASE, 0),
        "untestable": statuses.get(UNTESTABLE, 0),
        "no_kernel_here": statuses.get(NO_KERNEL, 0),
        "not_selected": statuses.get(NOT_RUN, 0),
        "reference_crash": statuses.get(REFERENCE_CRASH, 0),
        "other_outcome": statuses.get(OTHER, 0),
        "valid_cases": sum(r["valid_cases"] for r in rows),
        # exercised ops with an independent reference (NumPy, SciPy, a decomposition), of all exercised
        "independent_reference": sum(bool(r.get("reference")) for r in rows if r["exercised"]),
        "public_functional_independent_reference": sum(bool(r.get("reference")) for r in pub if r["exercised"]),
        "reasons": dict(reasons.most_common()),
        # skipped cells by kind: no CPU kernel for the dtype is not "no valid case was found"
        "skipped_cells": dict(
            Counter(kind for r in rows for kind, dts in r.get("skipped", {}).items() for _ in dts).most_common()
        ),
    }


def _pct(n: int, d: int) -> float:
    return round(100 * n / d, 1) if d else 0.0


def _reason_group(reason: str) -> str:
    """A reason without the numbers and quoted names that make every op's message unique."""
    reason = re.sub(r"all \d+ generated", "all N generated", reason)
    reason = re.sub(r"'aten::[^']*'", "'aten::…'", reason)
    return reason[:160]


REASON_WIDTH = 120  # characters of a reason in the table; --full and JSON give it whole


def render(report: dict, fmt: str, *, full: bool = False) -> str:
    if fmt == "json":
        return json.dumps(report, indent=1)
    rows = report["ops"]
    header = ["op", "family", "variant", "status", "valid", "reason"]
    cut = not full and any(len(r["reason"]) > REASON_WIDTH for r in rows)

    def reason(text: str) -> str:
        return text if full or len(text) <= REASON_WIDTH else text[: REASON_WIDTH - 1] + "…"

    table = [
        [r["op"], r["family"], r["variant"], r.get("status", ""), str(r["valid_cases"]), reason(r["reason"])]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *table)] if table else [len(h) for h in header]
    fmt_row = lambda r: "  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    t = report["totals"]
    lines = [fmt_row(header), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in table]
    lines += [
        "",
        f"run {report['run']}: {t['ops']} ops, {t['valid_cases']} valid cases",
        f"exercised, of the whole catalog:                          {t['exercised']} / {t['ops']} ({t['exercised_pct']}%)",
        f"exercised, of the ops with a kernel or composite here:     {t['runnable_exercised']} / {t['runnable']} ({t['runnable_pct']}%)",
        f"exercised, of the public functional ops among those:       {t['public_functional_runnable_exercised']} / "
        f"{t['public_functional_runnable']} ({t['public_functional_runnable_pct']}%)",
        f"public functional exercised, of the whole catalog's:       {t['public_functional_exercised']} / "
        f"{t['public_functional']} ({t['public_functional_pct']}%)",
        f"with an independent reference, of the exercised ops:      {t.get('independent_reference', 0)} / {t['exercised']}",
        f"  of the exercised public functional ops:                  "
        f"{t.get('public_functional_independent_reference', 0)} / {t['public_functional_exercised']}",
        f"no valid case (a generator defect: listed first above):    {t['no_valid_case']}",
        f"untestable by nature (the op's reason):                    {t['untestable']}",
        f"no kernel here (not counted among the runnable ops):       {t['no_kernel_here']}",
        f"the CPU reference crashed (on an accelerator; not the device's failure): {t.get('reference_crash', 0)}",
        f"not in this run's selection: {t['not_selected']}; another outcome (crash, timeout, ...): {t['other_outcome']}",
        "not exercised, by reason:",
    ]
    lines += [f"  {n:6d}  {reason}" for reason, n in t["reasons"].items()]
    if t.get("skipped_cells"):
        lines.append("skipped cells, by reason:")
        lines += [f"  {n:6d}  {_SKIP_WORDS.get(kind, kind)}" for kind, n in t["skipped_cells"].items()]
    if cut:
        lines.append(
            f"(reasons longer than {REASON_WIDTH} characters end in …: --full shows them whole, as does --format json)"
        )
    return "\n".join(lines)


_SKIP_WORDS = {
    "no_kernel": "no_kernel: the CPU reference has no kernel for the dtype",
    "no_valid_case": "no_valid_case: no generated input was valid",
    "untestable": "untestable: by rule or generator",
    "internal_error": "internal_error: conform failed",
    "reference_crash": "reference_crash: the CPU reference died or hung (on an accelerator)",
}

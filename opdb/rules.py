"""Per-op rules from the human-editable TOML files in `opdb/rules/`.

Each file is a table of tables; a key is a qualname ("aten::empty.memory_format") or a glob
matched against the qualname with `fnmatch` ("aten::sort*"). A key may also list alternatives in
braces, as shells do: "aten::log{,_}{,.*}" is "aten::log", "aten::log.*", "aten::log_" and "aten::log_.*"
(every overload of log and log_, but not log_softmax or logit). The fields map onto `OpRules`;
`reason` says why, kept with each field it explains. Precedence and automatic rules: below.
"""

# For example:
#
# ```toml
# ["aten::log{,_}{,.*}"]
# domain = "positive"
# reason = "log is real-valued only on (0, inf)"   # why; kept with the field it explains
#
# ["aten::mm"]
# tolerances = { float16 = [1e-2, 1e-2] }         # dtype name (or "*") -> [rtol, atol]
# tolerance_reason = "accumulation order differs between BLAS libraries"
# ```
#
# `reason` explains the entry; it becomes the `untestable` text when `untestable = true`, and is
# kept as `hints["reasons"][field]` for the other fields it set (`{"domain": "log is ..."}`), and
# as `hints["reasons"]["hints.<name>"]` for each hint it set, so a report can say why a domain, a
# nondeterminism or a reference was chosen.
#
# Precedence: files are read in name order, entries in file order. For each field, the most
# specific matching key wins: an exact qualname beats any glob, and among globs the one with more
# literal (non-wildcard) characters wins; on a tie the later entry wins. So `"aten::sort.stable"`
# overrides `"aten::sort*"`, and a later file can override an earlier one with the same key.
#
# Automatic rules, applied beneath every file (a file can override them):
#   - ops tagged `nondeterministic_seeded` get `nondeterminism = "seeded"`;
#   - ops without any CPU kernel in this build get `untestable` with NO_CPU_KERNEL_REASON (the CPU
#     reference, which every comparison needs, cannot run them); see `opdb.catalog`.
#
# TorchScript builtins that the dispatcher does not know are testable: `OpSpec.resolve` runs them in
# a one-node TorchScript graph (opdb.script). `untestable.toml` lists the few that cannot run.

from __future__ import annotations

import fnmatch
import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from opdb.hints import problems as hint_problems
from opdb.spec import OpRules, Tolerance

RULES_DIR = Path(__file__).with_name("rules")

DOMAINS = (
    "real",
    "positive",
    "nonnegative",
    "unit",
    "open_unit",
    "above_one",
    "above_minus_one",
    "no_poles",
    "probability",
    "nonzero",
    "small",
)
# what one argument's values may be (hints `argument_values`, opdb/rules/contracts.toml): a domain,
# or "sign" (-1 and 1 only, the labels of the margin and embedding losses)
ARGUMENT_VALUES = (*DOMAINS, "sign")
NONDETERMINISM = ("", "seeded", "uninitialized", "ties")
_FIELDS = ("domain", "tolerances", "tolerance_reason", "nondeterminism", "untestable", "hints", "exact", "reason")

TORCHSCRIPT_REASON = "TorchScript builtin on Python values, not a dispatcher operator: no backend kernel to test"
NO_CPU_KERNEL_REASON = "no CPU kernel in this build: the CPU reference cannot run it"


class RulesError(ValueError):
    """A rules file is malformed; the message names the file and key."""


def expand_braces(pattern: str) -> list[str]:
    """ "aten::log{,_}{,.*}" -> ["aten::log", "aten::log.*", "aten::log_", "aten::log_.*"]."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    return [x for alt in m.group(1).split(",") for x in expand_braces(head + alt + tail)]


@dataclass(frozen=True, eq=False)
class RuleEntry:
    pattern: str  # qualname or glob, braces already expanded
    fields: dict[str, Any]
    source: str  # "domains.toml"
    order: int  # global position (file name order, then file order)
    key: str = ""  # the key as written in the file

    @functools.cached_property
    def is_glob(self) -> bool:
        return any(c in self.pattern for c in "*?[")

    def specificity(self) -> tuple[int, int, int]:
        """Sort key, least specific first: globs before exact names, fewer literal characters first,
        then file order."""
        literal = len(re.sub(r"\*|\?|\[[^\]]*\]", "", self.pattern))
        return (0 if self.is_glob else 1, literal, self.order)

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """The glob as a regex over newline-delimited names ("\\naten::add\\n..."), group 1 the name.

        Anchoring on a literal "\\n" rather than ^ under re.M keeps the literal prefix ("\\naten::log")
        that lets the regex engine skip ahead."""
        return re.compile("\n(" + _glob_to_regex(self.pattern) + ")(?=\n)")

    def matches(self, qualname: str) -> bool:
        if self.is_glob:
            return fnmatch.fnmatchcase(qualname, self.pattern)
        return qualname == self.pattern


def _glob_to_regex(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        end = pattern.find("]", i + 2) if c == "[" else -1
        if c == "*":
            out.append(r"[^\n]*")
        elif c == "?":
            out.append(r"[^\n]")
        elif end != -1:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _line_of(text: str, key: str, field: str = "") -> int:
    """The line (from 1) of table `key` in a rules file's text, or of `field` within it; 0 if not found
    (tomllib gives values, not positions)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[") and key in line), None)
    if start is None:
        return 0
    if not field:
        return start + 1
    assign = re.compile(r"(^|[{,.\s])" + re.escape(field) + r"\s*=")
    for i in range(start + 1, len(lines)):
        if lines[i].lstrip().startswith("["):
            break
        if assign.search(lines[i]):
            return i + 1
    return start + 1


def _validate(source: str, key: str, fields: Any, text: str = "") -> dict[str, Any]:
    where = f"{source}: [{key!r}]"
    if not isinstance(fields, dict):
        raise RulesError(f"{where} must be a table")
    if not key.startswith("aten::"):
        raise RulesError(f"{where}: keys are qualnames or globs starting with 'aten::'")
    unknown = set(fields) - set(_FIELDS)
    if unknown:
        raise RulesError(f"{where}: unknown field(s) {sorted(unknown)}; known: {list(_FIELDS)}")
    out = dict(fields)
    if "domain" in out and out["domain"] not in DOMAINS:
        raise RulesError(f"{where}: domain {out['domain']!r} is not one of {DOMAINS}")
    if "nondeterminism" in out and out["nondeterminism"] not in NONDETERMINISM:
        raise RulesError(f"{where}: nondeterminism {out['nondeterminism']!r} is not one of {NONDETERMINISM}")
    if "untestable" in out:
        u = out["untestable"]
        if u is True:
            if not out.get("reason"):
                raise RulesError(f"{where}: untestable = true needs a reason")
            out["untestable"] = out["reason"]
        elif not isinstance(u, str) or not u:
            raise RulesError(f"{where}: untestable must be true (with reason) or a non-empty string")
    if "tolerances" in out:
        tols = {}
        for dtype, pair in out["tolerances"].items():
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair)):
                raise RulesError(f"{where}: tolerances.{dtype} must be [rtol, atol]")
            tols[dtype] = Tolerance(float(pair[0]), float(pair[1]))
        out["tolerances"] = tols
        if not out.get("tolerance_reason") and not out.get("reason"):
            raise RulesError(f"{where}: tolerances need a tolerance_reason")
    if "exact" in out and not isinstance(out["exact"], bool):
        raise RulesError(f"{where}: exact must be true or false")
    for field, problem in hint_problems(out["hints"]) if "hints" in out else ():
        line = _line_of(text, key, field or "hints")
        raise RulesError(f"{source}:{line}: [{key!r}]: {problem}" if line else f"{where}: {problem}")
    _validate_contracts(where, out.get("hints") or {})
    return out


def _validate_contracts(where: str, hints: dict[str, Any]) -> None:
    values = hints.get("argument_values", {})
    if not isinstance(values, dict) or any(v not in ARGUMENT_VALUES for v in values.values()):
        raise RulesError(f"{where}: argument_values maps argument names to one of {ARGUMENT_VALUES}")
    produced = hints.get("produced_by")
    if produced is not None and not (
        isinstance(produced, dict)
        and isinstance(produced.get("op"), str)
        and isinstance(produced.get("results"), dict)
        and all(isinstance(i, int) for i in produced["results"].values())
    ):
        raise RulesError(f"{where}: produced_by needs op = 'aten::name' and results = {{argument = result index}}")


def load_entries(directory: Path | str = RULES_DIR) -> tuple[RuleEntry, ...]:
    """All entries of all `*.toml` files under `directory`, in precedence order (file name, then file)."""
    entries: list[RuleEntry] = []
    for path in sorted(Path(directory).glob("*.toml")):
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise RulesError(f"{path.name}: {e}") from None
        for key, fields in data.items():
            checked = _validate(path.name, key, fields, text)
            order = len(entries)
            entries.extend(RuleEntry(p, checked, path.name, order, key) for p in expand_braces(key))
    return tuple(entries)


@functools.cache
def _default_entries() -> tuple[RuleEntry, ...]:
    return load_entries(RULES_DIR)


def matching_entries(qualnames: list[str], entries: tuple[RuleEntry, ...] | None = None) -> dict[str, list[RuleEntry]]:
    """For many ops at once: qualname -> the entries that match it, in increasing specificity.

    Each glob is one regex search over all names joined by newlines, which keeps the catalog's
    cold build fast (hundreds of patterns x thousands of ops).
    """
    if entries is None:
        entries = _default_entries()
    known = set(qualnames)
    blob = "\n" + "\n".join(qualnames) + "\n"
    hits: dict[str, list[RuleEntry]] = {}
    for e in entries:
        if e.is_glob:
            names = {m.group(1) for m in e.regex.finditer(blob)}
        else:
            names = {e.pattern} & known
        for name in names:
            hits.setdefault(name, []).append(e)
    for found in hits.values():
        found.sort(key=RuleEntry.specificity)
    return hits


def rules_for(
    qualname: str,
    tags: tuple[str, ...] = (),
    *,
    dispatcher: bool = True,
    entries: tuple[RuleEntry, ...] | None = None,
) -> OpRules:
    """The `OpRules` of one op: automatic rules, then matching file entries by increasing specificity."""
    return merge_rules(matching_entries([qualname], entries).get(qualname, []), tags, dispatcher=dispatcher)


def merge_rules(
    hits: list[RuleEntry], tags: tuple[str, ...] = (), *, dispatcher: bool = True, cpu_kernel: bool = True
) -> OpRules:
    """Automatic rules from the tags and kernels, overridden field by field by `hits` (least specific
    first). `dispatcher` is kept for callers; builtins outside the dispatcher are testable."""
    merged: dict[str, Any] = {}
    if "nondeterministic_seeded" in tags:
        merged["nondeterminism"] = "seeded"
    if not cpu_kernel:
        merged["untestable"] = NO_CPU_KERNEL_REASON
    hints: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for e in hits:
        for k, v in e.fields.items():
            if k == "hints":
                hints.update(v)
            elif k == "reason":
                for explained in e.fields.keys() - {"reason", "untestable"}:
                    reasons[explained] = v
                # and each hint's own, since several files set hints of one op ("hints" keeps the last)
                for name in e.fields.get("hints", {}):
                    reasons[f"hints.{name}"] = v
            else:
                merged[k] = v
    if reasons:
        hints["reasons"] = reasons
    if hints:
        merged["hints"] = hints
    return OpRules(**merged) if merged else _EMPTY


_EMPTY = OpRules()

"""Expectations files: what a backend is expected to do, cell by cell, in TOML a person edits.

In the spirit of PyTorch's MPS xfail lists: the ops a file covers are expected to pass, except
the cells an `[[expect]]` entry names, which carry the outcome they are known to have, why, the
issue that tracks it, and the conditions under which that holds; the last matching entry wins.
The file format, version ranges and errors (FILE:LINE, exit 2): docs/ci.md, "Expectations files".
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from conform import versions
from conform.errors import ConformError, first_line
from conform.outcomes import Outcome
from conform.store import queries

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli is tomllib's original, with the same API and messages
    import tomli as tomllib  # type: ignore[no-redef]

OUTCOMES = tuple(o.value for o in Outcome)

# Dtype names a cell can have ("none": an op without tensor arguments), and the aliases torch
# accepts for some of them. Listed here rather than read from torch: loading a file must stay fast.
DTYPES = (
    "float32", "float64", "float16", "bfloat16", "complex32", "complex64", "complex128",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
    "qint8", "quint8", "qint32", "quint4x2", "quint2x4", "none",
)  # fmt: skip
DTYPE_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16", "cfloat": "complex64", "cdouble": "complex128",
    "chalf": "complex32", "short": "int16", "int": "int32", "long": "int64",
}  # fmt: skip

DEFAULT_KEYS = {"expected", "ops", "dtypes"}
ENTRY_KEYS = {"op", "dtypes", "outcome", "reason", "issue", "torch", "os_version", "os", "chip", "backend"}
RANGE_CONDITIONS = {"torch": "torch_version", "os_version": "os_version"}  # entry key -> environment field
GLOB_CONDITIONS = {"os": "os", "chip": "device_name", "backend": "backend"}


class ExpectationsError(ConformError):
    """A malformed expectations file; the message starts with "FILE:LINE:"."""


# -- version ranges -----------------------------------------------------------------------------

_CLAUSE = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9][0-9A-Za-z.+*-]*)\s*$")


@dataclass(frozen=True)
class VersionRange:
    """A range such as ">=2.1,<2.5": packaging's specifiers, held against a version's numeric
    release (versions.release), so that local labels and nightlies count as their release."""

    text: str
    spec: SpecifierSet

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        for raw in text.split(","):
            m = _CLAUSE.match(raw)
            if not m or not versions.release(m.group(2).rstrip(".*")):
                raise ValueError(f"{raw.strip()!r} is not a version clause such as '>=2.1' or '==2.13.*'")
            op, version = m.groups()
            if "*" in version and (op not in ("==", "!=") or not version.endswith(".*")):
                raise ValueError(f"{raw.strip()!r}: a wildcard is only allowed at the end, after == or !=")
        try:
            return cls(text, SpecifierSet(text))
        except InvalidSpecifier as e:
            raise ValueError(str(e)) from None

    def contains(self, version: str) -> bool:
        have = versions.release(version)
        if not have:
            return False  # an unknown version satisfies no range
        return self.spec.contains(".".join(map(str, have)), prereleases=True)


# -- the file ----------------------------------------------------------------------------------


def qualify(name: str) -> str:
    return name if "::" in name else f"aten::{name}"


def canonical_dtype(name: str) -> str | None:
    name = name.strip().removeprefix("torch.")
    name = DTYPE_ALIASES.get(name, name)
    return name if name in DTYPES else None


@dataclass
class Expectation:
    """One `[[expect]]` entry."""

    op: str  # qualified name or glob
    outcomes: tuple[str, ...]
    dtypes: tuple[str, ...] | None = None  # None: every dtype
    reason: str = ""
    issue: str = ""
    conditions: dict[str, Any] = field(default_factory=dict)  # key -> VersionRange or glob str
    line: int = 0

    def matches_cell(self, op: str, dtype: str) -> bool:
        return fnmatch.fnmatchcase(op, self.op) and (self.dtypes is None or dtype in self.dtypes)

    def applies_to(self, env: dict[str, str]) -> bool:
        for key, cond in self.conditions.items():
            if key in RANGE_CONDITIONS:
                if not cond.contains(str(env.get(RANGE_CONDITIONS[key], ""))):
                    return False
            elif not fnmatch.fnmatchcase(str(env.get(GLOB_CONDITIONS[key], "")), cond):
                return False
        return True

    @property
    def outcome(self) -> str:
        return " or ".join(self.outcomes)

    def describe(self) -> str:
        where = f"{self.op}[{','.join(self.dtypes) if self.dtypes else '*'}]"
        return f"{where} expected {self.outcome}" + (f" ({self.reason})" if self.reason else "")


@dataclass
class Expectations:
    path: str
    default: str = Outcome.PASS.value  # covered cells with no entry ([defaults] expected)
    ops: tuple[str, ...] = ()  # covered ops: qualified names or globs
    dtypes: tuple[str, ...] | None = None  # covered dtypes; None: all
    entries: list[Expectation] = field(default_factory=list)

    def covers_op(self, op: str) -> bool:
        return any(fnmatch.fnmatchcase(op, pattern) for pattern in self.ops)

    def covers(self, op: str, dtype: str) -> bool:
        return self.covers_op(op) and (self.dtypes is None or dtype in self.dtypes)

    def expectation(self, op: str, dtype: str, env: dict[str, str]) -> Expectation | None:
        """The entry that decides this cell in this environment (the last match), if any."""
        found = None
        for e in self.entries:
            if e.matches_cell(op, dtype) and e.applies_to(env):
                found = e
        return found

    def expected(self, op: str, dtype: str, env: dict[str, str]) -> tuple[tuple[str, ...], Expectation | None]:
        """The outcomes expected of a covered cell, and the entry that says so (None: the default)."""
        e = self.expectation(op, dtype, env)
        return (e.outcomes, e) if e is not None else ((self.default,), None)

    def named_ops(self) -> list[str]:
        """Covered ops named exactly (not by a glob): those can be missed when absent from a run."""
        return [o for o in self.ops if not any(ch in o for ch in "*?[")]


def load(path: str | Path) -> Expectations:
    """Read and validate an expectations file; ExpectationsError ("FILE:LINE: ...") if malformed."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ExpectationsError(f"cannot read expectations file {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ExpectationsError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    return loads(text, str(path))


def loads(text: str, path: str = "<expectations>") -> Expectations:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ExpectationsError(_toml_error(path, e, text)) from None
    lines = _Lines(text, path)
    unknown = set(doc) - {"defaults", "expect"}
    if unknown:
        key = sorted(unknown)[0]
        raise lines.error(
            lines.table_line(key) or lines.key_line(key),
            f"unknown table or key {key!r} (expected [defaults] and [[expect]] entries)",
        )

    out = Expectations(path=path)
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise lines.error(lines.key_line("defaults"), "'defaults' must be a table: [defaults]")
    dline = lines.table_line("defaults")
    for key in sorted(set(defaults) - DEFAULT_KEYS):
        raise lines.error(
            lines.key_line(key, dline),
            f"unknown key {key!r} in [defaults] (allowed: {', '.join(sorted(DEFAULT_KEYS))})",
        )
    if "expected" in defaults:
        out.default = _outcomes(defaults["expected"], lines, lines.key_line("expected", dline), single=True)[0]
    if "dtypes" in defaults:
        out.dtypes = _dtypes(defaults["dtypes"], lines, lines.key_line("dtypes", dline))
    entries = doc.get("expect", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise lines.error(lines.key_line("expect"), "'expect' must be an array of tables: [[expect]]")
    for i, raw in enumerate(entries):
        out.entries.append(_entry(raw, lines, lines.entry_line(i)))
    if "ops" in defaults:
        ops_line = lines.key_line("ops", dline)
        ops = defaults["ops"]
        if not isinstance(ops, list) or not all(isinstance(o, str) and o.strip() for o in ops):
            raise lines.error(
                ops_line, '\'ops\' must be a list of op names or globs, e.g. ["aten::add.Tensor", "aten::sum*"]'
            )
        out.ops = tuple(dict.fromkeys(qualify(o.strip()) for o in ops))
    else:
        out.ops = tuple(dict.fromkeys(e.op for e in out.entries))
    return out


def _toml_error(path: str, e: tomllib.TOMLDecodeError, text: str) -> str:
    # tomllib says where as "(at line 3, column 9)" or "(at end of document)"
    msg = str(e)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", msg)
    if m:
        return f"{path}:{m.group(1)}: {msg[: m.start()]} (column {m.group(2)})"
    m = re.search(r"\s*\(at end of document\)\s*$", msg)
    if m:
        return f"{path}:{max(len(text.splitlines()), 1)}: {msg[: m.start()]} (at the end of the file)"
    return f"{path}: {msg}"


class _Lines:
    """Finds the line of a table, an [[expect]] entry or a key in the raw text, for messages."""

    _HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?")

    def __init__(self, text: str, path: str):
        self.path = path
        self.lines = text.splitlines()
        self.headers = [
            (i + 1, m.group(1).strip("\"' "), l.lstrip().startswith("[["))
            for i, l in enumerate(self.lines)
            if (m := self._HEADER.match(l))
        ]

    def error(self, line: int, message: str) -> ExpectationsError:
        return ExpectationsError(f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}")

    def table_line(self, name: str) -> int:
        return next((n for n, h, _ in self.headers if h == name), 0)

    def entry_line(self, index: int) -> int:
        found = [n for n, h, array in self.headers if h == "expect" and array]
        return found[index] if index < len(found) else self.key_line("expect")

    def key_line(self, key: str, start: int = 0) -> int:
        """The line of `key = ...` in the table that starts at line `start` (0: the top level)."""
        end = next((n for n, _, _ in self.headers if n > start), len(self.lines) + 1)
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        for n in range(start + 1 if start else 1, end):
            if pattern.match(self.lines[n - 1]):
                return n
        return start


def _outcomes(value, lines: _Lines, line: int, *, single: bool = False) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if (
        not isinstance(values, list)
        or not values
        or not all(isinstance(v, str) for v in values)
        or (single and len(values) != 1)
    ):
        want = "an outcome name" if single else "an outcome name or a list of them"
        raise lines.error(line, f"expected {want} ({', '.join(OUTCOMES)}), got {value!r}")
    for v in values:
        if v not in OUTCOMES:
            close = difflib.get_close_matches(v, OUTCOMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(OUTCOMES)})"
            raise lines.error(line, f"unknown outcome {v!r}{hint}")
    return tuple(dict.fromkeys(values))


def _dtypes(value, lines: _Lines, line: int) -> tuple[str, ...] | None:
    if value == "*":
        return None
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise lines.error(
            line, f'\'dtypes\' must be "*" or a list of dtype names such as ["float16", "bfloat16"], got {value!r}'
        )
    out = []
    for v in values:
        name = canonical_dtype(v)
        if name is None:
            close = difflib.get_close_matches(v, DTYPES, n=1)
            raise lines.error(line, f"unknown dtype {v!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
        out.append(name)
    return tuple(dict.fromkeys(out))


def _entry(raw: dict, lines: _Lines, line: int) -> Expectation:
    for key in sorted(set(raw) - ENTRY_KEYS):
        raise lines.error(
            lines.key_line(key, line), f"unknown key {key!r} in [[expect]] (allowed: {', '.join(sorted(ENTRY_KEYS))})"
        )
    for key in ("op", "outcome"):
        if key not in raw:
            raise lines.error(line, f"[[expect]] entry without {key!r}")
    op = raw["op"]
    if not isinstance(op, str) or not op.strip():
        raise lines.error(
            lines.key_line("op", line), f"'op' must be an op name or glob such as \"aten::add.Tensor\", got {op!r}"
        )
    e = Expectation(
        op=qualify(op.strip()), outcomes=_outcomes(raw["outcome"], lines, lines.key_line("outcome", line)), line=line
    )
    if "dtypes" in raw:
        e.dtypes = _dtypes(raw["dtypes"], lines, lines.key_line("dtypes", line))
    for key in ("reason", "issue"):
        if key in raw:
            if not isinstance(raw[key], str):
                raise lines.error(lines.key_line(key, line), f"'{key}' must be a string, got {raw[key]!r}")
            setattr(e, key, raw[key].strip())
    for key in (*RANGE_CONDITIONS, *GLOB_CONDITIONS):
        if key not in raw:
            continue
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise lines.error(lines.key_line(key, line), f"'{key}' must be a string, got {value!r}")
        if key in RANGE_CONDITIONS:
            try:
                e.conditions[key] = VersionRange.parse(value)
            except ValueError as err:
                raise lines.error(lines.key_line(key, line), f"bad version range for '{key}': {err}") from None
        else:
            e.conditions[key] = value.strip()
    return e


# -- writing one from a run ---------------------------------------------------------------------


def from_run(store, run_id: int) -> str:
    """An expectations file (TOML text) that expects exactly what run `run_id` measured: its ops
    and dtypes are the covered set, and each non-pass cell gets an entry, grouped per (op, outcome)."""
    run = queries.run(store, run_id)
    if run is None:
        raise ConformError(f"no run {run_id} in {store.where}")
    env = run.environment
    cells = queries.latest_cells(store, env.id, run_id)
    if not cells:
        raise ConformError(f"run {run_id} of {store.where} has no results to write expectations from")
    groups: dict[tuple[str, str], list] = {}
    for (op, dtype), r in sorted(cells.items()):
        if r.outcome != Outcome.PASS.value:
            groups.setdefault((op, r.outcome), []).append((dtype, r.message))

    doc = tomlkit.document()
    doc.add(tomlkit.comment("conform expectations: what this backend is expected to do, cell by cell."))
    doc.add(tomlkit.comment("Written by `conform expectations --from-run`; edit freely (see conform/expectations.py)."))
    doc.add(
        tomlkit.comment(
            f"run: {run.id} ({run.uuid}) of {store.where}, {run.state}, started {run.started_at.isoformat(timespec='seconds')}"
        )
    )
    where = f"{env.backend} ({env.device_name or '?'}), {env.os} {env.os_version}, Python {env.python_version}"
    doc.add(tomlkit.comment(f"environment: torch {env.torch_version} on {where}"))
    doc.add(tomlkit.comment("options: " + ", ".join(f"{k}={v}" for k, v in sorted((run.options or {}).items()))))
    defaults = tomlkit.table()
    expected = tomlkit.item("pass").comment("covered cells without an [[expect]] entry")
    expected.trivia.comment_ws = "  "
    defaults.add("expected", expected)
    defaults.add("dtypes", sorted({dt for _, dt in cells}))
    # one op a line, so that a diff of the file shows which op changed (tomlkit's own multi-line
    # arrays indent by four, and adding 3,800 lines one by one takes it seconds)
    defaults.add(
        "ops",
        tomlkit.array(
            "[\n" + "".join(f"  {tomlkit.string(op).as_string()},\n" for op in sorted({op for op, _ in cells})) + "]"
        ),
    )
    doc.add(tomlkit.nl())
    doc.add("defaults", defaults)
    entries = tomlkit.aot()
    for (op, outcome), items in groups.items():
        reasons = list(dict.fromkeys(first_line(m, 200) for _, m in items))
        entries.append(tomlkit.table().add("op", op).add("dtypes", [d for d, _ in items]).add("outcome", outcome)
                       .add("reason", reasons[0] if len(reasons) == 1 else "; ".join(reasons[:3])).add("issue", ""))  # fmt: skip
    if entries:
        doc.add("expect", entries)
    return tomlkit.dumps(doc)


# -- the command --------------------------------------------------------------------------------

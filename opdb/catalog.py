"""The catalog: one `OpSpec` per `aten::` schema of the installed torch.

Schemas come from `torch._C._jit_get_all_schemas()`. Each is parsed with torchgen's
`FunctionSchema` (the native_functions.yaml grammar), which gives native argument types
("ScalarType?", "int[2]", "SymInt[]"), out arguments and the functional / inplace / out kind.
About 300 TorchScript builtins on Python values ("aten::append.t", "aten::len.Dict_float") are
outside that grammar; their arguments come from the JIT schema and `parsed` is False.
"""

# `kernels` lists the dispatch keys of `KERNEL_KEYS` that have a kernel registered in *this
# process*. It describes the install, not the operator: a CPU-only build does not register the CUDA,
# MPS or XPU kernels, so those keys are absent there even for ops that have them in a CUDA or macOS
# build (the torch 2.13 CPU wheel shows two strays: aten::_foreach_mm on CUDA and
# aten::linalg_lu_solve.out on MPS). Ask the device under test, not this field, what it implements.
# TorchScript-only builtins (not known to the c10 dispatcher) have no kernels at all.

from __future__ import annotations

import difflib
import fnmatch
import functools
import hashlib
import os
import pickle
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import torch

from opdb.families import FAMILY_NAMES, family_of
from opdb.rules import RULES_DIR, matching_entries, merge_rules
from opdb.spec import VARIANTS, ArgSpec, OpSpec

KERNEL_KEYS = (
    "CPU",
    "CUDA",
    "MPS",
    "XPU",
    "Meta",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "Autograd",
    "SparseCPU",
    "QuantizedCPU",
    "NestedTensorCPU",
)


class UnknownOpError(ValueError):
    """An op name, pattern or op-list file that selects nothing; the message is one line."""


# ---------------------------------------------------------------------------------------------
# building


def _split_top_level(text: str) -> list[str]:
    """Split "a, b(c, d), e[1, 2]" at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


_ALIAS_RX = re.compile(r"\((?:[a-z]+!?|\*)(?:\s*\|\s*[a-z]+!?)*(?:\s*->\s*[a-z*]+!?)?\)")


def _argument_texts(schema) -> list[str]:
    """The argument declarations of a schema string: ["Tensor self", "Scalar alpha=1", ...]."""
    text = str(schema)
    arg_text = text[text.index("(") + 1 : text.rindex(") ->")]
    pieces = [p for p in _split_top_level(arg_text) if p not in ("*", "...")]  # "..." is varargs
    if len(pieces) != len(schema.arguments):
        raise AssertionError(f"cannot split the arguments of {text}")
    return pieces


def _defaults(schema) -> dict[str, str]:
    """Default literals as torch prints them ("[1, 1]", "None", "1"), by argument name."""
    return {
        a.name: piece.partition("=")[2].strip()
        for a, piece in zip(schema.arguments, _argument_texts(schema))
        if a.has_default_value()
    }


def _jit_arguments(schema) -> tuple[ArgSpec, ...]:
    """ArgSpecs of a schema torchgen cannot parse, spelled as the JIT schema string spells them."""
    args = []
    for jit_arg, piece in zip(schema.arguments, _argument_texts(schema)):
        decl, _, default = piece.partition("=")
        type_text = decl.strip().rsplit(" ", 1)[0]
        if jit_arg.alias_info is not None:
            matches = list(_ALIAS_RX.finditer(type_text))
            if matches:
                m = matches[-1]
                type_text = type_text[: m.start()] + type_text[m.end() :]
        is_write = bool(jit_arg.alias_info is not None and jit_arg.alias_info.is_write)
        args.append(
            ArgSpec(
                name=jit_arg.name,
                type=type_text,
                default=default.strip() if jit_arg.has_default_value() else None,
                kwarg_only=jit_arg.kwarg_only,
                is_write=is_write,
                is_out=bool(is_write and jit_arg.kwarg_only and jit_arg.name.startswith("out")),
            )
        )
    return tuple(args)


def _native_arguments(fs, defaults: dict[str, str]) -> tuple[ArgSpec, ...]:
    a = fs.arguments
    n_positional = len(a.flat_positional)
    out_ids = {id(x) for x in a.out}
    args = []
    for i, arg in enumerate(a.flat_all):
        args.append(
            ArgSpec(
                name=arg.name,
                type=str(arg.type),
                default=defaults.get(arg.name),
                kwarg_only=i >= n_positional,
                is_write=bool(arg.annotation is not None and arg.annotation.is_write),
                is_out=id(arg) in out_ids,
            )
        )
    return tuple(args)


_LIST_DEFAULT_RX = re.compile(r"=\[[^\]]*\]")


def _native_return(r) -> str:
    t = str(r.type)
    if r.annotation is not None:
        t = t.replace("Tensor", f"Tensor({r.annotation})", 1)
    return t


def _variant_of_jit(name: str, args: tuple[ArgSpec, ...]) -> str:
    if any(a.is_out for a in args):
        return "out"
    if name.endswith("_") and args and args[0].is_write:
        return "inplace"
    return "functional"


def _in_dispatcher(name: str, overload: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(name, overload)
    except RuntimeError:
        return False
    return True


def _kernels(qualname: str, keys=KERNEL_KEYS) -> tuple[str, ...]:
    """The dispatch keys among `keys` with a kernel registered for `qualname` in this install."""
    found = []
    for key in keys:
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key):
                found.append(key)
        except (RuntimeError, ValueError):
            pass
    return tuple(found)


# keys whose kernel runs on the CPU, for some input layout (a composite decomposes into CPU kernels)
_CPU_KEYS = (
    "CPU",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "SparseCPU",
    "SparseCsrCPU",
    "QuantizedCPU",
    "NestedTensorCPU",
    "MkldnnCPU",
)


def _cpu_keys(qualname: str) -> tuple[str, ...]:
    return _kernels(qualname, _CPU_KEYS)


def _without_cpu_kernel(names: list[tuple[str, str, bool]]) -> set[str]:
    """Qualnames of dispatcher ops that no CPU kernel can run in this build: no CPU, CPU-layout or
    composite kernel; or an out= overload whose only kernel is the generic CompositeExplicitAutograd
    wrapper around a functional overload that has none (cudnn_*.out, _philox_*.out, ...).
    `names` is (qualname, base name, is an out= overload) for every dispatcher op."""
    keys = {q: _cpu_keys(q) for q, _, _ in names}
    none = {q for q, k in keys.items() if not k}
    bases_without = {b for q, b, out in names if q in none and not out}
    bases_with = {b for q, b, out in names if q not in none and not out}
    for q, b, out in names:
        if out and keys[q] == ("CompositeExplicitAutograd",) and b in bases_without and b not in bases_with:
            none.add(q)
    return none


def _tags(base_name: str, overload: str) -> tuple[str, ...]:
    try:
        op = getattr(getattr(torch.ops.aten, base_name), overload or "default")
        return tuple(sorted(t.name for t in op.tags))
    except (AttributeError, RuntimeError):
        return ()


def _build(schema, rule_hits, no_cpu: set[str] = frozenset()) -> OpSpec:
    from torchgen.model import FunctionSchema, SchemaKind

    name, overload = schema.name, schema.overload_name
    base = name[len("aten::") :]
    qualname = f"{name}.{overload}" if overload else name
    text = str(schema)
    try:
        # torch prints list defaults as "[1, 1]"; torchgen's grammar (native_functions.yaml) wants "[1,1]"
        fs = FunctionSchema.parse(_LIST_DEFAULT_RX.sub(lambda m: m.group(0).replace(" ", ""), text[len("aten::") :]))
    except Exception:  # torchgen raises AssertionError / RuntimeError for grammar it lacks
        fs = None
    if fs is not None:
        arguments = _native_arguments(fs, _defaults(schema))
        returns = tuple(_native_return(r) for r in fs.returns)
        kind = fs.kind()
        # SchemaKind.mutable (writes an input that is not self, e.g. running stats) stays functional:
        # ArgSpec.is_write says which arguments it mutates.
        variant = {SchemaKind.out: "out", SchemaKind.scratch: "out", SchemaKind.inplace: "inplace"}.get(
            kind, "functional"
        )
    else:
        arguments = _jit_arguments(schema)
        returns = tuple(str(r.type) for r in schema.returns)
        variant = _variant_of_jit(base, arguments)
    dispatcher = _in_dispatcher(name, overload)
    tags = _tags(base, overload)
    return OpSpec(
        name=name,
        overload=overload,
        schema=text,
        arguments=arguments,
        returns=returns,
        variant=variant,
        tags=tags,
        family=family_of(name, tags, text, dispatcher=dispatcher),
        kernels=_kernels(qualname) if dispatcher else (),
        parsed=fs is not None,
        rules=merge_rules(rule_hits.get(qualname, []), tags, dispatcher=dispatcher, cpu_kernel=qualname not in no_cpu),
    )


def _build_catalog(schemas) -> tuple[OpSpec, ...]:
    qualnames = [f"{s.name}.{s.overload_name}" if s.overload_name else s.name for s in schemas]
    rule_hits = matching_entries(qualnames)
    no_cpu = _without_cpu_kernel(
        [
            (q, s.name, any(a.is_out for a in s.arguments))
            for q, s in zip(qualnames, schemas)
            if _in_dispatcher(s.name, s.overload_name)
        ]
    )
    specs = [_build(s, rule_hits, no_cpu) for s in schemas]
    specs.sort(key=lambda s: s.qualname)
    return tuple(specs)


# The built catalog is kept on disk: building it parses every schema with torchgen and asks the
# dispatcher about each kernel, 1-2 s of CPU that the controller, each worker and the fork server
# of every `conform run` paid again. The key holds all that the build reads: the torch build, the
# aten schemas and the kernel registrations of this process (a library that registers ops or
# kernels changes them), the rules files and opdb's own code. CONFORM_CATALOG_CACHE names
# another folder, or "off" (docs/ci.md, "Caches").
CACHE_ENV = "CONFORM_CATALOG_CACHE"


def _cache_file(schemas) -> Path | None:
    setting = os.environ.get(CACHE_ENV, "")
    if setting.lower() in ("off", "0", "no", "false"):
        return None
    folder = (
        Path(setting)
        if setting
        else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "conform" / "catalog"
    )
    h = hashlib.sha256()
    for part in (torch.__version__, torch.version.git_version, torch.__file__, sys.version):
        h.update(f"{part}\n".encode())
    h.update("\n".join(map(str, schemas)).encode())
    for key in dict.fromkeys(KERNEL_KEYS + _CPU_KEYS):
        h.update(f"\n[{key}]\n".encode())
        h.update("\n".join(sorted(torch._C._dispatch_get_registrations_for_dispatch_key(key))).encode())
    here = Path(__file__).parent
    for path in sorted(here.glob("*.py")) + sorted(RULES_DIR.glob("*.toml")):
        h.update(f"\n{path.name}\n".encode())
        h.update(path.read_bytes())
    return folder / f"{torch.__version__.replace('+', '-')}-{h.hexdigest()[:24]}.pickle"


@functools.cache
def _catalog() -> tuple[OpSpec, ...]:
    schemas = [s for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")]
    try:
        path = _cache_file(schemas)
    except (OSError, RuntimeError):
        path = None
    if path is not None:
        try:
            cached = pickle.loads(path.read_bytes())
            if isinstance(cached, tuple) and all(isinstance(s, OpSpec) for s in cached):
                return cached
        except Exception:  # noqa: BLE001 - absent, damaged or from an older OpSpec: built again
            pass
    specs = _build_catalog(schemas)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # written whole under another name, then renamed: a reader never sees half a file
            data = pickle.dumps(specs, protocol=pickle.HIGHEST_PROTOCOL)
            with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as f:
                f.write(data)
            os.replace(f.name, path)
        except OSError:
            pass  # a read-only or full disk: the catalog is built each time, as before
    return specs


def catalog() -> list[OpSpec]:
    """Every `aten::` overload of the installed torch, sorted by qualname (built once, then cached)."""
    return list(_catalog())


@functools.cache
def _index() -> dict[str, OpSpec]:
    return {s.qualname: s for s in _catalog()}


# ---------------------------------------------------------------------------------------------
# lookup and selection


def _qualify(name: str) -> str:
    name = name.strip()
    return name if name.startswith("aten::") else f"aten::{name}"


def _suggest(name: str) -> str:
    close = difflib.get_close_matches(name, list(_index()), n=3, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def lookup(name: str) -> OpSpec:
    """The OpSpec of "aten::add.Tensor", "add.Tensor", "aten::relu" or "relu" (default overload)."""
    spec = find(name)
    if spec is None:
        q = _qualify(name)
        raise UnknownOpError(f"unknown op {q!r}{_suggest(q)}")
    return spec


def find(name: str) -> OpSpec | None:
    """lookup() for a name that may not exist, without its close-match suggestions (difflib over
    the whole catalog: milliseconds, where code asks about other overloads of every op it runs)."""
    return _index().get(_qualify(name))


def _is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")


def _select_one(term: str) -> list[OpSpec]:
    index = _index()
    if term.startswith("family:"):
        family = term[len("family:") :]
        if family not in FAMILY_NAMES:
            close = difflib.get_close_matches(family, FAMILY_NAMES, n=3)
            hint = f"; did you mean {', '.join('family:' + c for c in close)}?" if close else ""
            raise UnknownOpError(f"unknown family {family!r}{hint} (known: {', '.join(FAMILY_NAMES)})")
        return [s for s in _catalog() if s.family == family]
    q = _qualify(term)
    if _is_glob(q):
        hits = [s for s in _catalog() if fnmatch.fnmatchcase(s.qualname, q)]
        if not hits:
            raise UnknownOpError(f"pattern {q!r} matches no op{_suggest(q.rstrip('*?'))}")
        return hits
    if q in index:
        if "." in q[len("aten::") :]:
            return [index[q]]
        # a bare name selects all its overloads: "add" -> add, add.Tensor, add.out, ...
        return [s for s in _catalog() if s.name == q]
    base_hits = [s for s in _catalog() if s.name == q]
    if base_hits:  # an op without a default overload, e.g. "aten::sum" only has named overloads
        return base_hits
    raise UnknownOpError(f"unknown op {q!r}{_suggest(q)}")


def _read_op_list(path: str) -> list[str]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise UnknownOpError(f"cannot read op list {path}: {e.strerror or e}") from None
    terms = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            terms.append(line)
    return terms


def select(expr: str) -> list[OpSpec]:
    """The ops an expression names, sorted by qualname, without duplicates.

    `expr` is "all"; "core" (ops tagged core); "family:<name>"; "@path" (a file with one term per
    line, blank lines and # comments ignored); or a comma-separated list of any of these terms and
    of op names or globs ("aten::add*", "add*", "add.Tensor", "relu"). A bare op name selects all of
    its overloads. A name or pattern that selects nothing raises `UnknownOpError`.
    """
    terms = [t.strip() for t in expr.split(",") if t.strip()]
    if not terms:
        raise UnknownOpError("empty op selection")
    chosen: dict[str, OpSpec] = {}
    for term in terms:
        if term.startswith("@"):
            sub = _read_op_list(term[1:])
            if not sub:
                raise UnknownOpError(f"op list {term[1:]} names no ops")
            specs = [s for t in sub for s in select(t)]
        elif term == "all":
            specs = list(_catalog())
        elif term == "core":
            specs = [s for s in _catalog() if "core" in s.tags]
        else:
            specs = _select_one(term)
        for s in specs:
            chosen[s.qualname] = s
    return sorted(chosen.values(), key=lambda s: s.qualname)


def counts(specs) -> dict:
    """{"total": n, "variant": {...}, "family": {...}, "parsed": n, "untestable": n} for `conform ops`."""
    specs = list(specs)
    variant = Counter(s.variant for s in specs)
    family = Counter(s.family for s in specs)
    return {
        "total": len(specs),
        "variant": {v: variant.get(v, 0) for v in VARIANTS},
        "family": {f: family[f] for f in FAMILY_NAMES if family.get(f)},
        "parsed": sum(s.parsed for s in specs),
        "untestable": sum(bool(s.rules.untestable) for s in specs),
    }

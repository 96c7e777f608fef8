"""Declared kernels: what a torch release's native_functions.yaml says each backend implements."""

# Every torch wheel, of any platform and version since 1.12, carries
# `torchgen/packaged/ATen/native/native_functions.yaml`. Read straight from the zip (nothing is
# installed or imported), it says for each ATen overload which dispatch keys have a kernel:
#
# - `dispatch: {CPU, CUDA: add_out, MPS: add_out_mps}`: a kernel for each key (keys may be joined
#   with commas);
# - `structured_delegate: add.out`: the functional and in-place variants run the kernels of the out=
#   op they delegate to (an op may have both: its own sparse kernels plus a delegate for dense ones);
# - `CompositeImplicitAutograd` (also the default when there is neither a dispatch table nor a
#   delegate) and `CompositeExplicitAutograd[NonFunctional]`: one kernel for every backend, built
#   from other ops, so the op is available on a backend through decomposition;
# - `autogen: foo.out`: an out= overload generated from the functional one (composite explicit).
#
# The result is stored as a kind="declared" environment per torch version (see
# models.DeclaredKernel), shown by the site beside what was measured: `coverage_rows` and
# `beside_measured` are pure functions that the command (`declared_coverage`,
# `declared_vs_measured`, reading the store) and the site (conform.website.data) share.

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sysconfig
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from conform import versions
from conform.errors import ConformError
from conform.store import queries

YAML_IN_WHEEL = "torchgen/packaged/ATen/native/native_functions.yaml"
BACKEND_KEYS = ("MPS", "CUDA", "CPU", "XPU")
# the device under test's backend name -> its dispatch key
KEY_OF_BACKEND = {"mps": "MPS", "cuda": "CUDA", "cpu": "CPU", "xpu": "XPU", "meta": "Meta"}

# Composite keys registered for every backend, with how they make an op available there.
# "Math" and "DefaultBackend" are the names these keys had before torch 1.10.
COMPOSITE = {
    "CompositeImplicitAutograd": "composite_implicit",
    "Math": "composite_implicit",
    "CompositeExplicitAutograd": "composite_explicit",
    "DefaultBackend": "composite_explicit",
    "CompositeExplicitAutogradNonFunctional": "composite_explicit",
    # only for nested tensors: kept, but it makes nothing available on a dense backend
    "CompositeImplicitAutogradNestedTensor": "composite_implicit",
}
_RENAMED = {"Math": "CompositeImplicitAutograd", "DefaultBackend": "CompositeExplicitAutograd"}
_EXPLICIT_FOR_ALL = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
# bump when declared_kernels() changes what it computes: cached results are recomputed
PARSER_VERSION = 3
KERNEL_HOWS = ("kernel", "structured_delegate")
COMPOSITE_HOWS = ("composite_implicit", "composite_explicit")


@dataclass
class DeclaredRelease:
    """What one torch release declares: {qualname: {dispatch key: how}} and where it came from."""

    torch_version: str
    torch_git: str
    source: str  # wheel file name, or "installed"
    platform: str
    yaml_sha256: str
    kernels: dict[str, dict[str, str]]
    schemas: dict[str, str] = field(default_factory=dict)

    def environment(self) -> dict[str, Any]:
        from conform.environment import fingerprint_of  # torch: `conform declared` reads wheels without it

        # The yaml is the same on every platform of a release: identity is version + git hash.
        env = {
            "kind": "declared",
            "torch_version": self.torch_version,
            "torch_git": self.torch_git,
            "backend": "declared",
            "details": {
                "source": self.source,
                "platform": self.platform,
                "yaml_sha256": self.yaml_sha256,
                "ops_total": str(len(self.kernels)),
            },
        }
        env["fingerprint"] = fingerprint_of(env)
        return env

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# -- reading native_functions.yaml --------------------------------------------------------------


def _load_yaml(text: str | bytes) -> list[dict]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entries = yaml.load(text, Loader=loader)
    if not isinstance(entries, list):
        raise ConformError("native_functions.yaml is not a list of functions")
    return [e for e in entries if isinstance(e, dict) and "func" in e]


def _op_name(func: str) -> str:
    return func.split("(", 1)[0].strip()


def _qualname(name: str) -> str:
    return name if "::" in name else f"aten::{name}"


def _dispatch(entry: dict) -> dict[str, str]:
    """{dispatch key: how} of an entry's own dispatch table, comma-joined keys split."""
    out: dict[str, str] = {}
    for keys in entry.get("dispatch") or {}:
        if keys == "__line__":
            continue
        for key in str(keys).split(","):
            key = key.strip()
            if key:
                out[_RENAMED.get(key, key)] = COMPOSITE.get(key, "kernel")
    return out


def declared_kernels(text: str | bytes) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """({qualname: {dispatch key: how}}, {qualname: schema}) from native_functions.yaml's text."""
    entries = _load_yaml(text)
    own = {}
    for e in entries:
        by_key = _dispatch(e)
        if e.get("ufunc_inner_loop"):
            # ufunc codegen writes the CPU and CUDA kernels of these structured out= ops
            by_key.setdefault("CPU", "kernel")
            by_key.setdefault("CUDA", "kernel")
        own[_op_name(e["func"])] = by_key
    kernels: dict[str, dict[str, str]] = {}
    schemas: dict[str, str] = {}
    implicit_only = set()
    for e in entries:
        name = _op_name(e["func"])
        by_key = dict(own[name])
        delegate = e.get("structured_delegate")
        if delegate:
            for key, how in own.get(str(delegate).strip(), {}).items():
                by_key.setdefault(key, "structured_delegate" if how == "kernel" else how)
        elif "dispatch" not in e:
            # torchgen's default; an explicit empty `dispatch: {}` means no kernel at all
            by_key["CompositeImplicitAutograd"] = "composite_implicit"
            implicit_only.add(name)
        kernels[_qualname(name)] = by_key
        schemas[_qualname(name)] = _qualname(str(e["func"]).strip())
    for e in entries:
        if _op_name(e["func"]) in implicit_only:
            continue  # torch registers no generated out= op for a decomposing one
        for name in str(e.get("autogen") or "").split(","):
            name = name.strip()
            if name and _qualname(name) not in kernels:
                kernels[_qualname(name)] = {"CompositeExplicitAutograd": "composite_explicit"}
    return kernels, schemas


def how_on(by_key: dict[str, str], key: str) -> str | None:
    """How an op is available on a dispatch key: its kernel first, as the dispatcher picks it,
    then a composite explicit kernel, then decomposition; None when it is not available."""
    if key in by_key and by_key[key] in KERNEL_HOWS:
        return by_key[key]
    if any(k in by_key for k in _EXPLICIT_FOR_ALL):
        return "composite_explicit"
    if "CompositeImplicitAutograd" in by_key:
        return "composite_implicit"
    return None


# -- wheels and the installed torch -------------------------------------------------------------

_VERSION_RE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_GIT_RE = re.compile(r"^git_version\s*=\s*['\"]([^'\"]*)['\"]", re.M)


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "conform" / "declared"


def read_wheel(path: str | os.PathLike, *, cache: bool = True) -> DeclaredRelease:
    """What a torch wheel declares. The result is cached per wheel (file name, size, mtime)."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise ConformError(f"cannot read wheel {path}: {e.strerror}") from None
    key = hashlib.sha256(f"{path.name}:{st.st_size}:{st.st_mtime_ns}:{PARSER_VERSION}".encode()).hexdigest()[:24]
    cached = _cache_dir() / f"{key}.json"
    if cache and cached.exists():
        try:
            return DeclaredRelease(**json.loads(cached.read_text()))
        except (ValueError, TypeError):
            pass  # a damaged cache entry is recomputed
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            if YAML_IN_WHEEL not in names:
                raise ConformError(f"{path.name} has no {YAML_IN_WHEEL} (torch wheels carry it from 1.12 on)")
            text = z.read(YAML_IN_WHEEL)
            version_py = z.read("torch/version.py").decode() if "torch/version.py" in names else ""
    except zipfile.BadZipFile:
        raise ConformError(f"{path} is not a wheel (not a zip file)") from None
    version = _VERSION_RE.search(version_py)
    git = _GIT_RE.search(version_py)
    name_version, platform = _wheel_name(path.name)
    release = _release(
        text, version.group(1) if version else name_version, git.group(1) if git else "", path.name, platform
    )
    if cache:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(release.to_json()))
            tmp.replace(cached)
        except OSError:
            pass  # no cache is only slower
    return release


def _wheel_name(name: str) -> tuple[str, str]:
    """(version, platform) of a wheel's file name (torch-2.4.1-cp310-none-macosx_11_0_arm64.whl:
    "2.4.1", "macosx_11_0_arm64"), read by packaging; "?" and "" for a name that is no wheel's."""
    try:
        _, version, _, tags = parse_wheel_filename(name)
    except (InvalidWheelFilename, InvalidVersion):
        return "?", ""
    return str(version), ".".join(sorted({t.platform for t in tags}))


def read_installed() -> DeclaredRelease:
    """What the installed torch declares (without importing torch)."""
    spec = importlib.util.find_spec("torchgen")
    if spec is None or not spec.submodule_search_locations:
        raise ConformError("torch is not installed here (no torchgen package)")
    yaml_path = Path(list(spec.submodule_search_locations)[0]) / "packaged/ATen/native/native_functions.yaml"
    if not yaml_path.exists():
        raise ConformError(f"the installed torch has no {yaml_path}")
    version = importlib.metadata.version("torch")
    git = ""
    torch_spec = importlib.util.find_spec("torch")
    if torch_spec is not None and torch_spec.submodule_search_locations:
        vp = Path(list(torch_spec.submodule_search_locations)[0]) / "version.py"
        if vp.exists():
            text = vp.read_text()
            m, g = _VERSION_RE.search(text), _GIT_RE.search(text)
            version = m.group(1) if m else version
            git = g.group(1) if g else ""
    return _release(yaml_path.read_bytes(), version, git, "installed", sysconfig.get_platform())


def _release(text: bytes, version: str, git: str, source: str, platform: str) -> DeclaredRelease:
    kernels, schemas = declared_kernels(text)
    return DeclaredRelease(
        torch_version=version,
        torch_git=git,
        source=source,
        platform=platform,
        yaml_sha256=hashlib.sha256(text).hexdigest(),
        kernels=kernels,
        schemas=schemas,
    )


def _variant(qualname: str) -> str:
    name, _, overload = qualname.split("::", 1)[-1].partition(".")
    if overload == "out" or overload.endswith("_out") or overload.startswith("out"):
        return "out"
    if name.endswith("_") and not name.startswith("__"):
        return "inplace"
    return "functional"


def record(store, release: DeclaredRelease) -> int:
    """Store a release's declared kernels (replacing that environment's); its environment id."""
    env = release.environment()
    ops = {q: {"schema": release.schemas.get(q, ""), "variant": _variant(q)} for q in release.kernels}
    return store.record_declared(env, release.kernels, ops)


# -- declared beside measured: pure functions over plain rows ------------------------------------
# The command reads its rows from the store, keyed by qualified name; the site passes the rows it
# has already loaded, keyed by op id. Both get their answers here.

# outcomes that say a declared kernel does not work (unsupported_dtype is a kernel refusing a
# dtype it never claimed, and skipped says nothing)
_BROKEN = frozenset(
    {
        "mismatch",
        "grad_mismatch",
        "meta_mismatch",
        "not_implemented",
        "fallback",
        "device_error",
        "missing_error",
        "crash",
        "timeout",
    }
)


def dispatch_key_of(backend: str) -> str:
    """The dispatch key of a measured environment's backend ("cuda:1" -> "CUDA")."""
    return KEY_OF_BACKEND.get(backend.split(":")[0], backend)


def in_release_order(releases: list) -> list:
    """Declared environments (anything with `torch_version` and `id`), oldest torch first."""
    return sorted(releases, key=lambda e: (versions.sort_key(e.torch_version), e.id))


def release_for(releases_in_order: list, torch_version: str):
    """The declared environment of a torch version ("2.13.0+cpu" matches "2.13.0"), or None."""
    same = [e for e in releases_in_order if e.torch_version == torch_version]
    same = same or [
        e for e in releases_in_order if e.torch_version.partition("+")[0] == torch_version.partition("+")[0]
    ]
    return same[-1] if same else None


def coverage_rows(release, ops: dict[Any, dict[str, str]], keys=BACKEND_KEYS) -> list[dict[str, Any]]:
    """One row per key for one declared release whose ops map to {dispatch key: how}:
    {environment_id, torch_version, torch_git, dispatch_key, ops_with_kernel, ops_via_composite,
    ops_unavailable, ops_total} - ops_with_kernel counts kernels and structured delegates,
    ops_via_composite ops that only decompose (composite implicit or explicit)."""
    rows = []
    for key in keys:
        hows = [how_on(by_key, key) for by_key in ops.values()]
        kernel = sum(h in KERNEL_HOWS for h in hows)
        composite = sum(h in COMPOSITE_HOWS for h in hows)
        rows.append(
            {
                "environment_id": release.id,
                "torch_version": release.torch_version,
                "torch_git": release.torch_git,
                "dispatch_key": key,
                "ops_with_kernel": kernel,
                "ops_via_composite": composite,
                "ops_unavailable": len(ops) - kernel - composite,
                "ops_total": len(ops),
            }
        )
    return rows


def beside_measured(declared_ops: dict[Any, dict[str, str]], outcomes: dict[Any, set[str]], key: str) -> dict[str, Any]:
    """Declared (op -> {dispatch key: how}) beside measured (op -> the outcomes of its cells, in
    the order to list them) on one dispatch key:

    {"declared_failing": {op: [outcomes]}  - a kernel is declared, yet a cell fails,
     "composite_passing": {op: how}         - no kernel declared, passes by decomposition,
     "undeclared_measured": [op]}           - measured, but not declared at all."""
    failing, via_composite, undeclared = {}, {}, []
    for op, seen in outcomes.items():
        if op not in declared_ops:
            undeclared.append(op)
            continue
        how = how_on(declared_ops[op], key)
        if how in KERNEL_HOWS and seen & _BROKEN:
            failing[op] = sorted(seen & _BROKEN)
        elif how in COMPOSITE_HOWS and "pass" in seen:
            via_composite[op] = how
    return {"declared_failing": failing, "composite_passing": via_composite, "undeclared_measured": undeclared}


# -- the same, read from the store ----------------------------------------------------------------


def declared_environments(store) -> list:
    """Declared environments (conform.store.queries.EnvironmentRow), oldest torch first."""
    return in_release_order(queries.environments(store, kind="declared"))


def declared_ops(store, environment_id: int, *, keys=BACKEND_KEYS) -> dict[str, dict[str, str]]:
    """{qualname: {key: how}} for one declared environment, resolved per backend key: "kernel",
    "structured_delegate", "composite_explicit" or "composite_implicit"; a key is absent where
    the op is not available at all."""
    return {
        q: {k: h for k in keys if (h := how_on(by_key, k)) is not None}
        for q, by_key in queries.declared_kernels(store, environment_id).items()
    }


def declared_coverage(store, *, keys=BACKEND_KEYS) -> list[dict[str, Any]]:
    """`coverage_rows` of every declared torch version, oldest first."""
    return [
        row
        for env in declared_environments(store)
        for row in coverage_rows(env, queries.declared_kernels(store, env.id), keys)
    ]


def declared_vs_measured(
    store, environment_id: int, *, declared_environment_id: int | None = None
) -> dict[str, Any] | None:
    """`beside_measured` for one measured environment, by qualified name, on its backend's dispatch
    key, against the declared environment of its torch version unless one is given; with
    "declared_environment_id" and "dispatch_key". None where no declared environment matches."""
    env = queries.environment(store, environment_id)
    if env is None:
        raise ConformError(f"no environment {environment_id} in {store.where}")
    key = dispatch_key_of(env.backend)
    if declared_environment_id is None:
        release = release_for(declared_environments(store), env.torch_version)
        if release is None:
            return None
        declared_environment_id = release.id
    outcomes: dict[str, set[str]] = {}
    for (qualname, _dtype), cell in sorted(queries.latest_cells(store, environment_id).items()):
        outcomes.setdefault(qualname, set()).add(cell.outcome)
    found = beside_measured(queries.declared_kernels(store, declared_environment_id), outcomes, key)
    return {"declared_environment_id": declared_environment_id, "dispatch_key": key, **found}


def render_coverage(rows: list[dict[str, Any]], fmt: str, *, keys=BACKEND_KEYS) -> str:
    """A table of declared coverage: one line per torch version, kernels / total per key."""
    if fmt == "json":
        return json.dumps(rows, indent=1)
    by_version: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_version.setdefault(r["torch_version"], {})[r["dispatch_key"]] = r
    header = ["torch", "ops"] + [f"{k} kernels" for k in keys] + [f"{k} +composite" for k in keys[:1]]
    lines = []
    for version, per_key in by_version.items():
        total = next(iter(per_key.values()))["ops_total"]
        cells = [version, str(total)]
        for k in keys:
            r = per_key.get(k)
            cells.append(f"{r['ops_with_kernel']} ({100 * r['ops_with_kernel'] / max(total, 1):.1f}%)" if r else "")
        first = per_key.get(keys[0])
        if first:
            avail = first["ops_with_kernel"] + first["ops_via_composite"]
            cells.append(f"{avail} ({100 * avail / max(total, 1):.1f}%)")
        lines.append(cells)
    if fmt == "markdown":
        out = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join(" --- " if i == 0 else " ---: " for i in range(len(header))) + "|",
        ]
        out += ["| " + " | ".join(c) + " |" for c in lines]
        return "\n".join(out)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]

    def fmt_row(cells):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    return "\n".join([fmt_row(header)] + [fmt_row(c) for c in lines])


# -- the command --------------------------------------------------------------------------------

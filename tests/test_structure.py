"""conform's shape: no import cycle, a short top level, dependencies one way
(conform -> generators -> opdb), click in the command layer only, and each function-level
import saying why it is not at the top."""

import ast
import pathlib
import re

from test_generators_structure import cycles

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOMAIN_PACKAGES = ("run", "judge", "timing", "store", "report", "website", "ci")


def modules(package: str) -> dict[str, pathlib.Path]:
    return {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in (ROOT / package).glob("**/*.py")
    }


def imported(tree: ast.AST, module: str, is_package: bool, known: set[str] = frozenset()) -> set[str]:
    """Every module an import statement in `tree` loads, at the top level or in a function.
    `from pkg import a, b` depends on the submodules pkg.a and pkg.b when both are `known`
    modules, not on pkg's __init__; otherwise on pkg (and on those of its names that are modules)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([node.module] if node.module else []))
            subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known}
            names |= subs if len(subs) == len(node.names) else {base, *subs}
    return names


def import_graph(package: str) -> dict[str, set[str]]:
    mods = modules(package)
    graph = {}
    for m, p in mods.items():
        targets = imported(ast.parse(p.read_text()), m, p.name == "__init__.py", set(mods))
        graph[m] = {t for t in targets if t in mods and t != m}
    return graph


def test_conform_imports_without_a_cycle():
    graph = import_graph("conform")
    assert "conform.run.cell" in graph and "conform.judge.verdict" in graph
    assert cycles(graph) == []


def test_conform_has_few_top_level_modules():
    top = sorted(p.stem for p in (ROOT / "conform").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 10, top


def test_generators_and_opdb_never_import_conform():
    for package in ("generators", "opdb"):
        for m, p in modules(package).items():
            names = imported(ast.parse(p.read_text()), m, p.name == "__init__.py")
            assert not {n for n in names if n == "conform" or n.startswith("conform.")}, m
    for m, p in modules("opdb").items():
        names = imported(ast.parse(p.read_text()), m, p.name == "__init__.py")
        assert not {n for n in names if n == "generators" or n.startswith("generators.")}, m


def test_domain_packages_never_import_click():
    for package in DOMAIN_PACKAGES:
        for m, p in modules(f"conform/{package}").items():
            names = imported(ast.parse(p.read_text()), m, p.name == "__init__.py")
            assert "click" not in {n.split(".")[0] for n in names}, m


def unexplained_function_imports(source: str) -> list[int]:
    """Lines of imports inside functions with no comment on the line, on the line above, or on
    the first import of the run of imports they belong to."""
    lines = source.splitlines()
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for block in ast.walk(fn):
            body = getattr(block, "body", None)
            if not isinstance(body, list):
                continue
            run_explained = False
            for stmt in body:
                if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    run_explained = False
                    continue
                here = "#" in lines[stmt.lineno - 1]
                above = stmt.lineno >= 2 and lines[stmt.lineno - 2].strip().startswith("#")
                run_explained = run_explained or here or above
                if not run_explained:
                    found.append(stmt.lineno)
    return sorted(set(found))


def test_function_level_imports_say_why():
    unexplained = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "conform").glob("**/*.py"))
        if (lines := unexplained_function_imports(p.read_text()))
    }
    assert unexplained == {}


def test_the_checks_see_what_they_look_for():
    src = "def f():\n    import os\n    import re  # why\n\ndef g():\n    # why\n    import os\n    import re\n"
    assert unexplained_function_imports(src) == [2]
    tree = ast.parse("from . import cell\nfrom ..judge import verdict, Record\nimport click\n")
    known = {"conform.run.cell", "conform.judge.verdict"}
    assert imported(tree, "conform.run.execute", False, known) == {
        "conform.run.cell",
        "conform.judge",
        "conform.judge.verdict",
        "click",
    }
    assert cycles(import_graph("conform") | {"conform.run.cell": {"conform.run.forkserver"}}) != []


def verdict_rule_clauses(text: str) -> set[str]:
    """'4' and '4b' for each numbered section and lettered item of docs/verdict-rule.md."""
    clauses, section = set(), None
    for line in text.splitlines():
        if m := re.match(r"## (\d+)\. ", line):
            section = m.group(1)
            clauses.add(section)
        elif section and (m := re.match(r"- \(([a-z])\) ", line)):
            clauses.add(section + m.group(1))
    return clauses


def test_rule_labels_in_the_code_name_clauses_of_the_verdict_rule():
    clauses = verdict_rule_clauses((ROOT / "docs/verdict-rule.md").read_text())
    assert {"1", "1a", "4g", "5f", "8e"} <= clauses
    labels = {}
    for p in sorted((ROOT / "conform").glob("**/*.py")):
        for m in re.finditer(r"rules? \((\d+[a-z]?)\)", p.read_text()):
            labels.setdefault(m.group(1), str(p.relative_to(ROOT)))
    assert len(labels) >= 20
    assert {label: where for label, where in labels.items() if label not in clauses} == {}

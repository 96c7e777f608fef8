"""The tests' own helper modules are each imported under one name.

tests/ is on sys.path (pytest's rootdir conftest) and so is the repository root (`python -m
pytest`), so `faulty` and `tests.faulty` both import: as two module objects, with two copies of
every class and registry, and `isinstance` across them quietly false.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_each_helper_module_is_imported_under_one_name():
    helpers = {p.stem for p in TESTS.glob("*.py") if p.stem != "conftest"}
    used: dict[str, set[str]] = defaultdict(set)  # helper -> the names it is imported as
    for path in TESTS.glob("*.py"):
        for name in imported_names(ast.parse(path.read_text(), str(path))):
            stem = name.removeprefix("tests.")
            if stem in helpers:
                used[stem].add(name)
    assert used["faulty"], "the scan found no import of tests/faulty.py: it is not looking where the tests are"
    assert {helper: sorted(names) for helper, names in used.items() if len(names) > 1} == {}

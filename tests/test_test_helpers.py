"""The tests' own helper modules: each imported under one name, and the script runner as
faithful as the fresh interpreter it stands for.

tests/ is on sys.path (pytest's rootdir conftest) and so is the repository root (`python -m
pytest`), so `faulty` and `tests.faulty` both import: as two module objects, with two copies of
every class and registry, and `isinstance` across them quietly false.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

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


def test_a_script_run_in_a_fork_of_the_script_server_fails_as_python_would(tmp_path, monkeypatch):
    """script_runner.run_script stands for `python repro.py`: a script that forgets an import, exits
    with a status, dies by a signal or reads its argv, folder and environment must say so as a
    fresh interpreter would, and what it changes must not reach the next script."""
    from script_runner import run_script

    def run(source, *args):
        path = tmp_path / "s.py"
        path.write_text(source)
        return run_script(path, *args, cwd=tmp_path, timeout=60)

    forgot = run("print(torch.ones(1))\n")  # the server imported torch: the script did not
    assert forgot.returncode == 1 and "NameError: name 'torch' is not defined" in forgot.stderr, forgot
    assert run("import sys\nsys.exit(3)\n").returncode == 3
    assert run("import os\nos.abort()\n").returncode == -6
    monkeypatch.setenv("SCRIPT_RUNNER_PROBE", "here")
    seen = run(
        "import os, sys, torch\nprint(sys.argv[1:], os.getcwd(), os.environ['SCRIPT_RUNNER_PROBE'], __name__)\n"
        "torch.set_default_dtype(torch.float64)\n",
        "a",
    )
    assert seen.returncode == 0 and seen.stdout.split() == ["['a']", str(tmp_path), "here", "__main__"], seen
    assert run("import torch\nprint(torch.get_default_dtype())\n").stdout == "torch.float32\n"


def test_a_script_past_its_time_leaves_the_next_one_a_fresh_server(tmp_path, monkeypatch):
    # a fork stuck before it made its own process group: killpg finds no group. The server
    # still had to go, or the stuck fork's status came as the next script's pid and its pid
    # as that script's exit status (a CI run read 3782 for a script that exited 0)
    import subprocess

    import script_runner

    def no_group(pid, sig):
        raise ProcessLookupError(3, "No such process")

    monkeypatch.setattr(script_runner.os, "killpg", no_group)
    slow, quick = tmp_path / "slow.py", tmp_path / "quick.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    quick.write_text("import sys\nprint('ran')\nsys.exit(4)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        script_runner.run_script(slow, cwd=tmp_path, timeout=1)
    done = script_runner.run_script(quick, cwd=tmp_path, timeout=60)
    assert (done.returncode, done.stdout) == (4, "ran\n")

"""conform's pytest plugin stays out of other projects: installing conform changes neither another
project's `pytest -n auto` worker count nor what its tests and hooks see."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from cli_helpers import conform_env

# The other project: its conftest writes what its controller's session looks like; its test
# parametrizes a name conform's suite also uses.
PROJECT_CONFTEST = """
import json


def pytest_configure(config):
    if hasattr(config, "workerinput"):
        return
    conform_plugins = sorted(name for name, plugin in config.pluginmanager.list_name_plugin() if "conform" in str(getattr(plugin, "__name__", name)))
    seen = {"workers": config.getoption("numprocesses"), "conform_plugins": conform_plugins}
    (config.rootpath / "seen.json").write_text(json.dumps(seen))
"""
PROJECT_TEST = """
import pytest


@pytest.mark.parametrize("conform_cell", ["mine", "also mine"])
def test_own_parameter(conform_cell):
    assert conform_cell.endswith("mine")


def test_plain():
    pass
"""

# An environment where an older conform was installed (editable installs keep their metadata
# until reinstalled) still declares the pytest11 entry point: pytest then loads the plugin, and
# only its guards keep it out of the way.
STALE_ENTRY_POINT = any(ep.value == "conform.plugin" for ep in importlib.metadata.entry_points(group="pytest11"))


def test_another_projects_pytest_n_auto_is_unchanged(tmp_path):
    (tmp_path / "conftest.py").write_text(PROJECT_CONFTEST)
    (tmp_path / "test_project.py").write_text(PROJECT_TEST)
    env = conform_env(PYTEST_XDIST_AUTO_NUM_WORKERS="3")  # conform importable, as installed
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "auto", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "3 passed" in proc.stdout, proc.stdout
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["workers"] == 3  # xdist's answer from PYTEST_XDIST_AUTO_NUM_WORKERS, not conform's
    if not STALE_ENTRY_POINT:
        assert seen["conform_plugins"] == []

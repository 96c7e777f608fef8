"""A cell's cases follow from the run seed and the cell alone: not from where conform is installed
or which of the user's modules are loaded (generators.seeding)."""

from __future__ import annotations

import importlib
import json
import sys

import opdb
from conform.backends import CPUBackend
from conform.outcomes import Outcome
from conform.run import cell, execute

# cells whose draws the local pool changed most (60 examples, seed 7, an editable install: 51
# clamp cases of 60 and 15 linspace cases differed once conform's own source left the pool)
_CELLS = (("aten::clamp", "int32"), ("aten::linspace", "none"))


def _drawn(name: str, dtype: str, monkeypatch) -> list[str]:
    seen: list[str] = []

    def record(op, case, backend, **kwargs):
        seen.append(json.dumps(case.to_json(), sort_keys=True, default=repr))
        return execute.CaseResult(Outcome.PASS, "forward")

    monkeypatch.setattr(execute, "run_case", record)
    settings = cell.CellSettings(examples=60, grad=False, hypothesis_db=None, seed=7)
    cell.run_cell(opdb.lookup(name), dtype, CPUBackend(), settings)
    return seen


def test_a_local_module_with_constants_does_not_change_what_a_seed_draws(tmp_path, monkeypatch):
    # hypothesis draws 1 value in 20 from constants, half of those from the source of loaded local
    # modules: a user's module (or conform's own source, in an editable install) changed the cases
    before = {op: _drawn(op, dt, monkeypatch) for op, dt in _CELLS}
    (tmp_path / "odd_constants.py").write_text(
        "VALUES = [" + ", ".join(str(i) for i in range(100, 4100, 100)) + ", 0.375, 1.625, 2.875, -0.125, 1e-3]\n"
        "WORDS = ['ab', 'ba', 'b a', 'aab', ' b', 'bb a']\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("odd_constants")
    try:
        after = {op: _drawn(op, dt, monkeypatch) for op, dt in _CELLS}
    finally:
        sys.modules.pop("odd_constants", None)
    assert all(len(v) >= 50 for v in before.values()), before
    assert after == before

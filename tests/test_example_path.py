"""The per-example path: what makes a case cheap must not change what it finds or exposes."""

import importlib
import json
from types import SimpleNamespace

import torch
from hypothesis import HealthCheck, Phase, given, settings

import generators
import opdb
from generators.case import TensorSpec
from generators.seeding import seed_only

cli_main = importlib.import_module("conform.cli.main")  # (conform.cli exports the click command `main`)


def _drawn(op: str, dtype: str, n: int, seed: int) -> list:
    seen = []

    @settings(max_examples=n, phases=[Phase.generate], database=None, suppress_health_check=list(HealthCheck))
    @given(generators.from_schema(opdb.lookup(op), dtype))
    def draw(case):
        seen.append(json.dumps(case.to_json(), sort_keys=True, default=str))

    draw._hypothesis_internal_use_seed = seed
    with seed_only():
        draw()
    return seen


def test_examples_of_a_cell_are_rarely_the_same_case_again():
    # the stress padding drawn as a list of booleans let hypothesis's mutator copy one padding
    # choice over another: the same case again, over half of the examples
    seen = _drawn("aten::floor_divide", "bfloat16", 40, seed=3)
    assert len(set(seen)) >= 0.9 * len(seen)


def test_a_materialised_tensor_never_shares_the_kept_base():
    spec = TensorSpec((3, 5), "float32", seed=4)
    a = spec.materialize(lambda t: t)
    a.add_(1.0)  # an in-place op on one side's input
    b = spec.materialize(lambda t: t)
    assert not torch.equal(a, b) and torch.equal(b, spec.make_cpu_base())
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()


def test_specs_whose_bounds_differ_in_the_sign_of_zero_are_not_confused():
    lo_pos = TensorSpec((64,), "float32", seed=1, low=0.0, high=1.0).materialize(lambda t: t)
    lo_neg = TensorSpec((64,), "float32", seed=1, low=-0.0, high=1.0).materialize(lambda t: t)
    want = TensorSpec((64,), "float32", seed=1, low=-0.0, high=1.0).make_cpu_base()
    assert torch.equal(lo_neg, want) and torch.equal(lo_neg.signbit(), want.signbit())
    assert torch.equal(lo_pos, TensorSpec((64,), "float32", seed=1, low=0.0, high=1.0).make_cpu_base())


def test_small_runs_run_their_cells_from_the_controller():
    backend = SimpleNamespace(workers_per_device=None)
    few = SimpleNamespace(cells=[("aten::abs", "float32")] * cli_main.SMALL_RUN_CELLS, backend=backend)
    many = SimpleNamespace(cells=few.cells * 2, backend=backend)
    assert cli_main._workers_for(few, None) == 0
    assert cli_main._workers_for(many, None) == cli_main._auto_workers(backend) >= 1
    assert cli_main._workers_for(few, 3) == 3  # -n given: as asked
    args = cli_main._pytest_args(few, None, None)
    assert args[args.index("-n") + 1] == "0" and "--assert=plain" in args

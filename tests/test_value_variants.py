"""Each drawn case also runs with other values: its value variants (generators.variants.reseeded)."""

import dataclasses

import pytest

import opdb
from conform.backends import CPUBackend
from conform.config import CellSettings, RunConfig
from conform.errors import ConformError
from conform.outcomes import Outcome
from conform.run import execute
from conform.run.cell import run_cell
from conform.run.execute import CaseResult
from generators import variants
from generators.case import Case, TensorSpec


def _spec(seed, **kw):
    return TensorSpec(shape=(3, 4), dtype="float32", seed=seed, **kw)


def test_a_variant_changes_every_inputs_seed_and_nothing_else():
    a, b = _spec(5, layout="transposed", magnitude="moderate", edges=1), _spec(9, values="special")
    case = Case(op="aten::add.Tensor", args=(a, b), kwargs={"alpha": 2})
    v = variants.reseeded(case, 1)
    got = v.tensor_specs()
    assert [s.seed for s in got] == [variants.derived_seed(5, 1), variants.derived_seed(9, 1)]
    assert [dataclasses.replace(s, seed=0) for s in got] == [dataclasses.replace(s, seed=0) for s in (a, b)]
    assert v.kwargs == {"alpha": 2} and v.op == case.op
    # another k, other values; the same k, the same ones
    assert variants.reseeded(case, 2).tensor_specs()[0].seed not in (5, got[0].seed)
    assert variants.reseeded(case, 1) == v


def test_a_spec_in_two_places_stays_one_object_and_explicit_values_stay():
    shared, explicit = _spec(3), TensorSpec(shape=(2,), dtype="int64", data=(0, 1))
    case = Case(op="aten::x", args=(shared, [shared, explicit]), kwargs={"d": {"dict": [[shared, 1]]}})
    v = variants.reseeded(case, 1)
    first, (second, kept), key = v.args[0], v.args[1], v.kwargs["d"]["dict"][0][0]
    assert first is second is key and first.seed == variants.derived_seed(3, 1)
    assert kept is explicit


def test_no_variant_where_no_input_has_values_from_a_seed():
    out = _spec(4)
    assert variants.reseeded(Case(op="aten::x", args=(1, 2.0)), 1) is None
    assert variants.reseeded(Case(op="aten::x", args=(1,), kwargs={"out": out}), 1, out_names={"out"}) is None
    with pytest.raises(ValueError):
        variants.reseeded(Case(op="aten::x", args=(out,)), 0)


def test_derived_seeds_are_31_bit_and_apart():
    seeds = {variants.derived_seed(s, k) for s in range(200) for k in (1, 2, 3)}
    assert len(seeds) == 600 and all(0 <= s < 2**31 for s in seeds)


def _recording(monkeypatch):
    """The seeds value variants got, as they are made."""
    made = set()
    real = variants.derived_seed

    def derived_seed(seed, k):
        made.add(real(seed, k))
        return real(seed, k)

    monkeypatch.setattr(variants, "derived_seed", derived_seed)
    return made


def _is_variant(case, made) -> bool:
    return any(s.seed in made for s in case.tensor_specs())


def test_the_drawn_cases_are_the_first_of_those_drawn_without_variants(monkeypatch):
    # hypothesis draws its next case the same whatever a passing case's variants did: at the
    # same --examples, the drawn cases are where a run that draws every case starts
    made = _recording(monkeypatch)
    op = opdb.lookup("aten::mul.Tensor")
    runs = {}
    for per_draw in (1, 2):
        seen = []
        settings = CellSettings(examples=10, values_per_draw=per_draw, hypothesis_db=None, seed=3)
        result = run_cell(op, "float32", CPUBackend(), settings, on_case=seen.append)
        assert result.outcome == "pass" and result.examples_run == 10, result.message
        runs[per_draw] = seen
    drawn = [c for c in runs[2] if not _is_variant(c, made)]
    assert len(drawn) == 5 and len(runs[2]) == 10  # each valid drawn case and its one variant
    assert drawn == runs[1][:5]


def test_a_case_with_no_values_from_a_seed_is_drawn_every_time(monkeypatch):
    # aten::scalar_tensor takes a Python number: no variant, so the cell's cases are all drawn
    made = _recording(monkeypatch)
    seen = []
    settings = CellSettings(examples=6, values_per_draw=2, hypothesis_db=None, seed=1)
    result = run_cell(opdb.lookup("aten::scalar_tensor"), "float32", CPUBackend(), settings, on_case=seen.append)
    assert result.examples_run == 6 and len(seen) >= 6, result.message
    assert not made and not any(_is_variant(c, made) for c in seen)


def test_a_failing_variant_is_the_cells_failure_and_shrinks_as_one(monkeypatch):
    # a fault that only other values show: every variant fails, every drawn case passes
    made = _recording(monkeypatch)
    real = execute.run_case

    def run_case(op, case, backend, **kw):
        r = real(op, case, backend, **kw)
        if _is_variant(case, made) and not r.invalid:
            return CaseResult(Outcome.MISMATCH, "forward", "values only a variant has")
        return r

    monkeypatch.setattr(execute, "run_case", run_case)
    settings = CellSettings(examples=8, values_per_draw=2, hypothesis_db=None, seed=1)
    result = run_cell(opdb.lookup("aten::abs"), "float32", CPUBackend(), settings)
    assert result.outcome == "mismatch" and result.message == "values only a variant has"
    assert _is_variant(Case.from_json(result.case), made)  # the case kept is the variant that failed
    # shrunk: hypothesis's simplest drawn case (a small plain tensor) with the variant's values
    assert Case.from_json(result.case).tensor_specs()[0].layout == "contiguous"


def test_one_value_per_draw_is_every_case_drawn():
    settings = CellSettings(examples=4, values_per_draw=1, hypothesis_db=None, seed=2)
    result = run_cell(opdb.lookup("aten::neg"), "float32", CPUBackend(), settings)
    assert result.examples_run == 4


def test_values_per_draw_is_checked_and_a_resumed_run_keeps_what_it_recorded():
    with pytest.raises(ConformError, match="--values-per-draw must be at least 1"):
        CellSettings(values_per_draw=0)
    before = RunConfig(seed=1).stored_options()
    del before["values_per_draw"]  # a run stored before value variants: every case drawn
    assert RunConfig().resumed(before, seed=1).cell.values_per_draw == 1

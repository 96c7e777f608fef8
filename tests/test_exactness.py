"""Exactly determined results are compared exactly: moved, selected and rounded values have one
right answer, and an integer-valued bfloat16 result one off is wrong though within rtol."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import opdb
from conform.compare import compare
from conform.execute import run_case
from conform.outcomes import Outcome
from conform.tolerances import tolerance_for
from generators.case import Case
from generators.case import TensorSpec as T
from tests.faulty import BACKENDS


@pytest.mark.parametrize(
    "name",
    [
        "aten::round",
        "aten::floor",
        "aten::trunc",
        "aten::cat",
        "aten::index_select",
        "aten::gather",
        "aten::sort",
        "aten::max.dim",
        "aten::amax",
        "aten::clamp",
        "aten::where.self",
        "aten::flip",
        "aten::arange.start_step",
        "aten::cummax",
        "aten::maximum",
        "aten::neg",
    ],
)
def test_moved_selected_and_rounded_values_are_exact(name):
    assert opdb.lookup(name).exact


@pytest.mark.parametrize(
    "name",
    [
        "aten::round.decimals",
        "aten::sum",
        "aten::mul.Tensor",
        "aten::exp",
        "aten::scatter.reduce",
        "aten::index_add",
        "aten::unfold_backward",
        "aten::quantile",
        "aten::linspace",
        "aten::_foreach_neg",
        "aten::floor_divide",
    ],
)
def test_computed_values_are_not(name):
    assert not opdb.lookup(name).exact


def test_tolerance_is_zero_for_exact_forward_results_only():
    round_ = opdb.lookup("aten::round")
    assert tolerance_for(round_, torch.bfloat16) == (0.0, 0.0)
    assert tolerance_for(round_, torch.bfloat16, gradient=True) != (0.0, 0.0)  # a gradient sums
    assert tolerance_for(opdb.lookup("aten::exp"), torch.bfloat16) != (0.0, 0.0)
    # an op owner's tolerance rule still wins over the derived exactness
    ruled = dataclasses.replace(
        round_, rules=dataclasses.replace(round_.rules, tolerances={"bfloat16": opdb.Tolerance(1e-2, 1.0)})
    )
    assert tolerance_for(ruled, torch.bfloat16) == (1e-2, 1.0)


def test_an_integer_valued_bfloat16_result_off_by_one_fails():
    want = torch.tensor([129.0, 200.0], dtype=torch.bfloat16)
    got = torch.tensor([130.0, 200.0], dtype=torch.bfloat16)
    round_ = opdb.lookup("aten::round")
    [exact] = compare(got, want, tolerance=lambda dt: tolerance_for(round_, dt))
    assert exact.kind == "values" and exact.mismatched == 1
    [loose] = compare(got, want, tolerance=lambda dt: tolerance_for(opdb.lookup("aten::exp"), dt))
    assert loose.ok  # 1/129 is within bfloat16's rtol of 1.6%: what exactness is for


def test_the_off_by_one_round_fault_is_found_only_by_the_exact_rule():
    op = opdb.lookup("aten::round")
    case = Case("aten::round", (T((64,), "bfloat16", seed=1, magnitude="moderate"),))
    r = run_case(op, case, BACKENDS["bf16_integer_off_by_one"]())
    assert r.outcome == Outcome.MISMATCH, r.message
    loose = dataclasses.replace(op, rules=dataclasses.replace(op.rules, exact=False))
    assert run_case(loose, case, BACKENDS["bf16_integer_off_by_one"]()).outcome == Outcome.PASS
    assert run_case(op, case, BACKENDS["none"]()).outcome == Outcome.PASS


def test_exact_rule_in_a_rules_file_is_checked(tmp_path):
    (tmp_path / "x.toml").write_text('["aten::sum"]\nexact = "yes"\nreason = "r"\n')
    with pytest.raises(opdb.RulesError, match="exact must be true or false"):
        opdb.rules.load_entries(tmp_path)

"""A cell whose integer argument's first draws are all invalid still finds its valid cases."""

import pytest

import opdb
from conform.backends import CPUBackend
from conform.run.cell import CellSettings, _invalid_limit, run_cell


def test_one_repeated_rejection_is_tolerated_for_a_cells_worth_of_examples():
    assert _invalid_limit(12, 0, 1) == 12
    assert _invalid_limit(12, 0, 1, no_kernel=True) == 2  # no kernel for the dtype: give up at once


@pytest.mark.parametrize("name", ["aten::pixel_shuffle", "aten::mvlgamma", "aten::unfold_copy"])
def test_an_integer_argument_drawn_zero_at_first_does_not_skip_the_cell(name):
    # upscale_factor, p and step drawn 0 in the first five examples of seed 23 made these cells
    # "no valid case"; they have valid cases in plenty
    settings = CellSettings(examples=12, seed=23, hypothesis_db=None)
    result = run_cell(opdb.lookup(name), "float32", CPUBackend(), settings)
    assert result.examples_run > 0, result.message

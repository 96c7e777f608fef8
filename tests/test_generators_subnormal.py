"""The subnormal that special values and edge patterns draw (generators/tensor.py `_subnormal`).

A subnormal near the normal range (tiny / 4 = 2**-128 in float32) has its reciprocal one step past
the dtype's maximum, so x / sub lands just inside the range: kernels whose harmless intermediate
(1 / sub, digamma ~ -1/x, bessel y1 ~ -2/(pi x), complex division) overflows there alarmed where
golden float64 still fit (seed-12 sweep: special_bessel_y1, addcdiv, lgamma, div complex64).
The smallest subnormal would sit one unit from zero, where the conditioning rule reads every
element it touches as a domain edge and excuses real bugs (fmod's vectorised NaN).
"""

from __future__ import annotations

import pytest
import torch

import opdb
from conform.backends import CPUBackend
from conform.run.execute import run_case
from generators import Case, TensorSpec
from generators.tensor import _edge_value

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_subnormal_is_far_from_zero_and_its_reciprocal_far_beyond_the_range(dtype):
    info = torch.finfo(dtype)
    v = _edge_value("sub", dtype)
    assert float(torch.tensor(v, dtype=dtype)) == v and 0 < v < info.tiny
    assert v / (info.tiny * info.eps) >= 4  # a move by one unit of the dtype does not reach zero
    assert 1.0 / v >= 2 * info.max  # x / sub overflows in golden too, for |x| >= 1/2


def _edges_case(op: str, *edges: int, values: str = "real") -> Case:
    t = [TensorSpec(shape=(3, 57), dtype="float32", values=values, edges=e) for e in edges]
    return Case(op, tuple(t), {})


def test_subnormal_argument_near_the_range_edge_is_no_false_alarm():
    # y1(x) ~ -2 / (pi x): at x = 2**-128, -2.2e38, inside float32's range, and the CPU's kernel
    # overflows on the way (seed-12 sweep: mismatch); the drawn subnormal now puts it beyond
    r = run_case(opdb.lookup("aten::special_bessel_y1"), _edges_case("aten::special_bessel_y1", 0), CPUBackend())
    assert getattr(r.outcome, "value", r.outcome) == "pass", r.message


def test_fmod_vectorised_nan_for_a_subnormal_divisor_is_still_found():
    # pytorch#193753: Sleef's fmod gives NaN in full vector blocks when |a / b| overflows
    case = _edges_case("aten::fmod.Tensor", 0, 1, values="nonzero")
    r = run_case(opdb.lookup("aten::fmod.Tensor"), case, CPUBackend())
    assert getattr(r.outcome, "value", r.outcome) == "mismatch", r.message

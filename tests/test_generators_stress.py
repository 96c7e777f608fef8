"""Stress cases (generators.strategies.STRESS_VARIANTS): the first example of every cell combines
the input dimensions real kernels break on (a vector-width row length with a tail, special values
at aligned positions inside full vector blocks and in the tail, integer extremes aligned across
operands, values whose sum of squares overflows), and shrinking still ends at valid, minimal cases.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, settings

import generators
import opdb
from generators import Case, TensorSpec
from generators import strategies as gs
from generators.tensor import EDGE_PERIOD, magnitude_band

QUIET = dict(database=None, deadline=None, suppress_health_check=list(HealthCheck))


def _first_case(op: str, dtype: str) -> Case:
    seen: list[Case] = []

    @settings(max_examples=1, phases=[Phase.generate], **QUIET)
    @given(generators.from_schema(opdb.lookup(op), dtype))
    def draw(case):
        seen.append(case)

    draw()
    return seen[0]


def _cases(op: str, dtype: str, n: int) -> list[Case]:
    seen: list[Case] = []

    @settings(max_examples=n, phases=[Phase.generate], **QUIET)
    @given(generators.from_schema(opdb.lookup(op), dtype))
    def draw(case):
        seen.append(case)

    draw()
    return seen


def _cpu(spec: TensorSpec) -> torch.Tensor:
    return spec.materialize(lambda t: t)


def test_first_example_is_an_edges_case_with_aligned_specials():
    case = _first_case("aten::fmod.Tensor", "float32")
    a, b = case.tensor_specs()[:2]
    assert (a.edges, b.edges) == (0, 1)
    assert a.shape == b.shape and a.shape[-1] == gs.STRESS_LENGTHS[0] and a.numel >= 2 * gs.STRESS_LENGTHS[0]
    x, y = _cpu(a).reshape(-1), _cpu(b).reshape(-1)
    block = slice(0, 32)  # a float32 loop step of two AVX-512 vectors: a full block on any x86 CPU
    # a finite dividend over a subnormal divisor, at the same position inside a full block
    sub = (y[block] != 0) & (y[block].abs() < torch.finfo(torch.float32).tiny) & x[block].isfinite()
    assert sub.any()
    assert x[block].isnan().any() and x[block].isposinf().any() and y[block].isnan().any()
    # specials in the scalar tails too: each row's last element meets another pattern slot
    tails = _cpu(b)[..., -1]
    assert (~tails.isfinite() | (tails.abs() < torch.finfo(torch.float32).tiny)).any()
    assert len({(r * a.shape[-1] + a.shape[-1] - 1) % EDGE_PERIOD for r in range(a.shape[0])}) == a.shape[0]


def test_first_example_aligns_int_min_over_minus_one():
    case = _first_case("aten::div.Tensor_mode", "int32")
    a, b = (_cpu(s).reshape(-1) for s in case.tensor_specs()[:2])
    assert ((a == torch.iinfo(torch.int32).min) & (b == -1)).any()
    assert (b != 0).all()  # the divisor's domain is nonzero: the pattern keeps it


def test_edges_keep_restricted_domains():
    spec = TensorSpec((3, 57), "float32", values="positive", seed=3, edges=1)
    x = _cpu(spec)
    assert (x > 0).all() and (x < torch.finfo(torch.float32).tiny).any()
    with pytest.raises(ValueError):
        TensorSpec((3,), "complex64", edges=0)


def test_huge_variant_squares_fit_but_row_sums_of_squares_overflow():
    huge = [s for c in _cases("aten::native_layer_norm", "float32", 40) for s in c.tensor_specs() if s.magnitude == "square_sum"]
    assert huge, "no huge stress case in 40 examples"
    lo, hi = magnitude_band("square_sum", torch.float32)
    top = torch.finfo(torch.float32).max
    x = _cpu(huge[0]).double()
    assert ((x.abs() >= lo * 0.99) & (x.abs() <= hi * 1.01)).all()
    assert (x * x <= top).all() and ((x * x).sum(-1) > top).any()


def test_edges_spec_roundtrips_through_json():
    case = _first_case("aten::fmod.Tensor", "float32")
    again = Case.from_json(case.to_json())
    assert again == case
    assert torch.equal(_cpu(again.tensor_specs()[1]).nan_to_num(7.0), _cpu(case.tensor_specs()[1]).nan_to_num(7.0))


def _has_subnormal_divisor(case: Case) -> bool:
    specs = case.tensor_specs()
    if len(specs) < 2 or specs[1].dtype != "float32":
        return False
    y = _cpu(specs[1])
    return bool(((y != 0) & (y.abs() < torch.finfo(torch.float32).tiny)).any())


def test_a_stress_failure_shrinks_to_a_valid_case_that_keeps_it():
    op = opdb.lookup("aten::fmod.Tensor")
    case = find(generators.from_schema(op, "float32"), _has_subnormal_divisor, settings=settings(max_examples=200, **QUIET))
    assert _has_subnormal_divisor(case)
    args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    torch.ops.aten.fmod.Tensor(*args, **kwargs)  # valid: the CPU reference accepts it

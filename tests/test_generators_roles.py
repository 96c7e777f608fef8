"""Argument roles (generators.argtypes, "argument roles"; opdb/rules/roles.toml): an argument that
acts as an exponent or a shift count gets, in a share of cases, integers just past its dtype's
exponent range (or counts at the integer widths) with small mantissas at the same positions; and
a dim argument goes along an expanded (stride-0) dim 0 in a share of the cases that have one.
"""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, Phase, find, given, seed, settings

import generators
import opdb
from generators import Case, TensorSpec
from generators.tensor import EDGE_PERIOD, SHIFT_COUNTS, exponent_band

QUIET = {"database": None, "deadline": None, "suppress_health_check": list(HealthCheck)}


def _cases(op: str, dtype: str, n: int, cell_seed: int = 0) -> list[Case]:
    seen: list[Case] = []

    @seed(cell_seed)
    @settings(max_examples=n, phases=[Phase.generate], **QUIET)
    @given(generators.from_schema(opdb.lookup(op), dtype))
    def draw(case):
        seen.append(case)

    draw()
    return seen


def _run(case: Case):
    args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    return opdb.lookup(case.op).resolve()(*args, **kwargs)


def _arg(case: Case, op: str, name: str):
    names = [a.name for a in opdb.lookup(op).arguments]
    return case.args[names.index(name)] if names.index(name) < len(case.args) else case.kwargs[name]


def test_the_exponent_band_lies_just_past_each_dtypes_exponent_range():
    for dtype, lo_at_most, hi_at_least in (
        (torch.float16, 12, 30),
        (torch.float32, 100, 200),
        (torch.bfloat16, 100, 200),
    ):
        lo, hi = exponent_band(dtype)
        top = torch.finfo(dtype).max
        assert lo <= lo_at_most and hi >= hi_at_least
        assert 2.0**lo < top < 2.0**hi  # the band straddles overflow of 2**e itself
    x = TensorSpec((4, 33), "float16", magnitude="exponent", seed=1).materialize(lambda t: t)
    assert torch.equal(x, x.round()) and x.min() >= 10 and x.max() <= 40
    n = TensorSpec((4, 33), "int32", magnitude="exponent", seed=1).materialize(lambda t: t)
    assert set(n.unique().tolist()) <= set(SHIFT_COUNTS) and len(n.unique()) > 4
    # mantissas: three in four log-uniform down to the smallest normal, the others in the kind's own range
    m = TensorSpec((4, 33), "float16", magnitude="mantissa", seed=1).materialize(lambda t: t).abs()
    small = m < 2**-4
    assert 0.35 < small.float().mean() < 0.8 and (m[small] >= torch.finfo(torch.float16).smallest_normal).all()
    assert m.max() <= 3 and (m > 1.5).any()


def _reaches_ldexp_overflow(case: Case) -> bool:
    """Some position where 2**e overflows the dtype while m * 2**e fits (pytorch#133265)."""
    m, e = (s.materialize(lambda t: t) for s in case.tensor_specs()[:2])
    m, e = torch.broadcast_tensors(m.double(), e.double())
    top = torch.finfo(case.tensor_specs()[0].torch_dtype).max
    exact = torch.ldexp(m, e)
    return bool(((2.0**e > top) & exact.isfinite() & (exact.abs() < top) & (m != 0)).any())


def test_ldexp_draws_exponents_past_the_range_over_small_mantissas():
    # three cells: one cell's count swings from 5 to 24 of 30 with the seed (about 2/3 of the
    # cases outside "huge" ones on average), and any change to the draw order moves it
    cases = [c for s in range(3) for c in _cases("aten::ldexp.Tensor", "float16", 30, cell_seed=s)]
    banded = [c for c in cases if [s.magnitude for s in c.tensor_specs()[:2]] == ["mantissa", "exponent"]]
    assert len(banded) >= 24, len(banded)  # the role: other is the exponent, self its mantissa
    assert not any(c.tensor_specs()[0].magnitude == "exponent" for c in cases)
    assert sum(map(_reaches_ldexp_overflow, banded)) >= len(banded) // 3
    for c in banded:
        _run(c)  # valid: the CPU accepts it


def test_an_ldexp_overflow_shrinks_to_a_valid_case_that_keeps_it():
    op = opdb.lookup("aten::ldexp.Tensor")
    case = find(
        generators.from_schema(op, "float16"),
        _reaches_ldexp_overflow,
        settings=settings(max_examples=200, derandomize=True, **QUIET),
    )
    assert _reaches_ldexp_overflow(case)
    assert case.tensor_specs()[1].magnitude == "exponent" and case.tensor_specs()[1].edges is None
    assert Case.from_json(case.to_json()) == case
    assert _run(case).isinf().any()  # and the bug shows: the CPU's 2**e in float16 is inf


def test_shift_counts_and_scalar_exponents_take_the_band():
    counts = [_arg(c, "aten::__lshift__.Scalar", "other") for c in _cases("aten::__lshift__.Scalar", "int32", 60)]
    assert len([c for c in counts if c in SHIFT_COUNTS and c >= 7]) >= 8
    shifts = _cases("aten::bitwise_left_shift.Tensor", "int64", 30)
    banded = [c for c in shifts if c.tensor_specs()[1].magnitude == "exponent"]
    assert banded and all(c.tensor_specs()[0].magnitude != "exponent" for c in shifts)
    for c in banded:
        n = c.tensor_specs()[1].materialize(lambda t: t)
        counts = torch.isin(n, torch.tensor(SHIFT_COUNTS))
        # an edge pattern keeps 4 positions in 11 for the counts (-1, INT_MIN, INT_MAX at the others)
        assert counts.all() if c.tensor_specs()[1].edges is None else counts.any() or n.numel() < EDGE_PERIOD
        _run(c)
    # pow's exponent is a role by its name alone
    lo, hi = exponent_band(torch.float32)
    powers = [_arg(c, "aten::pow.Tensor_Scalar", "exponent") for c in _cases("aten::pow.Tensor_Scalar", "float32", 40)]
    assert len([p for p in powers if isinstance(p, int) and lo <= p <= hi]) >= 8


def test_ops_without_an_exponent_role_draw_no_role_band():
    for op in ("aten::add.Tensor", "aten::mul.Tensor"):
        for c in _cases(op, "float16", 30):
            assert not {s.magnitude for s in c.tensor_specs()} & {"exponent", "mantissa"}


def _median_along_expanded(case: Case) -> bool:
    self = case.tensor_specs()[0]
    dim = case.args[1] if len(case.args) > 1 else case.kwargs.get("dim")
    return self.layout == "expanded" and len(self.shape) >= 2 and self.shape[0] > 1 and dim % len(self.shape) == 0


def test_a_dim_goes_along_the_expanded_dim_in_most_expanded_cases():
    # 30 cells: a cell's 40 derandomized examples are one correlated draw, and ten cells of them
    # swung between 26 and 54 along-expanded cases with unrelated changes to the choice sequence
    cases = [c for s in range(30) for c in _cases("aten::median.dim", "float32", 40, cell_seed=s)]
    expanded = [
        c
        for c in cases
        if c.tensor_specs()[0].layout == "expanded"
        and len(c.tensor_specs()[0].shape) >= 2
        and c.tensor_specs()[0].shape[0] > 1
    ]
    assert len(expanded) >= 60, len(expanded)
    # an ordinary dim draw is dim 0 in about half of them (18 of 36 before the rule)
    assert sum(map(_median_along_expanded, expanded)) >= 0.65 * len(expanded)
    # and an op with a dim argument draws its first tensor expanded more often than one layout
    # in five (31 of 400 cases went along an expanded dim 0 before, 85 with both rules). Since
    # stress shapes have an empty outer dim one time in six (generators.strategies._stress_empty)
    # fewer cases can go along dim 0 at all (324 of 400 here, 363 before), and 85 was a lucky
    # draw (seeds 10-39: 121 of 1200 with both rules even then): now 52, 37 without the
    # expanded-first rule, 11 without either rule; 54 since a huge case is contiguous half the
    # time and draws expanded-for-its-dim one time in two (43 with contiguous and no such draw);
    # over 30 cells, with a huge case's 48 rows drawn too: 153 of 1200
    assert sum(map(_median_along_expanded, cases)) >= 0.1 * len(cases)
    # the shrunk form stays valid and still shows median's uninitialised read of an expanded input
    case = find(
        generators.from_schema(opdb.lookup("aten::median.dim"), "float32"),
        _median_along_expanded,
        settings=settings(max_examples=300, derandomize=True, **QUIET),
    )
    values = _run(case)[0]
    assert values.shape == case.tensor_specs()[0].shape[1:]


def _reaches_pnorm_overflow(case: Case) -> bool:
    """A p-norm order at which |x|**p overflows float32 while the norm itself fits (pytorch#184036)."""
    p = _arg(case, "aten::pairwise_distance", "p") if len(case.args) > 2 or "p" in case.kwargs else 2.0
    x1, x2 = (s.materialize(lambda t: t).double() for s in case.tensor_specs()[:2])
    d = (x1 - x2).abs()
    top = torch.finfo(torch.float32).max
    # a single term is its own norm, which the kernel returns without the power
    return d.dim() >= 1 and d.shape[-1] >= 2 and p > 2 and bool((d.float() ** p).isinf().any()) and bool(d.max() < top)


def test_a_norm_order_is_an_exponent_always_given_in_its_band():
    lo, hi = exponent_band(torch.float32)
    cases = _cases("aten::pairwise_distance", "float32", 60)
    banded = [c for c in cases if c.tensor_specs()[0].magnitude == "mantissa"]
    assert len(banded) >= 8, len(banded)
    for c in banded:  # the order is given whenever its partners are in the mantissa band
        assert lo <= _arg(c, "aten::pairwise_distance", "p") <= hi
        _run(c)
    case = find(
        generators.from_schema(opdb.lookup("aten::pairwise_distance"), "float32"),
        _reaches_pnorm_overflow,
        settings=settings(max_examples=200, derandomize=True, **QUIET),
    )
    assert _reaches_pnorm_overflow(case) and _run(case).isinf().any()

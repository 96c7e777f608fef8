"""Stress cases (generators.strategies.STRESS_VARIANTS): most examples after a cell's first combine
the input dimensions real kernels break on (a vector-width row length with a tail, special values
at aligned positions inside full vector blocks and in the tail, integer extremes aligned across
operands, values whose squares overflow), and shrinking still ends at valid, minimal cases.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, seed, settings

import generators
import opdb
from generators import Case, TensorSpec
from generators import strategies as gs
from generators.tensor import EDGE_PERIOD, magnitude_band

QUIET = {"database": None, "deadline": None, "suppress_health_check": list(HealthCheck)}


def _first_case(op: str, dtype: str) -> Case:
    """The first "edges" stress case a cell draws."""
    for case in _cases(op, dtype, 20):
        if any(t.edges is not None for t in case.tensor_specs()):
            return case
    raise AssertionError(f"no edges stress case in 20 examples of {op} {dtype}")


def _cases(op: str, dtype: str, n: int) -> list[Case]:
    seen: list[Case] = []

    @settings(max_examples=n, phases=[Phase.generate], derandomize=True, **QUIET)
    @given(generators.from_schema(opdb.lookup(op), dtype))
    def draw(case):
        seen.append(case)

    draw()
    return seen


def _cpu(spec: TensorSpec) -> torch.Tensor:
    return spec.materialize(lambda t: t)


def test_edges_case_has_aligned_specials_in_blocks_and_tails():
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


def test_edges_case_aligns_int_min_over_minus_one():
    case = _first_case("aten::div.Tensor_mode", "int32")
    a, b = (_cpu(s).reshape(-1) for s in case.tensor_specs()[:2])
    assert ((a == torch.iinfo(torch.int32).min) & (b == -1)).any()
    assert (b != 0).all()  # the divisor's domain is nonzero: the pattern keeps it


def test_edges_cases_keep_their_operands_aligned_in_rows_and_dtype():
    # a partner broadcast along a row ([3, 1], 0-d) carries its pattern elsewhere and a promoted
    # one leaves the vectorised loop: remainder's NaN for a subnormal divisor (pytorch#193753)
    # needs neither. A row repeated over the outer dims ([25] against [3, 25]) keeps each row
    # contiguous and its pattern aligned with the first row's.
    for op, dtype in (("aten::remainder.Tensor", "float32"), ("aten::div.Tensor_mode", "int64")):
        edges = [c for c in _cases(op, dtype, 100) if c.tensor_specs()[0].edges is not None]
        assert len(edges) >= 10
        repeated = 0
        for case in edges:
            a, b = case.tensor_specs()[:2]
            assert (b.dtype, b.edges) == (a.dtype, 1), case.describe()
            assert b.shape == a.shape or (b.shape[-1] == a.shape[-1] and math.prod(b.shape) == a.shape[-1])
            repeated += b.shape != a.shape
            if a.numel == 0:
                continue
            x, y = (_cpu(s).broadcast_to(a.shape).reshape(-1, a.shape[-1])[0] for s in (a, b))
            meet = ~x.isfinite() & ~y.isfinite() if dtype == "float32" else (x == torch.iinfo(x.dtype).min) & (y == -1)
            assert meet.any(), case.describe()
        assert 0 < repeated < len(edges)


def test_edges_keep_restricted_domains():
    """A positive domain keeps its values out of the negatives, and reaches both its ends:
    subnormals and both zeros (its closed boundary: log(+-0) = -inf) and +inf (polygamma(2, inf)
    is NaN where the limit is -0)."""
    spec = TensorSpec((3, 57), "float32", values="positive", seed=3, edges=1)
    x = _cpu(spec)
    assert (x >= 0).all() and ((x > 0) & (x < torch.finfo(torch.float32).tiny)).any()
    assert (x == math.inf).any() and ((x == 0) & torch.signbit(x)).any() and ((x == 0) & ~torch.signbit(x)).any()
    with pytest.raises(ValueError):
        TensorSpec((3,), "bool", edges=0)


def test_edges_of_the_gamma_family_reach_its_poles():
    """The gamma family's domain keeps off the poles in its drawn values and puts them in its edge
    pattern, where their values are a convention an independent reference (SciPy) holds:
    polygamma(1, -2) is finite garbage on the CPU where SciPy gives +inf."""
    x = _cpu(TensorSpec((3, 57), "float32", values="no_poles", seed=3, edges=0))
    assert (x == -2).any() and ((x == 0) & torch.signbit(x)).any() and ((x == 0) & ~torch.signbit(x)).any()
    drawn = _cpu(TensorSpec((3, 57), "float32", values="no_poles", seed=3))
    assert not ((drawn <= 0) & (drawn == drawn.round())).any()


def test_complex_edges_pair_special_parts_in_one_number():
    """A complex tensor's pattern puts special values in both parts of one number (C99's
    infinities beside NaNs, signed zeros together), aligned across two operands: (-inf+infj) +
    (x+infj) and 0j ** 0j are reached by position."""
    a = _cpu(TensorSpec((3, 57), "complex64", seed=3, edges=0))
    b = _cpu(TensorSpec((3, 57), "complex64", seed=4, edges=1))
    re, im = a.real, a.imag
    assert ((re.isnan()) & (im.isinf())).any() and ((re.isinf()) & (im.isinf())).any()
    assert ((re == 0) & (im == 0) & im.signbit()).any()
    zero_both = (a == 0) & (b == 0)
    assert zero_both.any()  # 0j ** 0j at one position
    assert (a.isinf() & b.imag.isinf()).any()
    # finite numbers stay between them, with a drawn part
    finite = torch.isfinite(a) & ((re.abs() > 1e-3) | (im.abs() > 1e-3))
    assert finite.sum() > a.numel() // 5


def test_huge_variant_values_fit_but_their_squares_do_not():
    huge = [
        s
        for c in _cases("aten::native_layer_norm", "float32", 40)
        for s in c.tensor_specs()
        if s.magnitude == "beyond_sqrt"
    ]
    assert huge, "no huge stress case in 40 examples"
    lo, hi = magnitude_band("beyond_sqrt", torch.float32)
    top = torch.finfo(torch.float32).max
    for spec in huge:
        x = _cpu(spec).double()
        assert ((x.abs() >= lo * 0.99) & (x.abs() <= hi * 1.01)).all()
        assert (x.abs() < top / 1e10).all() and (x * x > top).all()


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
    case = find(
        generators.from_schema(op, "float32"), _has_subnormal_divisor, settings=settings(max_examples=200, **QUIET)
    )
    assert _has_subnormal_divisor(case)
    args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    torch.ops.aten.fmod.Tensor(*args, **kwargs)  # valid: the CPU reference accepts it


def test_most_examples_after_the_first_are_stress_cases():
    """As the runner draws a cell (5 examples, a seed per cell): the first example plain, and
    most cells meet both stress variants among the other four."""
    op = opdb.lookup("aten::add.Tensor")
    edges = huge = 0
    cells: list[list[Case]] = []
    for cell_seed in range(12):
        cells.append([])

        @seed(cell_seed)
        @settings(max_examples=5, phases=[Phase.generate], **QUIET)
        @given(generators.from_schema(op, "float32"))
        def draw(case):
            cells[-1].append(case)

        draw()
        seen = cells[-1]
        assert not any(t.edges is not None or t.magnitude == "beyond_sqrt" for t in seen[0].tensor_specs())
        edges += any(t.edges is not None for c in seen[1:] for t in c.tensor_specs())
        huge += any(t.magnitude == "beyond_sqrt" for c in seen[1:] for t in c.tensor_specs())
    assert edges >= 9 and huge >= 7, (edges, huge)


def test_a_failure_met_in_a_stress_case_shrinks_to_a_plain_one():
    """A fault on any tensor of more than 3 elements, first met in a stress case (171 elements,
    specials), shrinks to a small plain case: stress is never what hypothesis calls simpler."""
    failures: list[Case] = []

    @settings(max_examples=100, phases=[Phase.generate, Phase.shrink], derandomize=True, **QUIET)
    @given(generators.from_schema(opdb.lookup("aten::abs"), "float32"))
    def prop(case):
        if case.tensor_specs()[0].numel > 3:
            failures.append(case)
            raise AssertionError("injected fault")

    with pytest.raises(AssertionError, match="injected fault"):
        prop()
    first, last = failures[0].tensor_specs()[0], failures[-1].tensor_specs()[0]
    assert first.edges is not None or first.magnitude == "beyond_sqrt"
    assert last.edges is None and last.magnitude == "" and last.numel <= 7


def test_edges_cases_set_their_tensors_apart_in_magnitude_both_ways():
    # a large dividend over a small divisor in one column, the other way round in the next: where
    # half precision loses a quotient's integers (pytorch#193754) and ldexp's power overflows
    apart = [
        c
        for c in _cases("aten::floor_divide", "bfloat16", 40)
        if [s.magnitude for s in c.tensor_specs()[:2]] == ["apart_even", "apart_odd"]
    ]
    assert apart, "no edges case apart in magnitude in 40 examples"
    a, b = (_cpu(s).double() for s in apart[0].tensor_specs()[:2])
    finite = a.isfinite() & b.isfinite() & (a != 0) & (b != 0)
    a, b = torch.broadcast_tensors(a, b)
    big = (a.abs() >= 100) & (b.abs() <= 3) & finite
    assert big[..., 0::2].any() and not big[..., 1::2].any()
    assert ((b.abs() >= 100) & (a.abs() <= 3) & finite)[..., 1::2].any()


def test_a_huge_batch_norm_case_trains():
    # evaluation mode scales by the given running stats: nothing computed from huge inputs
    huge = [
        c
        for c in _cases("aten::native_batch_norm", "float32", 40)
        if any(s.magnitude == "beyond_sqrt" for s in c.tensor_specs())
    ]
    assert huge and all(c.args[5] is True for c in huge)


def test_a_huge_tensor_is_contiguous_in_some_cases_and_strided_in_others():
    # a contiguous fast path holds what a strided input's generic path does not (batch norm's
    # float32 variance overflows for contiguous input only, pytorch#162489), and the other way
    # round for kernels that ignore strides
    layouts = {
        s.layout
        for c in _cases("aten::native_batch_norm", "float32", 60)
        for s in c.tensor_specs()
        if s.magnitude == "beyond_sqrt"
    }
    assert "contiguous" in layouts and layouts - {"contiguous"}, layouts


def test_some_huge_cases_hold_more_than_a_thousand_elements():
    # kernels change algorithm above a size (a second reduction pass, another block); plain
    # cases drew a tensor that large in 1 case of 200; edges cases keep 3 rows
    cases = _cases("aten::sum", "float32", 80)
    huge = [c for c in cases if c.tensor_specs()[0].magnitude == "beyond_sqrt"]
    assert any(c.tensor_specs()[0].numel > 1024 for c in huge)
    assert all(c.tensor_specs()[0].shape[0] <= gs.STRESS_ROWS for c in cases if c.tensor_specs()[0].edges is not None)


def test_a_huge_case_draws_one_huge_tensor_and_which_one_varies():
    # a product of two huge tensors (x @ W in a cell's gates, mat1 @ mat2) leaves the dtype by the
    # op's own definition, where golden float64 does not: one huge tensor per case, the others
    # in their own range, and which one is drawn (lstm_cell's six tensors: another than the
    # first in one huge case of four; hypothesis's generation varies a case it drew before, so
    # 60 examples held 15 huge cases that all kept the first)
    roles: dict[str, set[int]] = {}
    for op, dtype, n in [
        ("aten::lstm_cell", "float32", 120),
        ("aten::addmm", "bfloat16", 60),
        ("aten::native_layer_norm", "float32", 60),
    ]:
        for case in _cases(op, dtype, n):
            huge = [i for i, s in enumerate(case.tensor_specs()) if s.magnitude == "beyond_sqrt"]
            assert len(huge) <= 1, (op, case)
            roles.setdefault(op, set()).update(huge)
    assert all(roles.values()), roles  # every op met a huge case
    assert len(roles["aten::lstm_cell"]) >= 2, roles


def test_an_exactly_determined_op_draws_its_large_tensor_where_half_precision_integers_end():
    # round in bfloat16: huge values are integers that round to themselves; between 128 and 512 a
    # floor(x + 0.5) fast path goes one off. A huge case of an exact op draws the moderate band
    cases = _cases("aten::round", "bfloat16", 60)
    bands = {s.magnitude for c in cases for s in c.tensor_specs()}
    assert "beyond_sqrt" not in bands and "moderate" in bands
    assert "beyond_sqrt" in {s.magnitude for c in _cases("aten::sin", "bfloat16", 60) for s in c.tensor_specs()}


def test_an_op_defined_by_products_of_its_inputs_gets_no_huge_tensor_but_keeps_strided_layouts():
    # Adam's second moment is grad * grad by definition (opdb hint input_products): a gradient
    # beyond sqrt(max) leaves the range in every float32 kernel, so golden cannot judge it; the
    # huge case's strided layouts (kernels that ignore strides) stay
    cases = _cases("aten::_fused_adam", "float32", 60)
    assert not [c for c in cases for s in c.tensor_specs() if s.magnitude == "beyond_sqrt"]
    assert any(s.layout != "contiguous" for c in cases for s in c.tensor_specs() if s.dtype == "float32")
    # a determinant multiplies n entries (a 2x2 of 1e20s: 1e40), and its gradient goes through it
    dets = _cases("aten::_linalg_det", "float32", 60)
    assert dets and not [c for c in dets for s in c.tensor_specs() if s.magnitude == "beyond_sqrt"]


def test_a_factory_size_is_drawn_as_a_tensor_shape_is():
    """A factory's size is its whole case: its out= variants need an out worth striding (two
    dims over 1, 16 elements and more, where a fill's vectorised path starts: randn into a
    permuted or sliced out draws other values, an expected failure of PyTorch's test_out), so
    most examples after the first draw stress rows, not the tiny shapes of a size argument."""
    sizes = [c.args[0] for c in _cases("aten::randn.out", "none", 20)]
    assert sizes[0] == [], sizes  # the first example stays the simplest
    strided = [s for s in sizes if math.prod(s) >= 16 and sum(n > 1 for n in s) >= 2]
    assert len(strided) >= len(sizes) // 2, sizes
    assert all(math.prod(s) <= 256 for s in sizes), sizes


def test_a_reductions_huge_case_reaches_near_the_dtypes_largest_value():
    # a sum of such values overflows where the mean fits (pytorch#44350); an elementwise op's huge
    # case keeps the band where squares overflow
    from conform.run.cell import _near_max

    mean = [c for c in _cases("aten::mean", "float32", 100) if any(t.magnitude == "near_max" for t in c.tensor_specs())]
    assert len(mean) >= 2
    assert all(_near_max(c) for c in mean)  # their gradients, of an overflowed statistic, are not compared
    x = next(x for x in (_cpu(c.args[0]) for c in mean) if x.numel())
    assert float(x.abs().max()) > torch.finfo(torch.float32).max / 64
    assert not any(t.magnitude == "near_max" for c in _cases("aten::sqrt", "float32", 60) for t in c.tensor_specs())


def test_statistics_and_norm_layers_meet_one_large_value_repeated():
    # degenerate data: a variance of 0 and a normalisation's 0 are exact there, while a kernel
    # that squares in the dtype overflows (the std of equal values near 1e38 is inf on the CPU,
    # pytorch#44350; a layer norm of one value near 1e20, pytorch#162489)
    from conform.run.cell import _near_max

    for op, band in (("aten::std", "near_max"), ("aten::native_layer_norm", "beyond_sqrt")):
        specs = [(c, s) for c in _cases(op, "float32", 150) for s in c.tensor_specs() if s.magnitude == "equal_" + band]
        assert specs, f"no {op} case of one {band} value repeated in 150 examples"
        lo, hi = magnitude_band(band, torch.float32)
        for case, spec in specs:
            x = _cpu(spec).double()
            if not x.numel():
                continue
            value = float(x.flatten()[0])
            assert (x == value).all() and lo <= abs(value) <= hi
            assert math.frexp(abs(value))[0] == 0.5  # a power of two: n equal values sum exactly
            assert _near_max(case) == (band == "near_max")
    std = next(
        s for c in _cases("aten::std", "float32", 150) for s in c.tensor_specs() if s.magnitude == "equal_near_max"
    )
    assert "one value repeated" in std.describe()
    # an elementwise op's huge case keeps random values
    assert not any(
        t.magnitude.startswith("equal_") for c in _cases("aten::sqrt", "float32", 60) for t in c.tensor_specs()
    )


def test_one_value_repeated_is_judged_where_a_result_is_not_finite():
    # a normalisation of equal values is 0 / 0 to within rounding: a mean an ulp off gives values
    # of order one, which is rounding; a NaN (E[x**2] - E[x]**2 as inf - inf) is the bug
    from conform.outcomes import Outcome
    from conform.run import execute
    from generators import Case
    from tests.faulty import FaultyBackend

    def off_by_one(func, args, kwargs):
        out = func(*args, **kwargs)
        return (out[0] + 1.0, *out[1:])

    def nan(func, args, kwargs):
        out = func(*args, **kwargs)
        return (torch.full_like(out[0], math.nan), *out[1:])

    class OffByOne(FaultyBackend):
        name = "norm-off-by-one"
        targets = frozenset({torch.ops.aten.native_layer_norm.default})
        bug = off_by_one

    class NaNs(OffByOne):
        name = "norm-nan"
        bug = nan

    op = opdb.lookup("aten::native_layer_norm")
    # rows of 57: the CPU's own kernel is right there (on rows of 16 it is the NaN, pytorch#162489)
    x = TensorSpec((3, 57), "float32", seed=2, magnitude="equal_beyond_sqrt")
    case = Case(op.qualname, (x, [57], None, None, 1e-5))
    assert execute.degenerate_data(case, op)
    assert execute.run_case(op, case, OffByOne(), grad=False, relations=True).outcome is Outcome.PASS
    assert execute.run_case(op, case, NaNs(), grad=False).outcome is Outcome.MISMATCH
    plain = Case(op.qualname, (TensorSpec((3, 57), "float32", seed=2), [57], None, None, 1e-5))
    assert execute.run_case(op, plain, OffByOne(), grad=False).outcome is Outcome.MISMATCH


def test_an_rms_norm_of_one_value_repeated_is_judged_in_its_values():
    # no mean subtracted: x / sqrt(mean(x**2)) is +-1 there; the float32 kernel squares in
    # float32 and returns 0 for values beyond the square root of the largest
    from conform.backends import CPUBackend
    from conform.outcomes import Outcome
    from conform.run import execute

    op = opdb.lookup("aten::rms_norm")
    x = TensorSpec((3, 41), "float32", seed=2, magnitude="equal_beyond_sqrt")
    case = Case(op.qualname, (x, [41], None, 1e-5))
    assert not execute.degenerate_data(case, op)
    r = execute.run_case(op, case, CPUBackend(), grad=False)
    assert r.outcome is Outcome.MISMATCH, r.message

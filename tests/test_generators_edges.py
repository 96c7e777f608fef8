"""Values at an op's own edges: scale arguments at their extremes, and inputs whose results lie
just inside the dtype's overflow and underflow thresholds, computed by inverting the op."""

from __future__ import annotations

import math

import pytest
import torch

import opdb
from conform.judge import references
from generators import TensorSpec, from_schema, op_ranges
from generators.argtypes import scale_extremes
from tests.test_generators import _drawn


def _cases(qualname: str, dtype: str, examples: int = 60) -> list:
    return _drawn(from_schema(opdb.lookup(qualname), dtype), examples=examples)


def _scalars(case) -> dict:
    names = [a.name for a in opdb.lookup(case.op).arguments]
    bound = dict(zip(names, case.args))
    bound.update(case.kwargs)
    return bound


# -- scale arguments -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scales_are_drawn_large_together(dtype):
    large = scale_extremes(dtype)["large"]
    cases = _cases("aten::softplus", dtype)
    together = [c for c in cases if {_scalars(c).get(n) for n in ("beta", "threshold")} == {large}]
    # beta x past exp's overflow while under the threshold: softplus's naive formula overflows there
    assert len(together) >= 4, f"{len(together)} softplus cases with beta and threshold both at {large:g}"
    assert math.log(large) > math.log(torch.finfo(getattr(torch, dtype)).max) / 2


def test_a_regulariser_is_drawn_tiny_not_large():
    eps = [_scalars(c).get("eps") for c in _cases("aten::native_layer_norm", "float32")]
    tiny, large = scale_extremes("float32")["tiny"], scale_extremes("float32")["large"]
    assert tiny in eps and large not in eps


def test_ordinary_scales_stay_the_common_case():
    extremes = set(scale_extremes("float32").values())
    betas = [_scalars(c).get("beta") for c in _cases("aten::softplus", "float32")]
    assert sum(b in extremes for b in betas) < len(betas) / 2


# -- the op's own range, computed ---------------------------------------------------------------


def _band(qualname: str, dtype: str):
    # as a cell draws them: with conform's independent references
    return op_ranges.parse(op_ranges.computed(opdb.lookup(qualname), dtype, references.float64_function))


def test_thresholds_are_computed_by_inverting_the_op():
    # i0(x) = max(float32) at 91.9: the band reaches past 88.72, where exp(x) alone overflows
    (lo, hi), neg = _band("aten::i0", "float32")
    assert lo < 88.72 < hi < 91.95 and neg == (lo, hi)
    # float64: from the stable reference, not the float64 kernel (which overflows at 709.78)
    (lo, hi), _ = _band("aten::i0", "float64")
    assert lo < 709.78 and 712.0 < hi < 713.99
    # exp: overflow for positive x, underflow below the smallest normal value for negative x
    (lo, hi), (nlo, nhi) = _band("aten::exp", "float16")
    assert lo < math.log(65504) < lo + 6 and hi < math.log(65504)
    assert nlo < -math.log(torch.finfo(torch.float16).smallest_normal) < nhi
    # erfcx overflows for negative x only, its derivative (about 2|x| erfcx(x)) a little earlier;
    # for positive x it decays like 1 / (x sqrt(pi)), too slowly for a tail band of its own
    pos, (nlo, nhi) = _band("aten::special_erfcx", "float32")
    assert pos is None and 8.8 < nlo < 9.0 < nhi < 9.4


@pytest.mark.parametrize("qualname", ["aten::sin", "aten::abs", "aten::tan", "aten::sqrt", "aten::add.Tensor"])
def test_ops_without_an_edge_of_their_own_get_no_band(qualname):
    # sin(x) ~ x near zero, abs(x) = x: the input is at the dtype's edge itself; add is binary
    assert op_ranges.computed(opdb.lookup(qualname), "float32") == ""


def test_a_range_token_is_a_stored_magnitude_that_draws_inside_its_bands():
    token = op_ranges.token(((86.0, 91.0), None))
    spec = TensorSpec((64,), "float32", seed=5, magnitude=token)
    x = spec.materialize(lambda t: t).double()
    pos = x[x > 0]
    assert pos.numel() and bool(((pos >= 86.0 * (1 - 1e-6)) & (pos <= 91.0 * (1 + 1e-6))).all())
    assert bool((x[x < 0] > -3.5).all())  # no band on that side: the kind's own values
    with pytest.raises(ValueError):
        TensorSpec((3,), "float32", magnitude="range:1:2")


def test_unary_op_cases_reach_their_premature_overflow():
    cases = _cases("aten::i0", "float32")
    reached = 0
    for case in cases:
        (x,), _ = case.materialize(lambda t: t, torch.device("cpu"))
        finite = x[torch.isfinite(x)].double().abs()
        reached += bool(((finite > 88.73) & (finite < 91.9)).any())
    assert reached >= len(cases) // 6, f"{reached} of {len(cases)} i0 cases reach past exp's overflow"


# -- sampling coordinates --------------------------------------------------------------------


def test_sampling_coordinates_meet_infinity_and_nan():
    # a grid coordinate outside [-1, 1] is valid (the padding mode decides its sample): the grid
    # samplers' grids take the edge patterns (+-inf, NaN), where the CPU's kernels give NaN for a
    # sample zeros padding defines as 0, and segfault under border and reflection (pytorch#24823)
    cases = _cases("aten::grid_sampler_2d", "float32")
    grids = [c.args[1] for c in cases]
    assert all(g.values == "coordinate" for g in grids)
    values = [g.materialize(lambda t: t) for g in grids]
    assert sum(bool(v.isinf().any()) for v in values) >= 5
    assert sum(bool(v.isnan().any()) for v in values) >= 5
    assert sum(bool(v.isfinite().all()) for v in values) >= 5  # plain cases stay within [-1, 1]
    assert all(float(v.abs().max()) <= 1 for v in values if bool(v.isfinite().all()) and v.numel())


def test_the_grid_sampler_backward_takes_finite_coordinates_from_its_caller():
    # its caller's forward would die at a non-finite coordinate while the case is drawn, with no
    # case of the backward's own to show; the forward's cell reports that
    for case in _cases("aten::grid_sampler_2d_backward", "float32", examples=30):
        args, _ = case.materialize(lambda t: t, torch.device("cpu"))
        assert bool(args[2].isfinite().all()), case.describe()


def test_an_infinite_coordinate_under_zeros_padding_samples_zero():
    # golden is the same kernel (NaN there too); the decomposition is the independent reference
    from conform.backends import CPUBackend
    from conform.outcomes import Outcome
    from conform.run import execute
    from generators.case import Case

    inf = math.inf
    image = TensorSpec((1, 1, 3, 3), "float32", data=tuple(float(i) for i in range(9, 0, -1)))
    grid = TensorSpec((1, 1, 2, 2), "float32", values="coordinate", data=(inf, 0.0, 0.25, -0.5))
    op = opdb.lookup("aten::grid_sampler_2d")
    r = execute.run_case(op, Case(op.qualname, (image, grid, 0, 0, False)), CPUBackend(), relations=True)
    assert r.outcome is Outcome.MISMATCH and "independent reference" in r.message, r.message
    finite = TensorSpec((1, 1, 2, 2), "float32", values="coordinate", data=(0.75, 0.0, 0.25, -0.5))
    r = execute.run_case(op, Case(op.qualname, (image, finite, 0, 0, False)), CPUBackend(), relations=True)
    assert r.outcome is Outcome.PASS, r.message


# -- a non-finite entry in a structured matrix ------------------------------------------------


def test_a_factorisation_meets_one_non_finite_entry_in_the_first_matrix():
    # linalg_eigvals segfaults on a NaN entry in torch 2.13's CPU kernel (pytorch#93124)
    from generators.tensor import STRUCTURED_EDGES, STRUCTURED_KINDS

    specs = [
        s
        for c in _cases("aten::linalg_inv", "float32", 80)
        for s in c.tensor_specs()
        if s.values in STRUCTURED_KINDS and s.edges is not None and s.numel
    ]
    assert specs, "no matrix with a non-finite entry in 80 examples"
    for spec in specs:
        t = spec.materialize(lambda t: t)
        first = t.reshape(-1, *t.shape[-2:])
        assert not torch.isfinite(first[0, 0, 0]) and torch.isfinite(first.reshape(-1)[1:]).all()
        assert float(first[0, 0, 0]) in STRUCTURED_EDGES or math.isnan(first[0, 0, 0])
        assert "at [0, 0]" in spec.describe()


def test_a_matrix_with_a_non_finite_entry_is_judged_in_form_and_survival_alone():
    # where a factorisation's NaNs land is the routine's pivoting: a device that puts them
    # elsewhere (here: everywhere) is not wrong there, and is wrong on a finite matrix
    from torch.utils._python_dispatch import TorchDispatchMode

    from conform.backends import CPUBackend
    from conform.outcomes import Outcome
    from conform.run import execute
    from generators import Case

    class _AllNaN(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.linalg_inv_ex.default:
                return (torch.full_like(out[0], math.nan), out[1])
            return out

    class AllNaN(CPUBackend):
        name = "all-nan-inverse"

        def device_context(self):
            return _AllNaN()

    op = opdb.lookup("aten::linalg_inv")
    nonfinite = Case(op.qualname, (TensorSpec((3, 3), "float32", values="invertible", seed=4, edges=0),))
    finite = Case(op.qualname, (TensorSpec((3, 3), "float32", values="invertible", seed=4),))
    assert execute.nonfinite_matrix(nonfinite) and not execute.nonfinite_matrix(finite)
    assert execute.run_case(op, nonfinite, AllNaN(), grad=False).outcome is Outcome.PASS
    assert execute.run_case(op, finite, AllNaN(), grad=False).outcome is Outcome.MISMATCH
    # refusing it and returning NaNs for it are both answers: linalg_eigvals through a dispatch
    # mode goes by linalg_eig, which refuses it, where the CPU's own call returns NaN
    from tests.cpu_kernels import CPUKernels

    eigvals = opdb.lookup("aten::linalg_eigvals")
    one = Case(eigvals.qualname, (TensorSpec((1, 1), "float32", values="invertible", seed=0, edges=0),))
    assert execute.run_case(eigvals, one, CPUKernels()).outcome is Outcome.PASS

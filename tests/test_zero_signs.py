"""Results that depend on where an element sits, and the sign of zero.

Edge patterns put +0 against -0 and mixed-sign exact multiples at the same positions of two
operands; the position relation picks those elements first, compares the sign of zero, and holds
exactly determined results (opdb/rules/positions.toml) to the same bits at every position, naming
the correctly rounded one; an independent reference gives remainder's and fmod's zeros their
documented sign. The real kernels of this torch build carry such bugs (minimum/maximum/clamp's
zero sign by length, remainder's zero sign, bfloat16 rsqrt's scalar path): where they do not
reproduce on the machine, the test that needs one is skipped.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import opdb
from conform.backends import CPUBackend
from conform.judge import metamorphic
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.run import execute
from generators.case import Case, TensorSpec
from tests.faulty import BACKENDS, _FaultMode

aten = torch.ops.aten


def _run(qualname, *specs, kwargs=None, bug=None, target=None, relations=True):
    op = opdb.lookup(qualname)
    case = Case(qualname, tuple(specs), kwargs or {}, seed=5)
    # a bug of the CPU kernel itself, which golden (the same kernel in float64) shares
    mode = _FaultMode(frozenset({target}), bug) if bug is not None else contextlib.nullcontext()
    with mode:
        return execute.run_case(op, case, CPUBackend(), grad=False, relations=relations)


def _edges(dtype="float32", shape=(3, 57), values=("real", "real")):
    return [TensorSpec(shape, dtype, values=v, seed=3 + role, edges=role) for role, v in enumerate(values)]


def _by_length(fn) -> bool:
    """Does fn(n) give another sign of zero alone than in a vector block?"""
    return bool(fn(1)[0].signbit() != fn(64)[0].signbit())


MINIMUM_BUG = _by_length(lambda n: torch.minimum(torch.full((n,), 0.0), torch.full((n,), -0.0)))
CLAMP_BUG = _by_length(lambda n: torch.clamp(torch.full((n,), -0.0), min=torch.zeros(n)))
REMAINDER_BUG = bool(torch.remainder(torch.tensor([-2.0]), torch.tensor([1.0])).signbit())
_X = torch.tensor(0.00099945068359375, dtype=torch.bfloat16)
RSQRT_BUG = torch.rsqrt(_X.expand(64).contiguous())[0].item() != torch.rsqrt(_X.reshape(1)).item()


# -- inputs ---------------------------------------------------------------------------------------


def test_edge_patterns_put_opposite_zeros_and_mixed_sign_multiples_at_the_same_positions():
    a, b = (s.make_cpu_base().reshape(-1) for s in _edges())
    zeros = (a == 0) & (b == 0)
    assert bool((zeros & torch.signbit(a) & ~torch.signbit(b)).any())  # -0 against +0
    assert bool((zeros & ~torch.signbit(a) & torch.signbit(b)).any())  # +0 against -0
    finite = torch.isfinite(a) & torch.isfinite(b) & (a != 0) & (b != 0)
    multiple = finite & (torch.sign(a) != torch.sign(b)) & (torch.fmod(a, b) == 0)
    assert bool(multiple.any())
    # a divisor of the nonzero kind keeps it (remainder's and fmod's `other`)
    a, b = (s.make_cpu_base().reshape(-1) for s in _edges(values=("real", "nonzero")))
    assert bool((b != 0).all()) and bool(((torch.sign(a) != torch.sign(b)) & (torch.fmod(a, b) == 0)).any())


def test_the_position_relation_picks_where_the_sign_of_a_zero_is_at_stake_first():
    n = 400
    a, b = torch.full((n,), float("nan")), torch.full((n,), float("nan"))  # specials everywhere
    a[[37, 211]], b[[37, 211]] = 0.0, -0.0
    a[300], b[300] = -2.0, 1.0
    out = torch.full((n,), float("nan"))
    out[[37, 211]], out[300] = -0.0, -0.0
    for seed in range(5):
        picks = metamorphic._picks(n, [out], [a, b], seed)
        assert {37, 211, 300} <= set(picks), (seed, picks)


# -- signed zeros against themselves: the position relation ---------------------------------------


@pytest.mark.skipif(not MINIMUM_BUG, reason="this torch build's minimum gives one sign of zero at any length")
@pytest.mark.parametrize("qualname", ["aten::minimum", "aten::maximum"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_minimum_and_maximum_zero_sign_by_length_is_found(qualname, dtype):
    r = _run(qualname, *_edges(dtype))
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[position relation]" in r.message and "sign of zero" in r.message, r.message


@pytest.mark.skipif(not CLAMP_BUG, reason="this torch build's clamp gives one sign of zero at any length")
def test_clamp_at_a_zero_tensor_bound_zero_sign_by_length_is_found():
    x, lo = _edges()
    r = _run("aten::clamp.Tensor", x, kwargs={"min": lo})
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[position relation]" in r.message and "sign of zero" in r.message, r.message


@pytest.mark.parametrize("qualname", ["aten::copysign.Tensor", "aten::atan2", "aten::hypot"])
def test_healthy_kernels_keep_their_zero_signs_at_every_position(qualname):
    r = _run(qualname, *_edges())
    assert r.outcome is Outcome.PASS, r.message


def _multiples(dtype: str):
    """Dividends and divisors of mixed signs, every third pair an exact multiple (no subnormal
    divisor: fmod's and remainder's vector path has its own NaN bug there)."""
    n = 3 * 57
    b = [(-1.0) ** i * (0.5 + (i % 5) / 4) for i in range(n)]
    a = [(-1.0) ** (i // 2) * (abs(b[i]) * (1 + i % 3) if i % 3 == 0 else 0.3 + (i % 7) / 3) for i in range(n)]
    return TensorSpec((3, 57), dtype, data=tuple(a)), TensorSpec((3, 57), dtype, data=tuple(b))


# -- signed zeros against an independent reference ------------------------------------------------


@pytest.mark.skipif(not REMAINDER_BUG, reason="this torch build's remainder gives the divisor's sign")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_remainder_of_an_exact_multiple_takes_the_divisors_sign(dtype):
    r = _run("aten::remainder.Tensor", *_multiples(dtype))
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "independent reference (numpy.remainder)" in r.message and "sign of zero" in r.message, r.message


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fmod_of_an_exact_multiple_keeps_the_dividends_sign(dtype):
    r = _run("aten::fmod.Tensor", *_multiples(dtype))
    assert r.outcome is Outcome.PASS, r.message


def test_the_sign_of_a_zero_product_is_compared_with_golden():
    # a device whose product of 0 and -3 is +0.0 (a kernel that adds a zero bias): the main
    # comparison tells it from golden's -0.0; the CPU's own kernel keeps it
    op = opdb.lookup("aten::mul.Tensor")
    case = Case("aten::mul.Tensor", tuple(_edges()), {}, seed=5)
    r = execute.run_case(op, case, BACKENDS["product_zero_sign"](), grad=False)
    assert r.outcome is Outcome.MISMATCH and "sign of zero" in r.message, r.message
    assert execute.run_case(op, case, CPUBackend(), grad=True).outcome is Outcome.PASS


# -- exactly determined results, bit for bit at every position ------------------------------------


@pytest.mark.skipif(not RSQRT_BUG, reason="this torch build's bfloat16 rsqrt rounds once on every path")
def test_bfloat16_rsqrt_scalar_path_rounding_twice_is_found():
    x = TensorSpec((3, 57), "bfloat16", data=(_X.item(),) * 171)
    r = _run("aten::rsqrt", x)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[position relation]" in r.message and "31.625" in r.message and "31.75" in r.message, r.message
    assert "is the correctly rounded value" in r.message, r.message
    # the reproduction script replays it bit for bit
    op = opdb.lookup("aten::rsqrt")
    script = repro_script(op, Case("aten::rsqrt", (x,), {}, seed=5), "cpu", result=r, golden_is_expectation=True)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "repro.py", "exec"), {"__name__": "__main__"})
    assert out.getvalue().strip().splitlines()[-1].startswith("verdict: mismatch")


def _tail_rounds_up(func, args, kwargs):
    """A bfloat16 product whose scalar tail (past the last full block of 16 in a contiguous
    tensor) is one unit above the correctly rounded one: within bfloat16's tolerance."""
    out = func(*args, **kwargs)
    if out.dtype != torch.bfloat16 or not out.is_contiguous() or out.numel() % 16 == 0:
        return out
    flat = out.reshape(-1).clone()
    tail = flat[-(out.numel() % 16) :]
    flat[-(out.numel() % 16) :] = torch.nextafter(tail, torch.full_like(tail, float("inf")))
    return flat.reshape(out.shape)


def test_an_exact_op_whose_tail_is_one_unit_off_is_found_and_the_right_position_named():
    specs = [TensorSpec((3, 57), "bfloat16", seed=s) for s in (1, 2)]
    plain = _run("aten::mul.Tensor", *specs, bug=_tail_rounds_up, target=aten.mul.Tensor, relations=False)
    assert plain.outcome is Outcome.PASS, plain.message  # one unit: within bfloat16's tolerance
    r = _run("aten::mul.Tensor", *specs, bug=_tail_rounds_up, target=aten.mul.Tensor)
    assert r.outcome is Outcome.MISMATCH, r.message
    assert "[position relation]" in r.message and "is the correctly rounded value" in r.message, r.message


def _one_ulp_in_blocks(func, args, kwargs):
    """A correct transcendental: its vector body rounds the other way from its scalar tail."""
    out = func(*args, **kwargs)
    if not out.is_contiguous() or out.numel() <= 16:
        return out
    flat = out.reshape(-1).clone()
    body = flat[: out.numel() - out.numel() % 16]
    flat[: body.numel()] = torch.nextafter(body, torch.full_like(body, float("inf")))
    return flat.reshape(out.shape)


@pytest.mark.parametrize("qualname, target", [("aten::tanh", aten.tanh.default), ("aten::exp", aten.exp.default)])
def test_a_float32_transcendental_one_ulp_apart_between_paths_is_no_alarm(qualname, target):
    # a vectorised (Sleef) and a scalar (libm) float32 result differ by an ulp: both are right
    r = _run(qualname, TensorSpec((3, 57), "float32", seed=1), bug=_one_ulp_in_blocks, target=target)
    assert r.outcome is Outcome.PASS, r.message


@pytest.mark.parametrize("qualname, target", [("aten::tanh", aten.tanh.default), ("aten::exp", aten.exp.default)])
def test_a_half_precision_path_one_unit_off_the_other_is_found(qualname, target):
    # in bfloat16 both paths compute in float32 and round once: one unit of bfloat16 apart is
    # 2**16 float32 ulps, which no float32 kernel is off by (bfloat16 i0e's scalar path is)
    r = _run(qualname, TensorSpec((3, 57), "bfloat16", seed=1), bug=_one_ulp_in_blocks, target=target)
    assert r.outcome is Outcome.MISMATCH and "[position relation]" in r.message, r.message
    assert "computed in float32 and rounded once" in r.message and "correctly rounded value" in r.message, r.message


def test_a_half_value_near_a_rounding_midpoint_is_not_judged():
    golden = torch.tensor([1.0 + 2**-8, 1.0 + 2**-8 + 2**-12, 1.0 + 2**-9, 1.0], dtype=torch.float64)
    rounded = golden.to(torch.bfloat16)  # bfloat16's ulp at 1 is 2**-7: its midpoint is 1 + 2**-8
    assert metamorphic._near_midpoint(golden, rounded).tolist() == [True, True, False, False]


@pytest.mark.skipif(
    torch.special.i0e(torch.tensor([0.0], dtype=torch.bfloat16)).item()
    == torch.special.i0e(torch.full((64,), 0.0, dtype=torch.bfloat16))[0].item(),
    reason="this torch build's bfloat16 i0e rounds the same on every path",
)
def test_bfloat16_i0e_scalar_path_is_found():
    x = TensorSpec((3, 5), "bfloat16", data=(0.0, 0.5, 1.0, -0.5, 2.0) * 3)
    r = _run("aten::special_i0e", x)
    assert r.outcome is Outcome.MISMATCH and "[position relation]" in r.message, r.message


@pytest.mark.parametrize(
    "qualname, dtype, kwargs",
    [
        ("aten::mul.Tensor", "bfloat16", {}),
        ("aten::div.Tensor", "float16", {}),
        ("aten::add.Tensor", "float32", {"alpha": 0.3}),  # the vector path fuses alpha * other + self
        ("aten::sub.Tensor", "bfloat16", {}),
        ("aten::sqrt", "float32", {}),
        ("aten::reciprocal", "bfloat16", {}),
    ],
)
def test_healthy_exact_kernels_agree_bit_for_bit_at_every_position(qualname, dtype, kwargs):
    op = opdb.lookup(qualname)
    n = 1 if len([a for a in op.arguments if a.base_type == "Tensor" and not a.is_out]) == 1 else 2
    specs = [TensorSpec((3, 57), dtype, seed=s) for s in range(1, n + 1)]
    r = _run(qualname, *specs, kwargs=kwargs)
    assert r.outcome is Outcome.PASS, r.message


def test_exactness_across_positions_is_data_with_its_conditions():
    add = opdb.lookup("aten::add.Tensor")
    specs = tuple(TensorSpec((4,), "float32", seed=s) for s in (1, 2))
    assert "bfloat16" in metamorphic.exact_dtypes(add, Case("aten::add.Tensor", specs, {}))
    assert not metamorphic.exact_dtypes(add, Case("aten::add.Tensor", specs, {"alpha": 0.3}))
    assert metamorphic.exact_dtypes(opdb.lookup("aten::rsqrt"), Case("aten::rsqrt", specs[:1], {})) == {
        "float16",
        "bfloat16",
    }
    assert not metamorphic.exact_dtypes(opdb.lookup("aten::exp"), Case("aten::exp", specs[:1], {}))

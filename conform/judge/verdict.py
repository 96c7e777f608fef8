"""The verdict rule (docs/verdict-rule.md): what conform calls right, for every phase (forward
outputs, backward gradients) and every side (the device, or the CPU reference when it is the one
held against float64 golden). `verdict` decides one phase of one case; `against_golden` holds a
side against golden with the second opinions the rule allows. Comments `# rule (Nx)` name the
clause of docs/verdict-rule.md that the code below them implements.

A `Phase` carries what these functions need to know about one phase of one case: how to
compare, how to rerun the op on the CPU (golden, a second precision, perturbed inputs) and how
to rerun the side under judgement (self-consistency). Observed values are `(main, written)`
pairs: the forward's (result, {argument name: out/mutated tensor}), the backward's
(gradients by input name, {}).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from conform.judge.compare import Record, _spacing, _sparse_valid, compare_tensors, failures
from conform.judge.outcome import META_KINDS
from conform.judge.tolerances import exactly_determined, is_inexact
from conform.judge.trees import bind_arguments, dense, leaves
from opdb.hints import hint

# Finding kinds: facts stored with a cell that are not its verdict.
REFERENCE = "reference"  # the device agrees with the CPU reference; both deviate from float64
CPU_WRONG = "cpu_wrong"  # the device and the CPU disagree; the device matches float64
PRECISION_EDGE = "precision_edge"  # off golden by no more than the case's conditioning
FINDING_KINDS = (REFERENCE, CPU_WRONG, PRECISION_EDGE)

HALF_PRECISION = (torch.float16, torch.bfloat16)


@dataclass
class Finding:
    kind: str  # one of FINDING_KINDS
    phase: str  # "forward" | "backward"
    message: str
    device_golden_err: float | None = None
    ref_golden_err: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


Observed = tuple  # (main, written dict)
Rerun = Callable[..., "Observed | None"]  # (case, tx=None) -> observed, None if it raised


@dataclass
class Phase:
    """One phase of one case, as the oracle needs it.

    `compare(actual, expected)` is the phase's comparison strategy (ties, statistics, ambiguous
    outputs, tolerances). `run_cpu(case, dtype)` runs the op on the CPU in `dtype` (float64:
    golden) and returns the raw observed value. `expect(raw)` casts a raw float64 result into an
    expectation shaped like the reference's, or None. `golden` is computed on first use.
    """

    name: str
    op: Any
    case: Any
    reference: Observed | None
    compare: Callable[[Observed, Observed], list[Record]]
    # run_cpu(case, dtype, tx=None): the CPU (float64 for golden) on another case; `tx` is that
    # case's transform, applied to a gradient's seed too
    run_cpu: Callable[..., Observed | None]
    expect: Callable[[Observed], Observed | None]
    golden_wanted: bool = True
    # parity's extra checks of the device against the reference: output strides (see execute)
    layout: Callable[[Observed, Observed], list[Record]] | None = None
    _golden: Any = field(default=None, repr=False)
    _golden_done: bool = False

    @property
    def golden(self) -> Observed | None:
        if not self._golden_done:
            self._golden_done = True
            self._golden = self.run_cpu(self.case, torch.float64) if self.golden_wanted else None
        return self._golden

    def preset_golden(self, raw: Observed | None) -> None:
        self._golden, self._golden_done = raw, True


@dataclass
class Judgement:
    """A side held against golden: the records after every excuse, the golden they measured
    against, and what an excuse made of it ("" when golden as given sufficed)."""

    records: list[Record]
    golden: Observed | None
    excuse: str = ""
    judged: bool = True  # False: golden cannot judge this case (no golden, other structure)

    @property
    def ok(self) -> bool:
        return not failures(self.records)


@dataclass
class Verdict:
    records: list[Record]  # what decides pass or not
    finding: Finding | None = None
    device_golden_err: float | None = None
    ref_golden_err: float | None = None
    attribution: str = ""  # appended to a failure's message


def _flat(obs: Observed | None):
    return None if obs is None else (obs[0], list((obs[1] or {}).values()))


def _err(side: Observed | None, golden: Observed | None) -> float | None:
    return None if side is None or golden is None else max_abs_vs(_flat(side), _flat(golden))


# -- the rule -------------------------------------------------------------------------------


def verdict(
    phase: Phase, device: Observed, *, golden_is_expectation: bool, rerun_device: Rerun, rerun_reference: Rerun
) -> Verdict:
    """The verdict rule for one phase of one case: rules 1-3 of docs/verdict-rule.md."""
    if golden_is_expectation:  # rule (3)
        j = against_golden(phase, device, rerun_device)
        if not j.judged:
            return Verdict(phase.compare(device, phase.reference))
        err = _err(device, j.golden)
        # (on the plain CPU the device's result is the reference's own: measured once)
        same = phase.reference is not None and all(a is b for a, b in zip(phase.reference, device))
        v = Verdict(j.records, device_golden_err=err, ref_golden_err=err if same else _err(phase.reference, j.golden))
        if j.ok and j.excuse:
            v.finding = Finding(PRECISION_EDGE, phase.name, j.excuse, v.device_golden_err, v.ref_golden_err)
        elif not j.ok:
            v.attribution = attribution(
                v.device_golden_err, v.ref_golden_err, failures(j.records), plain_cpu=True
            ) + _note(j)
        return v
    parity = phase.compare(device, phase.reference)  # rule (1a)
    if phase.layout is not None and not failures(parity):
        # rule (1b): strides matter once the values are right: a wrong value is the more telling verdict
        parity = parity + phase.layout(device, phase.reference)
    bad = failures(parity)
    if not bad:
        # rule (1a): the device agrees with the CPU: pass, whatever golden says of the CPU; rule (1c)
        ref_j = against_golden(phase, phase.reference, rerun_reference) if phase.golden_wanted else None
        v = Verdict(parity)
        if ref_j is not None and ref_j.judged and not ref_j.ok:
            v.ref_golden_err = _err(phase.reference, ref_j.golden)
            v.device_golden_err = _err(device, ref_j.golden)
            msg = "; ".join(r.message for r in failures(ref_j.records)[:2])
            v.finding = Finding(
                REFERENCE,
                phase.name,
                f"the CPU reference deviates from float64 (the device agrees with it): {msg}{_note(ref_j)}",
                v.device_golden_err,
                v.ref_golden_err,
            )
        return v
    if any(r.kind in META_KINDS for r in bad) or not phase.golden_wanted:  # rule (1d)
        return Verdict(parity)
    # rule (2): the device and the CPU disagree: golden decides
    j = against_golden(phase, device, rerun_device)
    if not j.judged:
        return Verdict(parity)
    v = Verdict(parity, device_golden_err=_err(device, j.golden), ref_golden_err=_err(phase.reference, j.golden))
    if j.ok and j.excuse and (v.ref_golden_err or 0.0) <= (v.device_golden_err or 0.0):
        # rule (2b): the device is no closer to golden than the CPU: both sit inside the case's
        # precision edge, and the CPU is not "wrong" for it
        v.records = j.records
        v.finding = Finding(PRECISION_EDGE, phase.name, j.excuse, v.device_golden_err, v.ref_golden_err)
        return v
    if j.ok:  # rule (2a)
        v.records = j.records
        v.finding = Finding(
            CPU_WRONG,
            phase.name,
            "the CPU reference is wrong here; the device matches float64 golden "
            f"(CPU error {_e(v.ref_golden_err)} vs device {_e(v.device_golden_err)}): {bad[0].message}",
            v.device_golden_err,
            v.ref_golden_err,
        )
        return v
    v.attribution = attribution(v.device_golden_err, v.ref_golden_err, bad) + _note(j)  # rule (2c)
    return v


def _mismatched(records: list[Record]) -> int:
    return sum(max(1, r.mismatched) for r in failures(records))


def _off(phase: Phase, side: Observed, expected: Observed, raw: Observed) -> tuple[int, float]:
    """How far `side` is from one expectation: the elements out of tolerance first, then the
    greatest error. The greatest error alone cannot choose between two readings once a NaN or
    infinity is off in both (it is inf for either), whatever the other elements say."""
    return _mismatched(phase.compare(side, expected)), _err(side, raw) or 0.0


def _note(j: Judgement) -> str:
    return f" ({j.excuse})" if j.excuse and not j.ok else ""


def against_golden(phase: Phase, actual: Observed, rerun: Rerun) -> Judgement:
    """`actual` held against golden float64 with every second opinion the rule allows (rule 4)."""
    golden = phase.golden
    expected = phase.expect(golden) if golden is not None else None
    if expected is None:
        return Judgement([], None, judged=False)
    records = phase.compare(actual, expected)  # rule (4a)
    if not failures(records):
        return Judgement(records, golden)
    # rule (4b): Python scalars reach a low-precision kernel either as numbers cast to the tensor's dtype
    # (TensorIterator's binary ops: ne(bf16, 1.562) compares with bfloat16(1.562) = 1.5625) or
    # in the kernel's float32 math type (softshrink, hardtanh_backward, lerp's weight): golden
    # runs again with the scalars rounded to the case's dtype, and either expectation is right.
    # When `actual` fails both, the one the reference matches better is the truth it is measured against.
    rounded = scalar_rounded_case(phase.op, phase.case)
    alt = phase.run_cpu(rounded, torch.float64) if rounded is not None else None
    alt_expected = phase.expect(alt) if alt is not None else None
    if alt_expected is not None:
        alt_records = phase.compare(actual, alt_expected)
        closer = phase.reference is not None and _off(phase, phase.reference, alt_expected, alt) < _off(
            phase, phase.reference, expected, golden
        )
        if not failures(alt_records) or closer:
            records, golden, expected = alt_records, alt, alt_expected
        if not failures(records):
            return Judgement(records, golden)
    if _exactly_determined(phase):  # rule (4c)
        alt_records = _as_the_kernel_computes(phase, actual, rounded)
        if alt_records is not None:
            return Judgement(alt_records, golden)
    own = _counted_by_its_own_edges(phase, actual)
    if own is not None and not failures(own):
        return Judgement(
            own,
            golden,
            "precision edge: a point on a bin edge the data defines, counted by the edges the dtype computes",
        )
    edge = _discontinuity(phase)
    if edge.get("at") == "input" and (promoted := _at_the_promoted_inputs(phase, actual)) is not None:
        if not failures(promoted):  # rule (6f): the inputs as the kernel's computation dtype holds them
            return Judgement(promoted, golden)
    excuses = []
    for excuse in (_specials_excused, _edge_excused, _conditioning_excused):  # rules (4d), (4e), limited by (4f)
        if not failures(records) or any(r.kind in META_KINDS or r.kind == "sign" for r in failures(records)):
            break
        if excuse is _specials_excused and not any(r.kind in ("nan", "inf") for r in failures(records)):
            continue  # no special value is off: nothing for that rule to say
        if excuse is _edge_excused and edge.get("at") != "computed":
            continue  # rule (6e) judges a step whose argument the kernel computes
        if excuse is _conditioning_excused and (_exactly_determined(phase) or edge.get("at") == "input"):
            # the result is fixed by the inputs as given (round, floor_divide, indices, x < y): no
            # precision to lose, and a hull across a step at an input would pass either side (rule 6f)
            continue
        patched, why = excuse(phase, actual, expected, golden)
        if patched is None:
            continue
        again = phase.compare(actual, patched)
        if _mismatched(again) < _mismatched(records):
            records, expected = again, patched
            excuses.append(why)
    if not excuses:
        return Judgement(records, golden)
    if failures(records):  # rule (4h)
        return Judgement(records, golden, "; ".join(excuses) + ", elsewhere still off")
    inconsistent = self_consistency(phase, actual, rerun, failures(phase.compare(actual, phase.expect(golden))))
    if inconsistent:
        # rule (4g): the excuse does not hold: the kernel disagrees with itself
        return Judgement(
            [
                dataclasses.replace(f, message=f"{f.message}; {inconsistent}")
                for f in failures(phase.compare(actual, phase.expect(golden)))
            ],
            golden,
        )
    return Judgement(records, golden, "precision edge: " + "; ".join(excuses))


# -- excuses: what golden as given cannot say ----------------------------------------------


def _exactly_determined(phase: Phase) -> bool:
    """opdb's exactness rule (OpSpec.exact) holds for forward results: gradients sum."""
    return phase.name == "forward" and exactly_determined(phase.op, phase.case)


def _as_the_kernel_computes(phase: Phase, actual: Observed, rounded_case) -> list[Record] | None:
    """An exactly determined result (floor division, remainder, rounding, selection) has one
    right value per reading of its inputs, and the documented semantics allow two readings
    golden float64 does not make: type promotion casts every input to the result's dtype
    before the op (remainder(bfloat16 tensor, 0-dim float32 tensor) divides by the divisor
    rounded to bfloat16), and ATen computes a half-precision kernel in float32, its Python
    scalars too (c10/util/OpMathType.h: opmath_type of Half and BFloat16 is float), rounding the
    result once: floor_divide(-3124., 1.136) in float16 floors the float32 quotient -2750.0,
    where float64's -2750.0000000000005 floors to -2751. The records of `actual` against the
    first such expectation it matches, or None. A quotient rounded to half precision before the
    floor (187 for 560 // 3 in bfloat16, pytorch#193754) matches none."""
    dt = _result_dtype(phase.reference)
    if dt is None:
        return None

    def to_result_dtype(t):
        if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or t.device.type == "meta":
            return t
        return t.detach().to(dt).to(t.dtype).requires_grad_(t.requires_grad)

    def promoted(t):
        # an integer operand of a floating result is cast to it too (int32 2147483631 is
        # 2147483648.0 in float32); index tensors make such a case raise, and it is skipped
        if isinstance(t, torch.Tensor) and t.device.type != "meta" and not (t.is_floating_point() or t.is_complex()):
            return t.to(dt)
        return to_result_dtype(t)

    specs = phase.case.tensor_specs() if hasattr(phase.case, "tensor_specs") else []
    has_integers = any(not (s.torch_dtype.is_floating_point or s.torch_dtype.is_complex) for s in specs)
    math_dtypes = (torch.float64, torch.float32) if dt in HALF_PRECISION else (torch.float64,)
    for case in (phase.case, rounded_case):
        if case is None:
            continue
        for cast in (to_result_dtype, promoted) if has_integers else (to_result_dtype,):
            quotient = _quotient_rounded_first(phase, case, cast, dt)
            if quotient is not None and not failures(records := phase.compare(actual, quotient)):
                return records
            exact_reading = None
            for math_dtype in math_dtypes:
                raw = phase.run_cpu(TransformedCase(case, cast), math_dtype)
                expected = phase.expect(raw) if raw is not None else None
                if expected is None:
                    continue
                if math_dtype == torch.float64:
                    exact_reading = expected
                elif not _same_specials(expected, exact_reading):
                    # float32 math rounds differently, it does not make a NaN or an inf of a finite
                    # result: that is the CPU's float32 kernel, which a half-precision cell's loop
                    # shares (fmod's vectorised NaN for a subnormal divisor, pytorch#193753), not a
                    # reading of the semantics
                    continue
                records = phase.compare(actual, expected)
                if not failures(records):
                    return records
                if math_dtype == torch.float64:
                    patched = _patch(actual, expected, raw, (), _faithful_where_unrepresentable)
                    records = phase.compare(actual, patched) if patched is not None else records
                    if not failures(records):
                        return records
    return None


def _quotient_rounded_first(phase: Phase, case, cast, dt: torch.dtype) -> Observed | None:
    """The definition read as written (opdb hint `quotient_rounded_first`, div's rounding modes):
    the quotient of the inputs as the result dtype holds them, rounded to that dtype (to float32,
    the math type, in half precision), then truncated or floored. div(int32 2228, float32
    -0.31482267, 'trunc') truncates float32's quotient -7077.0 to -7077, where the exact
    -7076.9998 truncates to -7076 (NumPy's trunc of the float32 quotient agrees). The
    expectation, or None where the hint does not apply."""
    arg = (getattr(getattr(phase.op, "rules", None), "hints", None) or {}).get("quotient_rounded_first")
    mode = (getattr(case, "kwargs", None) or {}).get(arg) if arg else None
    if mode not in ("trunc", "floor"):
        return None
    raw = phase.run_cpu(TransformedCase(_KwargsSet(case, {arg: None}), cast), torch.float64)
    if raw is None:
        return None
    rounding = torch.trunc if mode == "trunc" else torch.floor
    # half precision divides in float32 (c10/util/OpMathType.h); a quotient rounded to half
    # before the rounding mode is a bug (pytorch#193754), not this reading
    quotient_dtype = torch.float32 if dt in HALF_PRECISION else dt

    def tx(t):
        return rounding(t.detach().to(quotient_dtype).to(torch.float64)) if t.is_floating_point() else t

    main, written = raw
    return phase.expect((_map_tensors(main, tx), {k: _map_tensors(v, tx) for k, v in written.items()}))


class _KwargsSet:
    """A case with some keyword arguments set to other values."""

    def __init__(self, case, kwargs: dict):
        self._case, self._kwargs = case, kwargs

    def materialize(self, to_device, device, *, dtype=None):
        args, kwargs = self._case.materialize(to_device, device, dtype=dtype)
        return args, {**kwargs, **self._kwargs}

    def __getattr__(self, name):
        return getattr(self._case, name)


def _counted_by_its_own_edges(phase: Phase, actual: Observed) -> list[Record] | None:
    """A histogram whose bin edges come from the data (opdb hint `bin_edges`): a point exactly on
    an edge the case's dtype computes (min + i * (max - min) / bins, rounded) lies a few units off
    float64's edge, and either bin is right. The records of `actual` against the counts in float64
    with the edges computed in the case's dtype, or None where the hint does not apply."""
    hint = (getattr(getattr(phase.op, "rules", None), "hints", None) or {}).get("bin_edges")
    golden = phase.golden
    if not hint or phase.name != "forward" or golden is None:
        return None
    try:
        args, kwargs = phase.case.materialize(lambda t: t, torch.device("cpu"))
        bound = {**dict(zip([a.name for a in phase.op.arguments], args)), **kwargs}
        x, weight = bound["self"], bound.get("weight")
        options = {"weight": weight, "density": bool(bound.get("density", False))}
        edges = getattr(torch.ops.aten, hint["edges"])(x, bound["bins"], range=bound.get("range"), **options)
        wide = {**options, "weight": weight.double() if isinstance(weight, torch.Tensor) else None}
        counts = getattr(torch.ops.aten, hint["counts"])(x.double(), [e.double() for e in edges], **wide)
    except (RuntimeError, KeyError, TypeError, ValueError):
        return None
    expected = phase.expect((counts, {k: counts for k in golden[1]}))
    return phase.compare(actual, expected) if expected is not None else None


def _faithful_where_unrepresentable(a, e, g):
    """Where the exact result (`g`, float64) is not representable in the result's dtype (an
    integer beyond 2**24 in float32, beyond 256 in bfloat16: floor(-2147483648 / -118.368) is
    18142371, between float32's 18142370 and 18142372), either neighbour is a faithful rounding;
    `e` is golden's correct rounding, the other neighbour is as right. A representable result
    (round(x) is x up there) stays exact."""
    if not a.dtype.is_floating_point or g.dtype != torch.float64:
        return None
    g = g.detach()
    e64, a64 = e.detach().to(torch.float64), a.detach().to(torch.float64)
    exact = e64 == g
    step = _spacing(g, a.dtype)
    other = torch.where(e64 > g, e64 - step, e64 + step)
    return ~exact & g.isfinite() & ((a64 == other) | (a64 == e64))


def _same_specials(a: Observed, b: Observed | None) -> bool:
    """Whether two observed values have NaN and infinities at the same places."""
    if b is None:
        return False
    la, lb = list(leaves(_flat(a))), list(leaves(_flat(b)))
    return len(la) == len(lb) and all(
        not isinstance(x, torch.Tensor)
        or not isinstance(y, torch.Tensor)
        or x.shape != y.shape
        or x.layout != torch.strided
        or y.layout != torch.strided
        or not (x.is_floating_point() or x.is_complex())
        or bool((_special_class(x) == _special_class(y)).all())
        for x, y in zip(la, lb)
    )


def _result_dtype(reference: Observed | None) -> torch.dtype | None:
    """The one floating dtype of the reference's tensor results, or None."""
    if reference is None:
        return None
    dts = {t.dtype for t in leaves(reference[0]) if isinstance(t, torch.Tensor) and t.dtype.is_floating_point}
    return dts.pop() if len(dts) == 1 else None


# rule (5e) in bfloat16 and float32: a result within this factor of the dtype's
# largest value is at the range's top, where an intermediate of the product that makes it (a
# square of an input beyond the square root of the largest value, times a gradient or a scale of
# a few hundredths) overflows. Below it a result is well inside the range, and an overflowing
# intermediate is the kernel's (norm layers, p-norms).
RANGE_TOP = 2.0**-10


def _specials_excused(phase: Phase, actual: Observed, expected: Observed, golden: Observed):
    """inf/NaN meeting zeros or the dtype's range (rule 5): `expected` with the side's values
    where the rule lets them stand, and the reason; (None, "") where it has nothing to say.
    self_consistency checks what this excused."""
    dt = rounding_dtype(phase.case)
    mid = phase.run_cpu(phase.case, torch.float32) if dt in (torch.float16, torch.bfloat16) else None
    nonfinite_inputs = _case_has_nonfinite(phase.case)
    half_floats = (torch.float16, torch.bfloat16, torch.float32)
    range_edge_inputs = dt in half_floats and _inputs_reach(phase.case, math.sqrt(torch.finfo(dt).max))
    # rule (5e): in float16 any representable result; in the wider types one at the range's top
    edge_floor = 0.0 if dt == torch.float16 else torch.finfo(dt).max * RANGE_TOP if range_edge_inputs else math.inf
    if mid is None and not nonfinite_inputs and not range_edge_inputs and not _beyond_range(expected, golden):
        return None, ""
    # rule (5c): golden with the non-finite entries replaced by two different finite values
    apart = (
        [phase.run_cpu(TransformedCase(phase.case, _finite_instead(v)), torch.float64) for v in (1.5, -2.5)]
        if nonfinite_inputs
        else [None, None]
    )
    # rule (5f): golden with the case's zero scalar factors made tiny
    unzeroed = _zero_scalars_tiny(phase.op, phase.case) if nonfinite_inputs else None
    tiny = phase.run_cpu(unzeroed, torch.float64) if unzeroed is not None else None

    def excuse(a, e, g, m, v1, v2, r, t):
        cg = _special_class(g)
        # rule (5d): golden finite but beyond the dtype's range (rounded to it: an infinity)
        mask = (_special_class(e) != 0) & (cg == 0) & (_special_class(a) != 0)
        if nonfinite_inputs:  # rule (5a)
            mask |= (cg != 0) & (_special_class(a) != 0)
        if m is not None and m.shape == g.shape:  # rule (5b)
            mask |= cg != _special_class(m)
        if range_edge_inputs and r is not None and r.shape == g.shape:  # rule (5e), where the CPU overflows too
            at_top = g.detach().abs().to(torch.float64) >= edge_floor
            mask |= (cg == 0) & (_special_class(e) == 0) & (_special_class(a) != 0) & (_special_class(r) != 0) & at_top
        if all(t is not None and t.shape == g.shape for t in (v1, v2)) and not v1.is_complex():  # rule (5c)
            v1, v2 = v1.detach().to(torch.float64), v2.detach().to(torch.float64)
            mask |= (cg != 0) & (_special_class(a) == 0) & torch.isfinite(v1) & (v1 == v2)
        if t is not None and t.shape == g.shape:
            # rule (5f): golden finite there, non-finite once the zero scalar factor is 1e-30
            mask |= (cg == 0) & (_special_class(a) != 0) & (_special_class(t) != 0)
        return mask

    patched = _patch(actual, expected, golden, (mid, *apart, phase.reference, tiny), excuse)
    return (
        patched,
        "non-finite values meeting zeros or the dtype's range: where NaN and infinity land is the algorithm's",
    )


def _zero_scalars_tiny(op, case):
    """`case` with every Scalar or float argument that is 0 made 1e-30 (rule (5f) of
    _specials_excused), or None when it has none."""
    names = {a.name for a in getattr(op, "arguments", ()) if a.base_type in ("Scalar", "float", "float?", "Scalar?")}
    if not names:
        return None
    arg_names = [a.name for a in op.arguments]

    def tiny(name, v):
        return 1e-30 if name in names and not isinstance(v, bool) and isinstance(v, (int, float)) and v == 0 else v

    args = tuple(tiny(arg_names[i] if i < len(arg_names) else "", v) for i, v in enumerate(case.args))
    kwargs = {k: tiny(k, v) for k, v in case.kwargs.items()}
    if args == tuple(case.args) and kwargs == dict(case.kwargs):
        return None
    return dataclasses.replace(case, args=args, kwargs=kwargs)


def _beyond_range(expected: Observed, golden: Observed) -> bool:
    """Some element golden holds finite is an infinity once rounded to the case's dtype."""
    return any(
        e.shape == g.shape
        and e.layout == g.layout == torch.strided
        and e.device.type != "meta"
        and is_inexact(e.dtype)
        and bool(((_special_class(e) != 0) & (_special_class(g) == 0)).any())
        for e, g in zip(leaves(_flat(expected)), leaves(_flat(golden)))
    )


def _finite_instead(value: float):
    """A case transform: every non-finite entry of a floating input replaced by `value`."""

    def tx(t):
        if (
            not isinstance(t, torch.Tensor)
            or not is_inexact(t.dtype)
            or t.layout != torch.strided
            or t.device.type == "meta"
            or t.is_quantized
        ):
            return t
        d = t.detach()
        return torch.where(torch.isfinite(d), d, torch.full_like(d, value)).requires_grad_(t.requires_grad)

    return tx


def _conditioning_excused(phase: Phase, actual: Observed, expected: Observed, golden: Observed):
    """The case's conditioning (rule 6): `expected` with the side's values where golden, rerun
    with every floating input moved by one unit of the case's dtype, says the case's own
    precision allows them, and the reason; (None, "") where it has nothing to say."""
    dt = rounding_dtype(phase.case)
    if dt is None:
        return None, ""
    # rule (6d): a result narrower than its inputs' promotion (weight norm's backward computes in saved_g's
    # bfloat16 with float32 norms, by definition) is computed in its own dtype: its unit is the
    # case's unit; a wider one (bfloat16 + float32 in float32) computes on exact inputs
    res = _result_dtype(phase.reference)
    if res is not None and torch.finfo(res).eps > torch.finfo(dt).eps:
        dt = res
    # rule (6c): an op whose kernel forms x + 1 (or the like) in the dtype declares the unit of its inputs
    # at least the dtype's unit at that magnitude (opdb hint unit_floor)
    floor = hint(phase.op, "unit_floor")
    moved = [
        phase.run_cpu(TransformedCase(phase.case, _nudge(dt, s, bit, floor)), torch.float64)
        for bit in (None, 0, 1)
        for s in (1.0, -1.0)
    ]
    if any(m is None for m in moved):
        return None, ""

    def excuse(a, e, g, *ms):
        if any(m is None or m.shape != g.shape for m in ms):
            return None
        g, a = dense(g).detach().to(torch.float64), dense(a).detach()
        ms = [dense(m).detach().to(torch.float64) for m in ms]
        rounded = a.dtype if a.dtype.is_floating_point else None
        edge = torch.zeros_like(g, dtype=torch.bool)  # rule (6b)
        for m in ms:
            edge |= _special_class(m) != _special_class(g)
            if rounded is not None:
                edge |= _special_class(m.to(rounded)) != _special_class(g.to(rounded))
        spread = torch.stack([(m - g).abs() for m in ms]).amax(0).nan_to_num(0.0, 0.0, 0.0)
        lo = torch.stack([g, *ms]).amin(0) - spread
        hi = torch.stack([g, *ms]).amax(0) + spread
        a = a.to(torch.float64)
        return edge | ((a >= lo) & (a <= hi))  # rule (6a)

    patched = _patch(actual, expected, golden, tuple(moved), excuse, complex_parts=True)
    return (
        patched,
        f"within the case's conditioning (golden moves that far when the inputs move by one {str(dt).removeprefix('torch.')} unit)",
    )


def _discontinuity(phase: Phase) -> dict:
    """The op's discontinuity (opdb hint `discontinuity`, opdb/rules/discontinuities.toml): where
    its step sits (`at`: "input", a value of an input as given; "computed", a value the kernel
    computes from them), in which precision that value is computed (`precision`: "math", float32
    for half precision, or "dtype"), and the argument whose multiple the result jumps by
    (`period`); {} for a continuous op. For gradients, the step of a piecewise op's derivative
    (hint `gradient_discontinuity`: hardsigmoid's at +-3, relu's at 0)."""
    if phase.name == "backward":
        return hint(phase.op, "gradient_discontinuity") or {}
    if phase.name != "forward" or (hint(phase.op, "exact_only_with") and not _exactly_determined(phase)):
        return {}  # div without a rounding mode is true division: continuous
    return hint(phase.op, "discontinuity") or {}


def _at_the_promoted_inputs(phase: Phase, actual: Observed) -> list[Record] | None:
    """A step at an input value (a comparison, bucketize) is decided by the inputs as the kernel's
    computation dtype holds them: lt(bfloat16 tensor, 0-dim float32 tensor) compares in bfloat16,
    the 0-dim value rounded to it (type promotion). The records of `actual` against golden on
    the inputs cast to the promoted dtype, or None where no input is wider than it."""
    try:
        args, kwargs = phase.case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001 - cannot tell: no second reading
        return None
    tensors = [t for t in leaves((args, kwargs)) if t.layout == torch.strided and t.device.type != "meta"]
    if len(tensors) < 2:
        return None
    common = tensors[0]
    for t in tensors[1:]:  # a 0-dim tensor does not widen a dimensioned one of its category
        common = torch.empty((1,) if common.dim() or t.dim() else (), dtype=torch.result_type(common, t))
    dt = common.dtype
    if not dt.is_floating_point or all(t.dtype in (dt, torch.bool) for t in tensors):
        return None

    def cast(t):
        # an integer operand is cast to the floating dtype too (int64 16777217 is float32 16777216)
        if not isinstance(t, torch.Tensor) or t.dtype in (torch.bool, dt) or t.is_complex() or t.device.type == "meta":
            return t
        return t.detach().to(dt).to(t.dtype) if t.dtype.is_floating_point else t.to(dt)

    raw = phase.run_cpu(TransformedCase(phase.case, cast), torch.float64)
    expected = phase.expect(raw) if raw is not None else None
    return phase.compare(actual, expected) if expected is not None else None


def _edge_excused(phase: Phase, actual: Observed, expected: Observed, golden: Observed):
    """A step whose argument the kernel computes (rule 6e: a quotient's floor, a bin position):
    golden runs again with every floating input moved by one unit of the precision the op
    computes that argument in; an element where a move lands golden on another side of a step
    is right on either side, and its expectation is the value of the side it lies nearest to
    (with `period`, golden shifted by the multiples of it the moves show). Elements no move
    takes across a step keep golden's value: a value binned or rounded wrongly far from an edge
    stays an alarm. `expected` so patched and the reason, or (None, "")."""
    edge = _discontinuity(phase)
    dt = rounding_dtype(phase.case)
    if dt is None:
        return None, ""
    unit = torch.float32 if edge.get("precision", "math") == "math" and dt in HALF_PRECISION else dt
    moved = [
        phase.run_cpu(TransformedCase(phase.case, _nudge(unit, s, bit)), torch.float64)
        for bit in (None, 0, 1)
        for s in (1.0, -1.0)
    ]
    if any(m is None for m in moved):
        return None, ""
    period = _period(phase, edge.get("period"))

    def nearest(a, e, g, *ms):
        if e.is_complex() or any(m.shape != g.shape for m in ms):
            return None
        g = g.detach().to(torch.float64)
        ms = [m.detach().to(torch.float64) for m in ms]
        finite = torch.isfinite(g) & torch.stack([torch.isfinite(m) for m in ms]).all(0)
        a64 = a.detach().to(torch.float64)
        within = torch.zeros_like(g, dtype=torch.bool)
        if period is not None:
            p = torch.broadcast_to(period, g.shape).abs()
            shifts = [torch.round((m - g) / p).nan_to_num(0.0) for m in ms]
            crossing = torch.stack([s != 0 for s in shifts]).any(0)
            sides = [g, *(g + s * p for s in shifts)]
            # the other side's value is computed (a - b * k) and as conditioned as golden's own:
            # it stands within the moves' spread around that side (rule 6a, one side at a time)
            spread = torch.stack([(m - c).abs() for m, c in zip(ms, sides[1:])]).amax(0).nan_to_num(0.0)
            slack = spread + _spacing(a64, a.dtype)
            within = torch.stack([(s != 0) & ((a64 - c).abs() <= slack) for s, c in zip(shifts, sides[1:])]).any(0)
        else:
            crossing = torch.stack([m.to(a.dtype) != g.to(a.dtype) for m in ms]).any(0)
            sides = [g, *ms]
        sides = torch.stack([x.to(a.dtype).to(torch.float64) for x in sides])
        pick = (sides - a64).abs().nan_to_num(math.inf).argmin(0, keepdim=True)
        near = torch.where(within, a64, sides.gather(0, pick)[0]).to(e.dtype)
        return torch.where(crossing & finite, near, e)

    patched = _patch(actual, expected, golden, tuple(moved), nearest, replace=True)
    return (
        patched,
        f"on a step's edge (the value the step decides moves to another side when the inputs move by one "
        f"{str(unit).removeprefix('torch.')} unit): either side is right",
    )


def _period(phase: Phase, name: str | None) -> torch.Tensor | None:
    """The argument `name` of the case as a float64 tensor (a remainder's divisor), or None."""
    if not name:
        return None
    try:
        args, kwargs = phase.case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001 - cannot tell: no shifted sides
        return None
    v = bind_arguments(phase.op, args, kwargs).get(name)
    if isinstance(v, torch.Tensor) and v.layout == torch.strided and not v.is_complex() and v.device.type != "meta":
        return v.detach().to(torch.float64)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return torch.tensor(float(v), dtype=torch.float64)
    return None


def _nudge(dt: torch.dtype, direction: float, bit: int | None = None, floor: float | None = None):
    """Every floating input moved by one unit of `dt` in `direction`. With `bit`, element i of
    the case's n-th floating input moves the other way when bit `bit` of i plus n is odd: two
    inputs move apart (a - b), and so do neighbours within one input (bit 0: x[i+1] - x[i];
    bit 1: x[i+1] - x[i-1], a central difference), where a uniform move cancels. With `floor`,
    a unit is at least `dt`'s unit at the magnitude `floor`."""
    state = {"n": 0}
    least = float(_spacing(torch.tensor(float(floor), dtype=torch.float64), dt)) if floor else None

    def move(t):
        if (
            not isinstance(t, torch.Tensor)
            or not is_inexact(t.dtype)
            or t.layout != torch.strided
            or t.device.type == "meta"
        ):
            return t
        if t.is_complex():  # real and imaginary parts each move by one unit of the real dtype
            parts = move(torch.view_as_real(t.detach().resolve_conj()))
            return torch.view_as_complex(parts.contiguous()).requires_grad_(t.requires_grad)
        unit = _spacing(t.detach().to(torch.float64), dt)
        if least is not None:
            unit = unit.clamp_min(least)
        step = direction * unit
        if bit is not None:
            index = torch.arange(t.numel()).reshape(t.shape)
            flip = ((index >> bit) + state["n"]) % 2
            step = step * (1 - 2 * flip).to(step.dtype)
            state["n"] += 1
        return (t.detach() + step.to(t.dtype)).requires_grad_(t.requires_grad)

    move.reset = lambda: state.update(n=0)
    return move


def _patch(
    actual: Observed, expected: Observed, golden: Observed, others: tuple, excuse, *, complex_parts=False, replace=False
):
    """`others`: more observed values (or None) passed on to `excuse`, leaf by leaf. `expected` with the
    side's own values wherever `excuse(actual, expected, golden, *others)` says the element is excused
    (leaf by leaf; leaves it cannot line up are left alone). With `complex_parts`, a complex leaf is
    judged as its real and imaginary parts (torch.view_as_real), each excused on its own. With
    `replace`, `excuse` returns the leaf's new expectation itself (or None: left alone)."""
    a_l, e_l, g_l = (list(leaves(_flat(x))) for x in (actual, expected, golden))
    o_l = [list(leaves(_flat(o))) if o is not None else [None] * len(e_l) for o in others]
    if not (len(a_l) == len(e_l) == len(g_l)) or any(len(x) != len(e_l) for x in o_l):
        return None
    out = []
    for i, (a, e, g) in enumerate(zip(a_l, e_l, g_l)):
        ok = (
            a.shape == e.shape == g.shape
            and a.dtype == e.dtype
            and e.layout == a.layout == g.layout == torch.strided
            and (complex_parts or not e.is_complex())
            and e.device.type != "meta"
        )
        if ok and e.is_complex():
            os_ = [o[i] for o in o_l]
            if not all(x.is_complex() for x in (a, g, *(x for x in os_ if x is not None))):
                out.append(e)
                continue
            a, e, g = (torch.view_as_real(x.detach().resolve_conj()) for x in (a, e, g))
            os_ = [torch.view_as_real(x.detach().resolve_conj()) if x is not None else None for x in os_]
            mask = excuse(a, e, g, *os_)
            patched = torch.where(mask, a, e) if mask is not None and bool(mask.any()) else e
            out.append(torch.view_as_complex(patched.contiguous()))
            continue
        mask = excuse(a, e, g, *(o[i] for o in o_l)) if ok else None
        if replace:
            out.append(mask if mask is not None else e)
            continue
        out.append(torch.where(mask, a.detach(), e) if mask is not None and bool(mask.any()) else e)
    it = iter(out)
    main, written = _replace_leaves(expected[0], it), _replace_leaves(expected[1] or {}, it)
    return main, written


def _replace_leaves(x, it):
    if isinstance(x, torch.Tensor):
        return next(it) if not x.is_nested else x
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        items = [_replace_leaves(v, it) for v in x]
        return items if isinstance(x, list) else type(x)(items) if type(x) is tuple else tuple(items)
    if isinstance(x, dict):
        return {k: _replace_leaves(v, it) for k, v in x.items()}
    return x


def _case_has_nonfinite(case) -> bool:
    try:
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001 - cannot tell: no excuse
        return False
    return any(
        is_inexact(t.dtype) and t.numel() and t.device.type != "meta" and not bool(torch.isfinite(dense(t)).all())
        for t in leaves((args, kwargs))
    )


def _inputs_reach(case, magnitude: float) -> bool:
    """Some finite element of the case's floating inputs is at least `magnitude` in size."""
    try:
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001 - cannot tell: no excuse
        return False
    for t in leaves((args, kwargs)):
        if is_inexact(t.dtype) and t.numel() and t.device.type != "meta" and not t.is_complex():
            d = dense(t).detach().to(torch.float64)
            d = d[torch.isfinite(d)]
            if d.numel() and float(d.abs().max()) >= magnitude:
                return True
    return False


class TransformedCase:
    """A case whose materialised tensors pass through `tx` (perturbed, made contiguous, one
    element picked): run wherever a case runs."""

    def __init__(self, case, tx):
        self._case, self._tx = case, tx

    def materialize(self, to_device, device, *, dtype=None):
        getattr(self._tx, "reset", lambda: None)()  # a transform that counts the inputs starts over
        args, kwargs = self._case.materialize(to_device, device, dtype=dtype)
        return _map_tensors(args, self._tx), {k: _map_tensors(v, self._tx) for k, v in kwargs.items()}

    def __getattr__(self, name):
        return getattr(self._case, name)


def _map_tensors(x, fn):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)) and not isinstance(x, torch.Size):
        items = [_map_tensors(v, fn) for v in x]
        return items if isinstance(x, list) else tuple(items)
    return x


# -- self-consistency: what no tolerance excuses --------------------------------------------

VECTOR_BLOCK = 64  # elements: a full vector block of any CPU ISA for every dtype, with a tail


def self_consistency(phase: Phase, actual: Observed, rerun: Rerun, bad: list[Record]) -> str:
    """'' when the side's kernel agrees with itself on this case; else how it does not: the same
    call again after freed memory was overwritten (reads of uninitialised memory), the inputs
    made contiguous (layout), and the offending element alone and inside a full vector block
    (position: vectorised body vs scalar tail)."""
    free = _unrepresentable_relaxed(phase, actual)
    again = rerun(phase.case, scribble=True)  # rule (7a)
    if again is not None and failures(phase.compare(again, free(again))):
        return "the same call gives another result after freed memory was overwritten: it reads uninitialised memory"
    if _has_strided_inputs(phase.case):  # rule (7b)
        contig = rerun(TransformedCase(phase.case, lambda t: t.contiguous() if t.layout == torch.strided else t))
        if contig is not None and failures(phase.compare(contig, free(contig))):
            return "the result depends on the inputs' layout: contiguous inputs give another"
    for rec in bad:  # rule (7c)
        where = _element_check(phase, actual, rerun, rec)
        if where:
            return where
    return ""


def _unrepresentable_relaxed(phase: Phase, actual: Observed):
    """`free(other)`: `actual` with `other`'s values where both are non-finite and the exact
    result lies beyond the dtype's range (golden finite, an infinity once rounded: rule (5d)).
    Which infinity or NaN an overflowing sum ends in follows its order of summation, which a
    layout may change (a transposed operand takes another BLAS path): not an inconsistency."""
    golden = phase.golden
    expected = phase.expect(golden) if golden is not None else None

    def beyond(o, a, g, e):
        if e is None or e.shape != g.shape:
            return None
        return (_special_class(e) != 0) & (_special_class(g) == 0) & (_special_class(o) != 0) & (_special_class(a) != 0)

    def free(other: Observed) -> Observed:
        if expected is None or not _beyond_range(expected, golden):
            return actual
        return _patch(other, actual, golden, (expected,), beyond) or actual

    return free


def _has_strided_inputs(case) -> bool:
    try:
        args, kwargs = case.materialize(lambda t: t, torch.device("cpu"))
    except Exception:  # noqa: BLE001
        return False
    return any(t.layout == torch.strided and not t.is_contiguous() for t in leaves((args, kwargs)) if not t.is_nested)


def _leaf_at(obs: Observed, path: str):
    main, written = obs
    if path == "output" and isinstance(main, torch.Tensor) and not written:
        return main
    if path.startswith("grad[") and isinstance(main, dict) and len(main) == 1:
        return main.get(path[5:-1])
    return None


def _element_check(phase: Phase, actual: Observed, rerun: Rerun, rec: Record) -> str:
    """Elementwise ops: the offending element computed alone and inside a full vector block
    must be what it was inside the case's tensor."""
    leaf = _leaf_at(actual, rec.path)
    if (
        leaf is None
        or rec.index is None
        or leaf.dim() == 0
        or leaf.layout != torch.strided
        or len(rec.index) != leaf.dim()
    ):
        return ""
    shape = leaf.shape
    want = leaf.detach()[rec.index]
    for n, label in ((1, "alone"), (VECTOR_BLOCK, f"inside a block of {VECTOR_BLOCK}")):

        def pick(t, n=n):
            return (
                t.detach()[rec.index].reshape(1).expand(n).contiguous().requires_grad_(t.requires_grad)
                if t.shape == shape and t.layout == torch.strided
                else t
            )

        if not _elementwise_here(phase, rec, pick, n):
            return ""  # the element's own value changes with its neighbours: a reduction, a scan
        got = rerun(TransformedCase(phase.case, pick), tx=pick)
        got_leaf = _leaf_at(got, rec.path) if got is not None else None
        if got_leaf is None or got_leaf.shape != (n,):
            return ""  # not elementwise after all
        r = compare_tensors(got_leaf, want.reshape(1).expand(n), tolerance=(rec.rtol or 0.0, rec.atol or 0.0))
        if not r.ok:
            return (
                f"the element at {rec.index} computed {label} gives {got_leaf[0].item()!r} "
                f"where the case gave {want.item()!r}: the result depends on its position"
            )
    return ""


def _elementwise_here(phase: Phase, rec: Record, pick, n: int) -> bool:
    """Whether golden float64 gives the element computed alone (n=1) or repeated n times what it
    gives inside the case. Same-shaped outputs do not make an op elementwise: softmax's backward,
    a norm's gradient and cumprod's have an element's value depend on the others along the dim,
    so a block of copies of it legitimately gives another value, and that says nothing about
    the kernel's position."""
    golden = phase.golden
    whole = _leaf_at(golden, rec.path) if golden is not None else None
    if whole is None:
        return True
    alone = phase.run_cpu(TransformedCase(phase.case, pick), torch.float64, tx=pick)
    alone = _leaf_at(alone, rec.path) if alone is not None else None
    if alone is None or alone.shape != (n,):
        return False
    w = whole.detach()[rec.index].to(torch.float64)
    a = alone.detach().to(torch.float64)
    same = (a == w) | (a.isnan() & w.isnan()) | ((a - w).abs() <= 1e-9 * w.abs())
    return bool(same.all())


# -- golden as an expectation ---------------------------------------------------------------


def cast_like(golden, template):
    """Golden float64 results cast to the reference's dtypes, leaf by leaf; None if shapes differ."""
    if isinstance(golden, torch.Tensor) and isinstance(template, torch.Tensor):
        if golden.shape != template.shape:
            raise ValueError("golden shape differs")
        return golden.to(template.dtype)
    if isinstance(golden, (list, tuple)) and isinstance(template, (list, tuple)) and not isinstance(golden, torch.Size):
        if len(golden) != len(template):
            raise ValueError("golden structure differs")
        items = [cast_like(g, t) for g, t in zip(golden, template)]
        return items if isinstance(template, list) else tuple(items)
    if isinstance(golden, float) and isinstance(template, (int, bool)) and not isinstance(template, float):
        return type(template)(golden)
    return golden


def golden_pair(golden, reference):
    """Golden's (result, written) as an expectation shaped like the reference's (see
    _golden_expected), with range_patch applied; None where the structures differ."""
    (g_result, g_written), (ref_result, ref_written) = golden, reference
    try:
        cast = _golden_expected(g_result, ref_result)
        written = {k: _golden_expected(v, (ref_written or {}).get(k)) for k, v in (g_written or {}).items()}
    except (ValueError, TypeError, RuntimeError):
        return None
    return range_patch(g_result, cast), {k: range_patch((g_written or {}).get(k), v) for k, v in written.items()}


_F64_MAX = torch.finfo(torch.float64).max


def range_patch(golden, cast):
    """Where golden float64 is exactly +-finfo(float64).max, the op produced its dtype's largest
    finite value by construction (nan_to_num's default posinf/neginf, nextafter(-inf, 0)), which
    in the case's dtype is +-finfo(dtype).max, not the infinity a cast of float64's maximum
    gives. Those elements are expected at the case dtype's extreme. An overflow to infinity is
    left alone: exp(100) in float32 is inf, and a kernel that saturates it is wrong."""
    if isinstance(cast, torch.Tensor) and isinstance(golden, torch.Tensor):
        if (
            is_inexact(cast.dtype)
            and cast.dtype != torch.complex32
            and cast.is_complex() == golden.is_complex()
            and cast.shape == golden.shape
            and cast.layout == golden.layout == torch.strided
            and cast.numel()
        ):
            c, g = cast, golden.detach()
            if c.is_complex():  # real and imaginary parts separately
                c, g = torch.view_as_real(c.resolve_conj()), torch.view_as_real(g.resolve_conj())
            extreme = g.to(torch.float64).abs() == _F64_MAX
            if bool(extreme.any()) and c.dtype != torch.float64:
                big = torch.finfo(c.dtype).max
                patched = torch.where(extreme, torch.sign(g).to(c.dtype) * big, c)
                return torch.view_as_complex(patched.contiguous()) if cast.is_complex() else patched
        return cast
    if isinstance(cast, (list, tuple)) and isinstance(golden, (list, tuple)) and len(cast) == len(golden):
        items = [range_patch(g, c) for g, c in zip(golden, cast)]
        return items if isinstance(cast, list) else tuple(items)
    return cast


def _special_class(t: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 NaN, 2 +inf, 3 -inf, elementwise (complex: by real and imaginary parts)."""
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    t = t.detach().to(torch.float64)
    cls = torch.zeros(t.shape, dtype=torch.int8)
    cls = torch.where(t.isnan(), 1, cls)
    cls = torch.where(t == math.inf, 2, cls)
    return torch.where(t == -math.inf, 3, cls).to(torch.int8)


def _numeric(x) -> bool:
    """A floating or complex value: a leaf whose golden float64 value is a valid expectation."""
    if isinstance(x, torch.Tensor):
        return True  # tensors are cast back to the reference's dtype, bool and integer included
    return isinstance(x, (float, complex)) and not isinstance(x, bool)


def _golden_expected(golden, ref):
    """The expected values when the CPU is the device under test: golden float64, cast to the
    reference's dtypes, for tensors and floating Python scalars; the reference's own run for
    everything else. Integers, ScalarTypes, strings and sizes that an op returns are metadata
    (element_size, promote_types, result_type, str): the float64 rewrite changes them by
    construction (8 bytes, Double, "CPUDoubleType"), so golden is no expectation for them.
    Raises ValueError where the structures differ."""
    if isinstance(golden, dict) and isinstance(ref, dict):
        if len(golden) != len(ref):
            raise ValueError("golden structure differs")
        return {
            _golden_expected(gk, rk): _golden_expected(gv, rv)
            for (gk, gv), (rk, rv) in zip(golden.items(), ref.items())
        }
    if isinstance(golden, (list, tuple)) and isinstance(ref, (list, tuple)) and not isinstance(ref, torch.Size):
        if len(golden) != len(ref):
            raise ValueError("golden structure differs")
        items = [_golden_expected(g, r) for g, r in zip(golden, ref)]
        return items if isinstance(ref, list) else tuple(items)
    if _numeric(ref) and _numeric(golden):
        return cast_like(golden, ref)
    return ref


# Python scalars ("Scalar" in a schema) reach a low-precision kernel in one of two ways, and
# both conform: TensorIterator's binary ops wrap them as numbers and cast them to the tensor's
# dtype (ne(bf16, 1.562) compares with bfloat16(1.562) = 1.5625: add, sub, eq, fmod, remainder,
# isin, hardshrink), while other kernels read them in their float32 math type (softshrink,
# hardtanh_backward, threshold, lerp, addcmul's value). Golden float64 with the scalar as given
# is right for the second; for the first, golden is run again with the scalars rounded to the
# case's dtype, and the device passes if it matches either.
def rounding_dtype(case) -> torch.dtype | None:
    dts = [sp.torch_dtype for sp in case.tensor_specs() if is_inexact(sp.torch_dtype)]
    if not dts:
        return None
    dt = dts[0]
    for d in dts[1:]:
        dt = torch.promote_types(dt, d)
    return dt.to_real() if dt.is_complex else dt


def _round_scalar(v, dt: torch.dtype):
    if isinstance(v, bool):
        return v
    if isinstance(v, complex):
        return complex(_round_scalar(v.real, dt), _round_scalar(v.imag, dt))
    if isinstance(v, float):
        return float(torch.tensor(v, dtype=torch.float64).to(dt)) if math.isfinite(v) else v
    if isinstance(v, int):
        r = float(torch.tensor(float(v), dtype=torch.float64).to(dt))
        return int(r) if math.isfinite(r) else v
    if isinstance(v, (list, tuple)):
        items = [_round_scalar(x, dt) for x in v]
        return items if isinstance(v, list) else tuple(items)
    return v


def scalar_rounded_case(op, case):
    """`case` with its Scalar arguments rounded to the case's dtype, and its 0-dim tensors rounded
    to the dtype of its dimensioned ones, or None if that changes none (see _zero_dim_rounded)."""
    rounded = _scalars_rounded(op, case)
    return _zero_dim_rounded(rounded if rounded is not None else case) or rounded


def _zero_dim_rounded(case):
    """Type promotion treats a 0-dim tensor like a Python scalar: a float32 0-dim tensor does not
    raise the result dtype of a float16 tensor, and TensorIterator casts it to that dtype before
    the op (c10/core/ScalarType.h's promotion doc: dimensioned tensors take priority over
    zero-dim ones of the same category). hypot(float16 x, float32 tensor(1e20)) computes with
    inf; golden float64 keeps 1e20. `case` with every floating 0-dim tensor rounded to the
    dimensioned tensors' promoted floating dtype, or None where no 0-dim tensor is wider."""
    specs = [sp for sp in case.tensor_specs() if sp.torch_dtype.is_floating_point and not sp.quantized]
    dims = [sp.torch_dtype for sp in specs if len(sp.shape)]
    if not dims:
        return None
    dt = dims[0]
    for d in dims[1:]:
        dt = torch.promote_types(dt, d)
    if not any(not len(sp.shape) and torch.promote_types(sp.torch_dtype, dt) != dt for sp in specs):
        return None

    def tx(t):
        if not isinstance(t, torch.Tensor) or t.dim() or not t.dtype.is_floating_point or t.device.type == "meta":
            return t
        return t.detach().to(dt).to(t.dtype).requires_grad_(t.requires_grad)

    return TransformedCase(case, tx)


def _scalars_rounded(op, case):
    """`case` with its Scalar arguments rounded to the case's dtype, or None if that changes none."""
    dt = rounding_dtype(case)
    if dt is None or dt == torch.float64:
        return None
    scalar_names = {a.name for a in op.arguments if a.base_type in ("Scalar", "Scalar[]")}
    if not scalar_names:
        return None
    names = [a.name for a in op.arguments]
    args = tuple(
        _round_scalar(v, dt) if i < len(names) and names[i] in scalar_names else v for i, v in enumerate(case.args)
    )
    kwargs = {k: _round_scalar(v, dt) if k in scalar_names else v for k, v in case.kwargs.items()}
    if args == tuple(case.args) and kwargs == dict(case.kwargs):
        return None
    return dataclasses.replace(case, args=args, kwargs=kwargs)


def max_abs_vs(actual, golden) -> float | None:
    """The greatest absolute error of `actual`'s tensor leaves against golden float64.

    Floating leaves: the greatest difference over positions where both are finite, and inf
    where the special values disagree (NaN where golden is finite or infinite, an infinity of
    the other sign, a finite value where golden is NaN or infinite), except the dtype's largest
    value where golden gives float64's (see range_patch). Integer and bool leaves
    (indices, comparison results): the greatest difference of the values (1 for a flipped bool).
    None when no leaf could be compared."""
    worst = None
    for a, g in zip(leaves(actual), leaves(golden)):
        if a.shape != g.shape or a.device.type == "meta" or g.device.type == "meta" or a.numel() == 0:
            continue
        if not (_sparse_valid(a) and _sparse_valid(g)):
            continue  # indices out of bounds: densifying would read out of bounds
        if not is_inexact(a.dtype):
            if is_inexact(g.dtype) and not g.dtype.is_floating_point:
                continue
            # a quantized result by its values, as compare._plain reads it (no cast to float64)
            a, g = (x.dequantize() if x.is_quantized else dense(x) for x in (a, g))
            err = float((a.detach().to(torch.float64) - g.detach().to(torch.float64)).abs().max())
            worst = err if worst is None else max(worst, err)
            continue
        a64 = dense(a).detach().to(torch.complex128 if a.is_complex() else torch.float64)
        g64 = dense(g).detach().to(a64.dtype)
        if a64.is_complex():
            # resolve_conj: an op that returns a conjugate view (_conj) has its conj bit set on both
            a64, g64 = torch.view_as_real(a64.resolve_conj()), torch.view_as_real(g64.resolve_conj())
        finite = torch.isfinite(a64) & torch.isfinite(g64)
        same_special = (a64 == g64) | (a64.isnan() & g64.isnan())
        big = float(torch.finfo(a.dtype).max)
        saturated = (g64.abs() == _F64_MAX) & (a64.abs() == big) & (torch.sign(a64) == torch.sign(g64))
        if bool((~finite & ~same_special & ~saturated).any()):
            err = math.inf
        elif bool(finite.any()):
            err = float(torch.where(finite & ~saturated, (a64 - g64).abs(), torch.zeros((), dtype=torch.float64)).max())
        else:
            err = 0.0
        worst = err if worst is None else max(worst, err)
    return worst


def _e(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def attribution(d: float | None, r: float | None, bad: list[Record], *, plain_cpu: bool = False) -> str:
    """The message's tail: how far the device and the CPU each are from golden."""
    if d is None or r is None:
        return ""
    if plain_cpu:  # the device side is the reference side: one CPU, measured against golden
        return f"; CPU error {_e(d)} vs golden float64"
    worst = bad[0]
    if worst.kind != "values":  # NaN, inf and sign-of-zero findings: inf where the specials disagree
        return f"; device error {_e(d)} vs CPU {_e(r)} (golden float64)"
    allowed = (worst.atol or 0.0) + (worst.rtol or 0.0)
    if r > max(allowed, 10 * d if d else allowed) and d > allowed:
        return f"; both far from golden: ill-conditioned case (device error {_e(d)} vs CPU {_e(r)}, golden float64)"
    return f"; device error {_e(d)} vs CPU {_e(r)} (golden float64)"

"""Metamorphic relations: the device under test held against itself (docs/verdict-rule.md).

Golden float64 runs the same ATen kernel, so it shares every bug of the algorithm, the layout
or the vector path. These relations need no expectation at all; each runs the op again on the
device under test and holds the result against the drawn case's, so they hold on any backend:

* layout: the same values in another layout (contiguous inputs transposed, or sliced for a
  vector; strided inputs made contiguous) give the same result, and the op raises on both or
  on neither (DeepREL's status equivalence);
* position: an elementwise op gives each element the same value wherever it sits: inside full
  vector blocks, in a scalar tail, or read through a stride (the scalar loop);
* out layout: an out= op writes the same values into a non-contiguous out as into a
  contiguous one;
* forms: an in-place or out= overload gives what its functional overload returns for the same
  inputs (DeepREL's value equivalence of equivalent APIs);
* alias: an out= op handed one of its own inputs as the out, or an in-place op handed self as
  another input, either raises (TensorIterator's overlap check) or gives what it gives with
  memory of its own; reading an input it has begun to overwrite is the silent wrong result of
  pytorch#85852 (mm) and #48900 (addmm);
* threads: a CPU kernel gives with several intra-op threads what it gives with one, and raises
  with both or neither (at::parallel_for cuts a kernel's rows, channels or batch items into
  chunks, one a thread: a chunk that reads or writes past its own range races or skips rows).

Special values (NaN, +-inf, and for elementwise real results the sign of zero) must match
exactly; finite values within the case's tolerance, never bitwise: a vectorised and a scalar
path of a correct kernel differ by an ulp. A difference beyond it is a violation only when it
is no rounding of the case (clause 3 of the verdict rule): float64 golden shows the same
dependence, or the other run is off golden beyond the case's conditioning. Which ops a relation
does not apply to, and why, is in opdb/rules/relations.toml (hints `layout_relation`,
`position_relation`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import re
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from conform.errors import first_line
from conform.judge import verdict as oracle
from conform.judge.compare import Record, compare, failures, leaves
from conform.judge.tolerances import exactly_determined
from conform.judge.trees import bind_arguments
from generators.case import STRIDELESS_LAYOUTS, Case, TensorSpec
from generators.tensor import EXPLICIT_LAYOUT, dtype_name

LAYOUT, POSITION, OUT_LAYOUT, FORMS, ALIAS, THREADS = "layout", "position", "out_layout", "forms", "alias", "threads"

# elements a position relation picks from the drawn case, and how often each is repeated so
# that it fills whole vector blocks of every CPU ISA and dtype (64 bytes x 2 unrolled, in
# float16 lanes). Odd, so that the copy after the blocks leaves a scalar tail at any width.
PICKS = 13

# An error that states the kernel's layout requirement ("Expected X.is_contiguous(memory_format)",
# "slow_conv3d output must be contiguous", "Unsupported memory format"). Stating it excuses
# nothing by itself: PyTorch's own OpInfo tests expect every op to accept non-contiguous samples
# and a non-contiguous out=, and mark the kernels that raise instead as expected failures
# (native_group_norm's "Expected X.is_contiguous" is one). Only an op whose requirement is its
# precondition may raise with such a text in one layout and not in the other: an internal op
# (a leading underscore: no OpInfo expects more of it, and its callers make operands contiguous,
# as _validate_sparse_csr_tensor_args' "contiguous tensor per batch" is the check itself), or one
# opdb/rules/relations.toml names (hint `layout_precondition`, with why).
STATED_LAYOUT = re.compile(
    r"is_contiguous\(|must be contiguous|be contiguous|requires? (a )?contiguous|contiguous (input|tensor)"
    r"|unsupported memory format",
    re.IGNORECASE,
)


def stated_requirement(op, e: BaseException | None) -> bool:
    """`e` states a layout requirement that is `op`'s precondition (an internal op's, or a named one's)."""
    internal = op.base_name.startswith("_")
    return e is not None and bool(_hint(op, "layout_precondition", internal)) and bool(STATED_LAYOUT.search(str(e)))


BLOCK = 64


@dataclass
class Violation:
    """A relation the device broke: what a CaseResult needs, and what the repro script replays
    (the other case it ran and, for the position relation, which output element each of the
    other case's output elements is held against)."""

    relation: str
    outcome: str  # "mismatch" | "device_error"
    message: str
    other: Case
    index: list[int] | None = None
    first: Case | None = None  # the case held against `other` when it is not the drawn one
    other_op: str | None = None  # the overload `other` calls, where it is not the drawn op's
    traceback: str = ""
    kinds: frozenset = frozenset()
    tolerance: tuple[float, float] | None = None  # (rtol, atol) of the leaf that broke it
    sign: bool = False  # signed zeros told apart
    threads: int = 0  # the intra-op threads the other case ran with (the threads relation), 0: as the first

    def to_dict(self) -> dict[str, Any]:
        return {
            "relation": self.relation,
            "sign": self.sign,
            "other": self.other.to_json(),
            "index": self.index,
            "first": self.first.to_json() if self.first is not None else None,
            "other_op": self.other_op,
            **({"threads": self.threads} if self.threads else {}),
        }


@dataclass
class Sides:
    """How a relation runs a case. `device(case)` returns (observed, error) on the device under
    test, observed as (result, written) on the CPU; `cpu(case, dtype)` the CPU's observed value
    (float64: golden) or None where it raised."""

    device: Callable[[Any], tuple[Any, BaseException | None]]
    cpu: Callable[[Any, Any], Any]


def _hint(op, name: str, default=True):
    return (getattr(getattr(op, "rules", None), "hints", None) or {}).get(name, default)


def _tensor_keyed(op) -> bool:
    """A TorchScript dict keyed by tensors among the arguments: its keys are looked up by
    identity, so the same values in another tensor are another key (a KeyError, or the
    default), by design (relations.toml names the *.Dict_Tensor overloads; this is all of them)."""
    return any(a.base_type.startswith("Dict(Tensor") for a in op.arguments)


def _names(op) -> list[str]:
    return [a.name for a in op.arguments]


def _out_names(op) -> set[str]:
    return {a.name for a in op.arguments if a.is_out}


def _map_specs(case: Case, fn, skip: set[str], names: list[str]) -> Case:
    """`case` with each TensorSpec (outside the arguments in `skip`) replaced by fn(spec, name);
    one spec object in two places stays one."""
    done: dict[int, Any] = {}

    def walk(v, name):
        if isinstance(v, TensorSpec):
            if id(v) not in done:
                done[id(v)] = fn(v, name)
            return done[id(v)]
        if isinstance(v, tuple):
            return tuple(walk(x, name) for x in v)
        if isinstance(v, list):
            return [walk(x, name) for x in v]
        return v

    args = tuple(
        v if (names[i] if i < len(names) else "") in skip else walk(v, names[i] if i < len(names) else f"arg{i}")
        for i, v in enumerate(case.args)
    )
    kwargs = {k: v if k in skip else walk(v, k) for k, v in case.kwargs.items()}
    return dataclasses.replace(case, args=args, kwargs=kwargs)


def _plain_spec(spec: TensorSpec) -> bool:
    return (
        spec.layout not in STRIDELESS_LAYOUTS
        and not spec.quantized
        and spec.dtype != "complex32"
        and spec.numel >= 1
        and spec.axis is None
    )


@functools.lru_cache(maxsize=32)
def _logical(spec: TensorSpec) -> torch.Tensor:
    """The spec's values on the CPU (cached: the relations of one case read them several times;
    callers never write to it)."""
    return spec.materialize(lambda t: t).detach()


def _with_values(spec: TensorSpec, values: torch.Tensor, layout: str, shape=None, stride=None) -> TensorSpec:
    return dataclasses.replace(
        spec,
        shape=tuple(values.shape) if shape is None else tuple(shape),
        data=tuple(values.reshape(-1).tolist()),
        layout=layout,
        edges=None,
        magnitude="",
        stride=stride,
        storage_offset=0,
    )


def other_layout(spec: TensorSpec) -> str | None:
    """The layout a spec's values are held in for the layout relation, or None: a strided
    tensor made contiguous; a contiguous matrix transposed (its last dim strided: attention's
    q, k, v, a matmul operand), a contiguous vector sliced; any other tensor of two elements or
    more in explicit strides (EXPLICIT_LAYOUT, see `_explicit_strides`): two of its dims swapped
    in memory, or, with one dim over 1, every other element (a kernel that assumes a contiguous
    input is reached whatever shape the draw gave)."""
    if not _plain_spec(spec) or spec.numel < 2:
        return None
    if spec.layout != "contiguous":
        return "contiguous"
    shape = spec.shape
    if len(shape) >= 2 and shape[-1] > 1 and shape[-2] > 1:
        return "transposed"
    if len(shape) >= 1 and shape[0] > 1:
        return "sliced"
    return EXPLICIT_LAYOUT


def _explicit_strides(shape: tuple[int, ...]) -> tuple[tuple[int, ...], str]:
    """Non-contiguous strides for a contiguous tensor of this shape (two elements or more) that
    the named layouts leave contiguous, (1, 4, 3, 1) or (1, 5): the two innermost dims over 1
    swapped in memory, else every other element; and the words for it."""
    big = [d for d, n in enumerate(shape) if n > 1]
    order = list(range(len(shape)))
    if len(big) >= 2:
        i, j = big[-2], big[-1]
        order[i], order[j] = order[j], order[i]
    stride, acc = [0] * len(shape), 1 if len(big) >= 2 else 2
    for d in reversed(order):
        stride[d] = acc
        acc *= max(shape[d], 1)
    words = f"dims {big[-2]} and {big[-1]} swapped in memory" if len(big) >= 2 else "every other element"
    return tuple(stride), words


def layout_case(op, case: Case, *, dense_only: bool = False) -> tuple[Case, list[str]] | None:
    """`case` with every input (not an out= argument) in `other_layout`, the same values; and
    what changed, for the message ("self transposed"). `dense_only`: strided inputs made
    contiguous, contiguous ones left alone. None when nothing can change."""
    changed: list[str] = []
    names = _names(op)

    def relaid(spec, name):
        layout = other_layout(spec)
        if layout is None or dense_only and layout != "contiguous":
            return spec
        if layout != EXPLICIT_LAYOUT:
            changed.append(f"{name} {layout}")
            return _with_values(spec, _logical(spec), layout)
        stride, words = _explicit_strides(spec.shape)
        changed.append(f"{name} strided ({words})")
        return _with_values(spec, _logical(spec), layout, stride=stride)

    other = _map_specs(case, relaid, _out_names(op), names)
    return (other, changed) if changed else None


# -- running and judging a relation -------------------------------------------------------------


def identical(a, b) -> bool:
    """Bit for bit the same tensors (NaN and signed zeros included), leaf by leaf: most runs of
    a relation are, and this spares them the comparison's cost."""
    la, lb = list(leaves((a[0], list((a[1] or {}).values())))), list(leaves((b[0], list((b[1] or {}).values()))))
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            return False
        if x.shape != y.shape or x.dtype != y.dtype or x.layout != torch.strided or y.layout != torch.strided:
            return False
        if x.is_quantized or y.is_quantized or x.device.type == "meta" or x.is_neg() or y.is_neg():
            return False
        x, y = x.detach().resolve_conj(), y.detach().resolve_conj()
        if x.is_complex():
            x, y = torch.view_as_real(x), torch.view_as_real(y)
        if x.dtype.is_floating_point:
            # NaN payloads differ between paths and mean nothing; signed zeros are compared
            nan = x.isnan()
            same = ((x == y) & (torch.signbit(x) == torch.signbit(y))) | (nan & y.isnan())
            if not bool(same.all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _first_diff(records: list[Record]) -> str:
    r = failures(records)[0]
    return r.message


def _confirmed(
    op,
    sides: Sides,
    first: Case,
    first_obs,
    other: Case,
    other_obs,
    compare_fn,
    mapped,
    decided=("values",),
    other_sides: Sides | None = None,
) -> bool:
    """Whether a difference between two runs of the device is the kernel's and not the case's
    rounding: float64 golden shows the same dependence (a difference of a kind in `decided`), or
    the other run is off its own golden beyond the case's conditioning (the verdict rule's
    excuses). `mapped(obs)` takes a value of `first`'s shape to the other's. `other_sides`: how
    the other case runs, where that differs from the first's (another thread count)."""
    osides = other_sides or sides
    g_first = sides.cpu(first, torch.float64)
    g_other = osides.cpu(other, torch.float64)
    ref_first, ref_other = sides.cpu(first, None), osides.cpu(other, None)
    if g_first is None or g_other is None or ref_first is None or ref_other is None:
        return True  # no float64 opinion (integer results are exact): the difference stands
    expect_first = oracle.golden_pair(g_first, ref_first)
    expect_other = oracle.golden_pair(g_other, ref_other)
    if expect_first is None or expect_other is None:
        return True
    apart = failures(compare_fn(expect_other, mapped(expect_first) if mapped else expect_first))
    if any(r.kind in decided for r in apart) or (apart and not oracle._case_has_nonfinite(first)):
        # golden, in the case's dtypes, depends on it too: the kernel's algorithm does. Only
        # where NaN and infinity land when the inputs hold some may follow the algorithm a
        # layout selects (a fused attention kernel or the math path): the verdict rule's
        # specials excuse, through against_golden below, decides those
        return True
    phase = oracle.Phase(
        "forward",
        op,
        other,
        ref_other,
        compare_fn,
        run_cpu=lambda c, dt, tx=None: osides.cpu(c, dt),
        expect=lambda raw: oracle.golden_pair(raw, ref_other),
    )
    phase.preset_golden(g_other)

    def rerun(c, tx=None, scribble=False):
        obs, err = osides.device(c)
        return None if err is not None else obs

    j = oracle.against_golden(phase, other_obs, rerun)
    return not j.judged or not j.ok


def _changed_text(changed: list[str]) -> str:
    return ", ".join(changed)


def check_layout(
    op,
    case: Case,
    observed,
    sides: Sides,
    compare_fn,
    *,
    values: bool = True,
    drawn_raised: BaseException | None = None,
):
    """The layout relation on one case; `observed` is the device's (result, written) for
    `case`, or None with `drawn_raised` the device's error. `values` False checks the status
    alone (random ops: another layout may draw in another order). A Violation or None."""
    if not _hint(op, "layout_relation") or _hint(op, "layout", None) or _tensor_keyed(op):
        return None
    if drawn_raised is not None and not _strided(case):
        return None
    made = layout_case(op, case, dense_only=drawn_raised is not None)
    if made is None:
        return None
    other, changed = made
    other_obs, other_err = sides.device(other)
    what = _changed_text(changed)
    if drawn_raised is not None:
        if other_err is not None or stated_requirement(op, drawn_raised):
            return None
        return Violation(
            LAYOUT,
            "device_error",
            f"raises only in the drawn layout: {first_line(drawn_raised)}; the same values with {what} run "
            "(the result depends on the inputs' layout)",
            other,
        )
    if other_err is not None:
        if stated_requirement(op, other_err):
            return None
        return Violation(
            LAYOUT,
            "device_error",
            f"raises only with {what} (the same values): {first_line(other_err)}; the drawn layout runs",
            other,
            traceback=_tb(other_err),
        )
    if not values or identical(other_obs, observed):
        return None
    records = compare_fn(other_obs, observed)
    if not failures(records):
        return None
    if not _confirmed(op, sides, case, observed, other, other_obs, compare_fn, None):
        return None
    return Violation(
        LAYOUT,
        "mismatch",
        f"the result depends on the inputs' layout: with {what} (the same values), {_first_diff(records)}"
        " (expected: the drawn layout's result)",
        other,
        kinds=frozenset(r.kind for r in failures(records)),
        tolerance=_tolerance(records),
    )


def _tolerance(records: list[Record]) -> tuple[float, float] | None:
    r = failures(records)[0]
    return None if r.rtol is None else (r.rtol, r.atol or 0.0)


def _strided(case: Case) -> bool:
    return any(_plain_spec(s) and s.layout != "contiguous" and s.numel >= 2 for s in case.tensor_specs())


def _tb(e: BaseException) -> str:

    return "".join(traceback.format_exception(e))


# -- position -----------------------------------------------------------------------------------


def elementwise(op) -> bool:
    return (op.family == "pointwise" or "pointwise" in (op.tags or ())) and bool(_hint(op, "position_relation"))


def _zero_meets(n: int, out_leaves: list[torch.Tensor], inputs: list[torch.Tensor]) -> torch.Tensor:
    """The flat positions where the sign of a zero is at stake: zeros of both signs among the
    inputs and the result (minimum(+0, -0), clamp(-0, min=+0), neg(+0)), or a zero result of
    nonzero inputs (an exact multiple's remainder, x - x)."""
    plus, minus = torch.zeros(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    nonzero_in = torch.ones(n, dtype=torch.bool)
    zero_out = torch.zeros(n, dtype=torch.bool)
    for k, t in enumerate(out_leaves + inputs):
        if not t.is_floating_point():
            continue
        v = t.reshape(n)
        zero = v == 0
        plus |= zero & ~torch.signbit(v)
        minus |= zero & torch.signbit(v)
        if k < len(out_leaves):
            zero_out |= zero
        else:
            nonzero_in &= ~zero
    return (plus & minus) | (zero_out & nonzero_in & bool(inputs))


def _picks(n: int, out_leaves: list[torch.Tensor], inputs: list[torch.Tensor], seed: int) -> list[int]:
    """Up to PICKS flat positions: where the sign of a zero is at stake (_zero_meets) first,
    then where the result or an input holds another special value or a zero, then the last (a
    row's tail), then positions drawn from the case's seed."""
    if n <= PICKS:
        return list(range(n))
    flagged = torch.zeros(n, dtype=torch.bool)
    for t in out_leaves + inputs:
        if t.is_floating_point() or t.is_complex():
            v = torch.view_as_real(t.resolve_conj()).reshape(n, -1) if t.is_complex() else t.reshape(n, 1)
            flagged |= (~torch.isfinite(v) | (v == 0)).any(-1)
    rng = random.Random(seed)
    meets = _zero_meets(n, out_leaves, inputs)
    first = meets.nonzero().reshape(-1).tolist()
    special = (flagged & ~meets).nonzero().reshape(-1).tolist()
    rng.shuffle(first)
    rng.shuffle(special)
    first = first[: PICKS // 3]
    chosen = list(dict.fromkeys(first + special[: PICKS // 2 - len(first)] + [n - 1]))
    rest = [i for i in rng.sample(range(n), min(n, 3 * PICKS)) if i not in chosen]
    return sorted((chosen + rest)[:PICKS])


def position_cases(op, case: Case, observed) -> list[tuple[Case, list[int], str]] | None:
    """The position relation's cases: every input broadcast to the result's shape, the picked
    elements (a) each repeated BLOCK times and once more after (vector bodies, then a scalar
    tail) and (b) read through a stride of 2 (the scalar loop); with, for each, the flat
    position in the drawn result of each of its output elements. None where the op's result is
    not one shape of all its inputs."""
    if op.variant not in ("functional", "inplace"):
        return None
    outs = [t for t in leaves(observed[0]) if isinstance(t, torch.Tensor)]
    if not outs or any(t.layout != torch.strided or t.shape != outs[0].shape for t in outs):
        return None
    shape = tuple(outs[0].shape)
    n = outs[0].numel()
    if n < 1:
        return None
    names = _names(op)
    specs: dict[int, torch.Tensor] = {}
    for spec in case.tensor_specs():
        if not _plain_spec(spec) and spec.numel >= 1:
            return None
        if spec.numel == 0:
            return None
        t = _logical(spec)
        if t.dim() == 0:
            continue  # a 0-dim tensor is a scalar operand: it stays one
        try:
            if torch.broadcast_shapes(tuple(t.shape), shape) != shape:
                return None
        except RuntimeError:
            return None
        specs[id(spec)] = t.broadcast_to(shape).reshape(-1)
    if not specs:
        return None
    picks = _picks(n, outs, list(specs.values()), case.seed)
    where = torch.tensor(picks)
    block = torch.cat([where.repeat_interleave(BLOCK), where])
    made = []
    for label, index, layout in (
        (f"inside vector blocks of {BLOCK} and in the scalar tail", block, "contiguous"),
        ("read through a stride (the scalar loop)", where, "sliced"),
    ):

        def relaid(spec, name, index=index, layout=layout):
            if id(spec) not in specs:
                return spec
            return _with_values(spec, specs[id(spec)][index], layout)

        made.append((_map_specs(case, relaid, _out_names(op), names), index.tolist(), label))
    return made


def _take(obs, index: list[int]):
    """A drawn case's observed value at the flat positions `index`, leaf by leaf."""
    idx = torch.tensor(index)

    def take(x):
        if isinstance(x, torch.Tensor):
            return x.reshape(-1)[idx]
        if isinstance(x, (list, tuple)):
            return type(x)(take(v) for v in x)
        if isinstance(x, dict):
            return {k: take(v) for k, v in x.items()}
        return x

    return take(obs[0]), {k: take(v) for k, v in (obs[1] or {}).items()}


def exact_dtypes(op, case: Case) -> frozenset[str]:
    """The result dtypes in which `case`'s result is exactly determined at every position
    (opdb/rules/positions.toml: `position_exact`, under `position_exact_when`)."""
    dtypes = frozenset(_hint(op, "position_exact", ()) or ())
    when = _hint(op, "position_exact_when", None) or {}
    if dtypes and when:
        bound = bind_arguments(op, case.args, case.kwargs)
        if any(bound.get(k) is not None and bound.get(k) != v for k, v in when.items()):
            return frozenset()
    return dtypes


# Half precision computed in float32 opmath and rounded once: every CPU kernel of an elementwise
# op upcasts float16 and bfloat16 to float32 on its vector path, so two paths that both do give
# the same bits unless the float32 values straddle a rounding midpoint of the half dtype. A half
# ulp is 2**13 (float16) or 2**16 (bfloat16) float32 ulps: elements whose float64 value lies
# within MIDPOINT_MARGIN of a half ulp of a midpoint are not judged, and beyond that only a float32
# result off by hundreds of ulps (a path computing in the half dtype itself) rounds otherwise.
# bfloat16 i0e alone is 0.9921875 at 0, 1.0 inside a vector block (pytorch#140348).
HALF_OPMATH = frozenset({"float16", "bfloat16"})
MIDPOINT_MARGIN = 0.125


def opmath_dtypes(op) -> frozenset[str]:
    """The half dtypes whose results the position relation holds to the same bits away from a
    rounding midpoint (HALF_OPMATH); an op opts out with the hint `position_opmath = false`."""
    return HALF_OPMATH if _hint(op, "position_opmath") else frozenset()


def _near_midpoint(golden: torch.Tensor, rounded: torch.Tensor) -> torch.Tensor:
    """Elementwise: float64 `golden` lies within MIDPOINT_MARGIN of an ulp of a rounding midpoint
    of `rounded`'s dtype (its correctly rounded value), so paths that round float32 results
    may round it either way."""
    toward = torch.where(golden >= rounded.to(torch.float64), torch.inf, -torch.inf).to(rounded.dtype)
    ulp = (torch.nextafter(rounded, toward).to(torch.float64) - rounded.to(torch.float64)).abs()
    off = (golden - rounded.to(torch.float64)).abs()
    return ((off - ulp / 2).abs() <= MIDPOINT_MARGIN * ulp) | ~torch.isfinite(ulp)


def _bitwise_same(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise: the same value and sign, or both NaN (payloads mean nothing)."""
    return ((a == b) & (torch.signbit(a) == torch.signbit(b))) | (a.isnan() & b.isnan())


def _float_leaves(obs) -> list[torch.Tensor]:
    return [t for t in leaves(obs[0]) if isinstance(t, torch.Tensor)]


def _rounded(sides: Sides, other: Case, *, unrounded: bool = False):
    """The correctly rounded result of `other`: float64 golden rounded to the result's dtypes
    (with `unrounded`, a pair: those and float64 golden's own leaves)."""
    g, ref = sides.cpu(other, torch.float64), sides.cpu(other, None)
    if g is None or ref is None:
        return None
    pair = oracle.golden_pair(g, ref)
    if pair is None:
        return None
    return (_float_leaves(pair), _float_leaves(g)) if unrounded else _float_leaves(pair)


def _which_rounded(got: float, drawn: float, rounded: float | None, dtype: str) -> str:
    """Which of two positions' values is the correctly rounded one, where that is known."""
    if rounded is None:
        return ""
    same = [math.isnan(x) and math.isnan(rounded) or x == rounded for x in (got, drawn)]
    if same[0] == same[1]:
        return f"; the correctly rounded value (float64 golden rounded to {dtype}) is {rounded!r}"
    right = "the other position's" if same[0] else "the drawn case's"
    return f"; {right} is the correctly rounded value (float64 golden rounded to {dtype}: {rounded!r})"


def _inexact_position(
    sides: Sides, other: Case, other_obs, want, exact: frozenset[str], opmath: frozenset[str] = frozenset()
):
    """For an exactly determined op (or a half dtype in `opmath`: away from a rounding midpoint),
    the first element whose bits differ between two positions while one of them is the correctly
    rounded value and the other is not: (flat index in `other`'s result, its value, the drawn
    case's, the rounded value, the dtype), else None. Where neither is (a kernel that rounds
    twice on every path), the position does not decide it."""
    got, drawn = _float_leaves(other_obs), _float_leaves(want)
    apart = [
        (k, a, d)
        for k, (a, d) in enumerate(zip(got, drawn))
        if a.dtype == d.dtype
        and a.shape == d.shape
        and a.is_floating_point()
        and dtype_name(a.dtype) in exact | opmath
        and not bool(_bitwise_same(a, d).all())
    ]
    if not apart:
        return None
    pair = _rounded(sides, other, unrounded=True)
    if pair is None or len(pair[0]) != len(got):
        return None
    rounded, golden = pair
    for k, a, d in apart:
        r = rounded[k]
        if r.shape != a.shape or r.dtype != a.dtype:
            continue
        a, d, r = a.reshape(-1), d.reshape(-1), r.reshape(-1)
        blamed = ~_bitwise_same(a, d) & ((a == r) != (d == r)) & torch.isfinite(r)
        if dtype_name(a.dtype) not in exact:
            g = golden[k].reshape(-1) if k < len(golden) and golden[k].numel() == r.numel() else None
            if g is None or g.dtype != torch.float64:
                continue
            blamed &= ~_near_midpoint(g, r)
        if bool(blamed.any()):
            j = int(blamed.nonzero()[0])
            return j, a[j].item(), d[j].item(), r[j].item(), dtype_name(a.dtype)
    return None


def check_position(op, case: Case, observed, sides: Sides, tol) -> Violation | None:
    """The position relation for an elementwise op (see position_cases). Where the op is
    exactly determined in the result's dtype (exact_dtypes), two positions must agree bit for
    bit, and a difference within the tolerance alarms when one of them is the correctly rounded
    value and the other is not."""
    if not elementwise(op):
        return None
    made = position_cases(op, case, observed)
    if made is None:
        return None
    real = not any(s.torch_dtype.is_complex for s in case.tensor_specs())
    exact = exact_dtypes(op, case)
    opmath = opmath_dtypes(op) - exact if real else frozenset()

    def compare_fn(a, e):
        out = compare(a[0], e[0], tolerance=tol, check_sign_of_zero=real, path="output")
        for k, v in (e[1] or {}).items():
            out += compare((a[1] or {}).get(k), v, tolerance=tol, check_sign_of_zero=real, path=f"{k} (written)")
        return out

    drawn = list(leaves(observed[0]))
    shape = tuple(drawn[0].shape) if drawn else ()
    for other, index, label in made:
        other_obs, err = sides.device(other)
        if err is not None:
            continue  # another shape is another case (a relation on values, not on errors)
        want = _take(observed, index)
        if identical(other_obs, want):
            continue
        records = compare_fn(other_obs, want)
        if not failures(records):
            found = _inexact_position(sides, other, other_obs, want, exact, opmath) if exact | opmath else None
            if found is None:
                continue
            j, got, was, rounded, dtype = found
            why = (
                f"an exactly determined result in {dtype}, held bit for bit at every position"
                if dtype in exact
                else f"{dtype} computed in float32 and rounded once gives the same bits on every path"
                " where the value is not near a rounding midpoint"
            )
            return Violation(
                POSITION,
                "mismatch",
                f"the result depends on the element's position: the element at {_unravel(index[j], shape)} "
                f"computed {label} is {got!r}, the drawn case's {was!r}{_which_rounded(got, was, rounded, dtype)}"
                f" ({why})",
                other,
                index=index,
                kinds=frozenset({"values"}),
                tolerance=(0.0, 0.0),
                sign=real,
            )
        # golden's zeros taking another sign at another position is the kernel's dependence too:
        # no NaN or infinity of the inputs decides the sign of a zero
        mapped = lambda obs: _take(obs, index)  # noqa: E731
        if not _confirmed(op, sides, case, observed, other, other_obs, compare_fn, mapped, ("values", "sign")):
            continue
        bad = failures(records)[0]
        at = bad.index[0] if bad.index else 0
        where = _unravel(index[at], shape) if drawn else ()
        return Violation(
            POSITION,
            "mismatch",
            f"the result depends on the element's position: the element at {where} computed {label} "
            f"differs from the drawn case's: {bad.message}{_rounded_note(op, sides, other, other_obs, want, bad, exact)}",
            other,
            index=index,
            kinds=frozenset(r.kind for r in failures(records)),
            tolerance=_tolerance(records),
            sign=real,
        )
    return None


def _rounded_note(op, sides: Sides, other: Case, other_obs, want, bad: Record, exact: frozenset[str]) -> str:
    """Which of the two positions holds the correctly rounded value, for an exactly determined
    op's single tensor result (the verdict already judges others against golden)."""
    got, drawn = _float_leaves(other_obs), _float_leaves(want)
    if len(got) != 1 or len(drawn) != 1 or bad.path != "output" or not bad.index or bad.kind == "sign":
        return ""
    a, d = got[0], drawn[0]
    if not a.is_floating_point() or a.shape != d.shape:
        return ""
    if dtype_name(a.dtype) not in exact and not exactly_determined(op, other):
        return ""
    rounded = _rounded(sides, other)
    if not rounded or len(rounded) != 1 or rounded[0].shape != a.shape:
        return ""
    j = bad.index[0]
    return _which_rounded(
        a.reshape(-1)[j].item(), d.reshape(-1)[j].item(), rounded[0].reshape(-1)[j].item(), dtype_name(a.dtype)
    )


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for s in reversed(shape):
        out.append(flat % max(s, 1))
        flat //= max(s, 1)
    return tuple(reversed(out))


# -- out= layouts -------------------------------------------------------------------------------


def _out_layouts(op, case: Case) -> str:
    """The layouts of `case`'s out= arguments, in words ("transposed")."""
    outs = _out_names(op)
    specs = [v for k, v in case.kwargs.items() if k in outs]
    found = [s.layout for v in specs for s in (v if isinstance(v, list) else [v]) if isinstance(s, TensorSpec)]
    return ", ".join(dict.fromkeys(found)) or "strided"


def check_out_layout(op, contiguous: Case, strided: Case, sides: Sides, compare_fn, *, values=True) -> Violation | None:
    """An out= op writes the same values into a non-contiguous out as into a contiguous one, and
    raises for both or for neither (`values` False: the status alone)."""
    if not _hint(op, "layout_relation"):
        return None
    a, a_err = sides.device(contiguous)
    b, b_err = sides.device(strided)
    if (a_err is None) != (b_err is None) and not stated_requirement(op, a_err or b_err):
        err = a_err or b_err
        which = "contiguous" if a_err is not None else f"non-contiguous ({_out_layouts(op, strided)})"
        return Violation(
            OUT_LAYOUT,
            "device_error",
            f"raises only with a {which} out=: {first_line(err)}; the other runs",
            strided,
            first=contiguous,
            traceback=_tb(err),
        )
    if a_err is not None or b_err is not None or not values or identical(a, b):
        return None
    records = compare_fn(b, a)
    if not failures(records):
        return None
    if not _confirmed(op, sides, contiguous, a, strided, b, compare_fn, None):
        return None
    return Violation(
        OUT_LAYOUT,
        "mismatch",
        f"the result depends on the out= layout: a non-contiguous ({_out_layouts(op, strided)}) out gives "
        f"{_first_diff(records)}"
        " (expected: what a contiguous out holds)",
        strided,
        first=contiguous,
        kinds=frozenset(r.kind for r in failures(records)),
        tolerance=_tolerance(records),
    )


# layouts in which every element has memory of its own: an input of one of these can be an out
_OWN_MEMORY = ("contiguous", "transposed", "sliced", "sliced_last", "offset", "channels_last")


# the aliased cases the alias relation runs per case, at most: an out of addmm's shape may be
# its self (the accumulator ATen handles), mat1 or mat2 (each read while written)
ALIAS_CASES = 3


def _own_memory(spec, like: TensorSpec) -> bool:
    """`spec` is a tensor of `like`'s shape and dtype in which every element has its own memory."""
    return (
        isinstance(spec, TensorSpec)
        and _plain_spec(spec)
        and spec.layout in _OWN_MEMORY
        and spec.stride is None
        and tuple(spec.shape) == tuple(like.shape)
        and spec.dtype == like.dtype
    )


def alias_cases(op, case: Case) -> list[tuple[Case, Case, str, str]]:
    """Cases in which the tensor an op writes is also one of its inputs, each with the case it
    is held against: (aliased, separate, the written argument's name, the input's name), at most
    ALIAS_CASES. An out= case (its outs sized for the result): one out replaced by an input of the
    same shape and dtype, against `case` itself (a separate out; its values do not matter). An
    in-place case: another input replaced by self, against the same with a separate copy of self
    (the same values, its own memory)."""
    outs = _out_names(op)
    names = _names(op)
    inputs = [(names[i] if i < len(names) else f"args[{i}]", i, v) for i, v in enumerate(case.args)]
    inputs += [(k, k, v) for k, v in case.kwargs.items() if k not in outs]
    made: list[tuple[Case, Case, str, str]] = []
    if op.variant == "inplace":
        target = case.args[0] if case.args else None
        if not isinstance(target, TensorSpec) or not _own_memory(target, target) or target.numel < 2:
            return made
        for in_name, where, spec in inputs[1:]:
            if spec is target or not _own_memory(spec, target) or len(made) >= ALIAS_CASES:
                continue
            pair = [_replace_arg(case, where, v) for v in (target, dataclasses.replace(target))]
            made.append((pair[0], pair[1], names[0] if names else "self", in_name))
        return made
    for out_name in [n for n in names if n in outs]:
        out = case.kwargs.get(out_name)
        if not isinstance(out, TensorSpec) or not _plain_spec(out) or out.numel < 2:
            continue
        for in_name, _, spec in inputs:
            if _own_memory(spec, out) and len(made) < ALIAS_CASES:
                made.append(
                    (dataclasses.replace(case, kwargs={**case.kwargs, out_name: spec}), case, out_name, in_name)
                )
    return made


# internal ops no caller hands an alias: a backward kernel's grad_input (zeroed, then accumulated
# from grad_output), a loss's `*_forward` buffers, anything with a leading underscore
_INTERNAL = re.compile(r"^_|_backward|_forward$")


def _callable_aliased(op) -> bool:
    """An out= or in-place overload of a public op, which a caller may hand one of its own inputs."""
    return op.variant in ("out", "inplace") and not _INTERNAL.search(op.base_name)


def _replace_arg(case: Case, where, value) -> Case:
    if isinstance(where, int):
        return dataclasses.replace(case, args=case.args[:where] + (value,) + case.args[where + 1 :])
    return dataclasses.replace(case, kwargs={**case.kwargs, where: value})


def check_alias(op, case: Case, sides: Sides, compare_fn) -> Violation | None:
    """An op whose written tensor is also one of its inputs (alias_cases) raises, or gives what
    it gives with that input in memory of its own. Raising is a right answer: PyTorch refuses
    partial overlap ("unsupported operation: some elements of the input tensor and the written-to
    tensor refer to a single memory location"); a kernel that reads an input it has begun to
    overwrite (BLAS gemm into one of its operands) is not."""
    if not _hint(op, "layout_relation") or not _hint(op, "alias_relation") or not _callable_aliased(op):
        return None
    wanted: dict[int, Any] = {}
    for other, separate, written, in_name in alias_cases(op, case):
        if id(separate) not in wanted:
            want, err = sides.device(separate)
            wanted[id(separate)] = None if err is not None else (want[0], {})
        theirs = wanted[id(separate)]
        if theirs is None:
            continue
        got, err = sides.device(other)
        if err is not None:
            continue
        mine = (got[0], {})
        if identical(mine, theirs):
            continue
        records = compare_fn(mine, theirs)
        if not failures(records):
            continue
        if not _confirmed(op, sides, separate, theirs, other, mine, compare_fn, None):
            continue
        what = f"the out= argument {written}" if op.variant == "out" else f"the in-place {written}"
        return Violation(
            ALIAS,
            "mismatch",
            f"{what} given as the input {in_name} too (the same tensor) neither raises nor gives what it gives "
            f"with that input in memory of its own: {_first_diff(records)} (expected: the result without the alias)",
            other,
            first=separate,
            kinds=frozenset(r.kind for r in failures(records)),
            tolerance=_tolerance(records),
        )
    return None


# -- threads ------------------------------------------------------------------------------------


def check_threads(
    op, case: Case, observed, sides: Sides, threaded: Sides, compare_fn, threads: int, unsteady: Callable
) -> Violation | None:
    """The threads relation: `case` run again through `threaded` (the device with `threads`
    intra-op threads; `sides`, with one, ran it as `observed`) gives the same result within the
    case's tolerance (a parallel sum adds in another order), and raises only where one thread
    raises too. A difference stands only where one thread gives its own result again however its
    memory lies (`unsteady(observed)` is "": a kernel reading memory it does not own, an expanded
    input's neighbours, varies with the allocator, not the threads, and is the verdict's and the
    layout relation's to judge) and float64 depends on the threads too or the threaded run is off
    golden beyond the case's conditioning."""
    if not _hint(op, "threads_relation"):
        return None
    other, err = threaded.device(case)
    if err is not None:
        return Violation(
            THREADS,
            "device_error",
            f"with {threads} intra-op threads the op raises {type(err).__name__}: {first_line(err)}; "
            "with one it computes",
            case,
            traceback=_tb(err),
            threads=threads,
        )
    if identical(observed, other):
        return None
    bad = failures(compare_fn(other, observed))
    if not bad:
        return None
    if unsteady(observed):
        return None
    if not _confirmed(op, sides, case, observed, case, other, compare_fn, None, other_sides=threaded):
        return None
    return Violation(
        THREADS,
        "mismatch",
        f"with {threads} intra-op threads the result differs from one thread's (same inputs): {_first_diff(bad)}",
        case,
        kinds=frozenset(r.kind for r in bad),
        tolerance=_tolerance(bad),
        threads=threads,
    )


def describe(v: Violation) -> str:
    return f"[{v.relation} relation] {v.message}"


def functional_case(op, case: Case, functional) -> Case | None:
    """The drawn in-place or out= case as a call of its functional overload `functional` (an
    OpSpec): the same inputs, no out."""
    if op.variant == "inplace":
        return dataclasses.replace(case, op=functional.qualname)
    names = _names(op)
    outs = _out_names(op)
    kwargs = {names[i]: v for i, v in enumerate(case.args) if i < len(names) and names[i] not in outs}
    kwargs.update({k: v for k, v in case.kwargs.items() if k not in outs})
    known = {a.name for a in functional.arguments}
    if not set(kwargs) <= known:
        return None
    return Case(functional.qualname, (), kwargs, seed=case.seed)


def check_forms(op, case: Case, observed, functional, sides: Sides, tol, *, same_dtype=False) -> Violation | None:
    """An in-place or out= overload's result (the mutated self, the outs) against its functional
    overload's on the same inputs, run on the device; `sides` run `functional`. The functional's
    result is cast to the written tensor's dtype where the two differ (an in-place op keeps
    self's dtype; an out= may be of a wider one); `same_dtype`: no opinion where they differ (a
    random op's draw in another dtype is another draw)."""
    if functional is None or not _hint(op, "forms_relation"):
        return None
    other = functional_case(op, case, functional)
    if other is None:
        return None
    other_obs, err = sides.device(other)
    if err is not None:
        return None  # the functional may reject what an out= accepts (another result dtype): no opinion
    mine = [t for t in leaves(observed[0]) if isinstance(t, torch.Tensor)]
    theirs = [t for t in leaves(other_obs[0]) if isinstance(t, torch.Tensor)]
    if not mine or len(mine) != len(theirs):
        return None
    shaped = [(i, a, b) for i, (a, b) in enumerate(zip(mine, theirs)) if a.shape != b.shape]
    if shaped and op.variant == "out":
        # an out= is resized to the result's shape (torch's out= contract; one of zero elements
        # always is): an out left at another shape holds no result
        i, a, b = shaped[0]
        return Violation(
            FORMS,
            "mismatch",
            f"the out= overload's result has shape {tuple(a.shape)} where its functional {functional.qualname} "
            f"gives {tuple(b.shape)} on the same inputs (output leaf {i}; expected: the out resized to the "
            "functional's shape)",
            other,
            other_op=functional.qualname,
            kinds=frozenset({"shape"}),
        )
    if shaped:
        return None
    if same_dtype and any(a.dtype != b.dtype for a, b in zip(mine, theirs)):
        return None
    theirs = [b.to(a.dtype) if b.dtype != a.dtype else b for a, b in zip(mine, theirs)]
    if identical((mine, {}), (theirs, {})):
        return None
    records = compare(mine, theirs, tolerance=tol, path="output")
    if not failures(records):
        return None
    return Violation(
        FORMS,
        "mismatch",
        f"the {op.variant} overload disagrees with its functional {functional.qualname} on the same inputs: "
        f"{_first_diff(records)} (expected: the functional's result)",
        other,
        other_op=functional.qualname,
        kinds=frozenset(r.kind for r in failures(records)),
        tolerance=_tolerance(records),
    )

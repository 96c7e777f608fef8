"""Inputs at a size, for the timing pass (conform.timing.bench): cases of one op x dtype whose largest
input holds about N elements, and that run on the CPU.

Passing cells keep no case, so one is drawn: a handful of small cases from
`generators.from_schema` (derandomized, so every run times the same shapes), then scaled up.
Scaling maps every tensor dimension size d > 1 to round(d * f), by value, so that dimensions
that were equal stay equal (a matmul's inner dimension, broadcast partners) and dimensions that
were ordered stay ordered (an index bounded by a size); f is chosen so that the largest input
reaches the target element count. Variants: the same map applied to integer-list arguments too
(view/expand/factory sizes), or scaling only the leading (batch) dimension (convolutions,
pooling, norms: scaling a kernel would change the op's cost class). Every candidate is checked on
the CPU (outputs sized on the meta device first, so nothing blows up memory) before it is timed.
Layouts are made contiguous and NaN/inf-laden "special" values plain, so a timing measures the
op and not a corner case. Ops for which no candidate runs are skipped with a reason (reported,
not stored).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis.errors import Unsatisfiable

import generators
from conform.errors import first_line
from conform.judge import references
from generators import Case, TensorSpec

SEED_MAX_NUMEL = 128  # elements per tensor of the small cases that are scaled up
SEED_EXAMPLES = 10  # small cases drawn per cell
NUMEL_SLACK = 3.0  # a scaled case is accepted within [target / 3, target * 3] elements
OUTPUT_FACTOR = 32  # outputs may hold this many times the target's elements (cdist, outer products)
SLOW_CALL_S = 1.0  # a candidate slower than this per call is used only if no faster one runs
SEARCH_BUDGET_S = 10.0  # seconds spent looking for an input of one size before giving up
SCALE_STRATEGIES = ("uniform", "uniform+sizes", "batch", "scalars")
BATCH_FIRST_FAMILIES = frozenset({"conv", "pooling", "norm", "upsample"})
# families whose ops take "one or more same-shaped tensors plus a few scalars": their schema alone
# builds a representative input (square matrices for linalg), which is tried before generated cases
DIRECT_FIRST_FAMILIES = frozenset(
    {"pointwise", "comparison", "activation", "reduction", "scan", "linalg", "sort", "factory"}
)
_BOOL_TENSOR_NAMES = ("condition", "mask")
_INDEX_NAMES = ("index", "indices", "offsets", "target")
_OMIT = object()


class NotTimeable(Exception):
    """No input of the requested size could be built; `str(exc)` is the reason."""


@dataclass(frozen=True)
class SizedCase:
    case: Any  # generators.Case
    numel: int  # elements of the largest input tensor (or of the output, for factories)
    shape: tuple[int, ...]  # shape of that tensor
    layout: str
    strategy: str  # which of SCALE_STRATEGIES made it
    seed: Any  # the small case it was scaled from
    cpu_call_s: float = 0.0  # one CPU call, as measured when the case was checked


class SeedPool:
    """Small valid cases of one cell, to be scaled up, made only when needed.

    Two kinds: `direct_seeds` (built from the schema alone: cheap, uniform shapes) and cases
    drawn from `generators.from_schema` (derandomized, so every run times the same shapes; they
    know what a schema cannot say, such as a convolution's weight shape). Only cases the CPU
    accepts are kept. Families of same-shaped-tensor ops try the direct ones first; the drawn
    ones are generated only if those do not serve."""

    def __init__(self, op, dtype: str, *, count: int = SEED_EXAMPLES, max_numel: int = SEED_MAX_NUMEL):
        if op.rules.untestable:
            raise NotTimeable(f"untestable: {op.rules.untestable}")
        self.op, self.dtype, self.count, self.max_numel = op, dtype, count, max_numel
        self._direct: list | None = None
        self._drawn: list | None = None
        self.generator_error = ""

    def _valid(self, cases) -> list:
        kept = []
        for case in cases:
            try:
                _check_on_cpu(self.op, case, self.max_numel, check_numel=False)
            except Exception:
                continue
            kept.append(case)
        return kept

    def direct(self) -> list:
        if self._direct is None:
            self._direct = self._valid(direct_seeds(self.op, self.dtype))
        return self._direct

    def drawn(self) -> list:
        if self._drawn is None:
            self._drawn = []
            try:
                strategy = generators.from_schema(
                    self.op, self.dtype, max_numel=self.max_numel, reference=references.float64_function
                )
                cases = _draw(strategy, self.count, f"timing/{self.op.qualname}/{self.dtype}")
            except Exception as e:  # Untestable, or a generator bug: the direct seeds may still serve
                self.generator_error = first_line(e, 200)
                return self._drawn
            # the richest first: more non-trivial dimensions scale more smoothly
            valid = self._valid(_plain(c) for c in cases)
            self._drawn = [
                c for _, c in sorted(enumerate(valid), key=lambda ic: (tuple(-x for x in _richness(ic[1])), ic[0]))
            ]
        return self._drawn

    def batches(self):
        """Lists of seeds in the order they should be tried; later ones are made on demand."""
        if self.op.family in DIRECT_FIRST_FAMILIES:
            yield self.direct()
            yield self.drawn()
        else:
            yield self.drawn()
            yield self.direct()


def seed_cases(op, dtype: str, **kw) -> list:
    """All seeds of a cell in the order they are tried (see `SeedPool`)."""
    pool = SeedPool(op, dtype, **kw)
    return [c for batch in pool.batches() for c in batch]


def _draw(strategy, count: int, digest: str) -> list:
    """The first `count` examples hypothesis generates from `strategy`, derandomized."""
    drawn: list = []

    @settings(
        max_examples=count,
        database=None,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @given(strategy)
    def collect(case):
        drawn.append(case)

    collect._hypothesis_internal_add_digest = digest.encode()
    try:
        collect()
    except Unsatisfiable:
        pass
    return drawn


def direct_seeds(op, dtype: str) -> list:
    """Small cases built from the schema alone: every required tensor the same contiguous shape
    (2-D square, then 3-D batched, then 1-D), scalars 2, dims -1, bools False, sizes the shape.
    None of them is guaranteed to be valid; `seed_cases` keeps those the CPU accepts."""
    if dtype == "none" or any(a.is_tensor_like and a.name in _INDEX_NAMES for a in op.arguments if a.default is None):
        return []
    domain = op.rules.domain if op.rules.domain else "real"
    seeds = []
    for shape in ((6, 6), (2, 6, 6), (36,)):
        args: list = []
        kwargs: dict = {}
        ok = True
        for a in op.arguments:
            if a.is_out:
                continue
            base = a.base_type.replace("SymInt", "int")
            value: Any = _OMIT
            if a.default is None:  # required
                if base == "Tensor":
                    value = TensorSpec(shape, "bool" if a.name in _BOOL_TENSOR_NAMES else dtype, values=domain)
                elif base == "Scalar":
                    value = 2
                elif base == "int":
                    value = -1 if "dim" in a.name else 1
                elif base == "int[]":
                    value = [-1] if "dim" in a.name else list(shape)
                elif base == "bool":
                    value = False
                elif base == "float":
                    value = 0.5
                elif base == "ScalarType":
                    value = {"dtype": dtype}
                else:
                    ok = False
                    break
            elif a.kwarg_only and base == "ScalarType" and a.name == "dtype" and op.family == "factory":
                value = {"dtype": dtype}
            elif a.kwarg_only and base == "Device":
                value = {"device": "target"}
            if value is _OMIT:  # an optional argument: its schema default applies
                continue
            if a.kwarg_only:
                kwargs[a.name] = value
            else:
                if len(args) != _positional_index(op, a):
                    ok = False  # a required argument after an omitted optional one
                    break
                args.append(value)
        if ok and (args or kwargs):
            seeds.append(Case(op.qualname, tuple(args), kwargs))
    return seeds


def _positional_index(op, arg) -> int:
    return [a for a in op.arguments if not a.kwarg_only and not a.is_out].index(arg)


def _plain(case):
    """The case with contiguous tensors and no NaN/inf-laden values, shapes unchanged."""
    main = _main_tensor(case)
    if main is None or not any(d > 1 for d in main.shape):
        return _scale_dims(case, lambda shape: tuple(shape), strategy="uniform")
    return scale_case(case, main.numel, "uniform")


def _richness(case) -> tuple:
    specs = case.tensor_specs()
    if not specs:
        return (0, 0)
    main = max(specs, key=lambda s: s.numel)
    return (sum(d > 1 for d in main.shape), main.numel)


def _is_int_list(v) -> bool:
    return (
        isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
    )


def _walk_values(v, fn):
    """v with fn applied to every TensorSpec and int list, recursing through lists and dicts."""
    if isinstance(v, TensorSpec) or _is_int_list(v):
        return fn(v)
    if isinstance(v, tuple):
        return tuple(_walk_values(x, fn) for x in v)
    if isinstance(v, list):
        return [_walk_values(x, fn) for x in v]
    if isinstance(v, dict) and not (len(v) == 1 and next(iter(v)) in ("dtype", "layout", "memory_format", "device")):
        return {k: _walk_values(x, fn) for k, x in v.items()}
    return v


def _int_lists(case) -> list:
    found: list = []

    def grab(v):
        if _is_int_list(v):
            found.append(tuple(v))
        return v

    _walk_values(list(case.args) + list(case.kwargs.values()), grab)
    return found


def scale_case(case, target: int, strategy: str = "uniform"):
    """`case` with its tensors (and, for "uniform+sizes", its integer-list arguments) scaled so
    that the largest input holds about `target` elements; None when this strategy cannot get
    there (a 0-d main tensor, no tensor at all). Tensors become contiguous, "special" values plain."""
    if strategy not in SCALE_STRATEGIES:
        raise ValueError(f"unknown scaling strategy {strategy!r}")
    specs = case.tensor_specs()
    if strategy == "scalars":
        return None  # needs the op's output size: see `scale_scalars`
    if specs:
        main_shape = max(specs, key=lambda s: s.numel).shape
    elif strategy == "uniform+sizes":
        lists = [s for s in _int_lists(case) if all(x >= 0 for x in s)]
        if not lists:
            return None
        main_shape = max(lists, key=math.prod)
    else:
        return None
    numel = math.prod(main_shape)
    big = [d for d in main_shape if d > 1]
    if not big or numel < 1:
        return None

    if strategy == "batch":
        rank, lead = len(main_shape), main_shape[0]
        if lead < 1:
            return None
        new_lead = max(1, round(lead * target / numel))

        def shape_map(shape):
            if len(shape) == rank and shape[0] == lead:
                return (new_lead,) + tuple(shape[1:])
            return tuple(shape)

    else:
        f = (target / numel) ** (1.0 / len(big))
        values = {d for s in specs for d in s.shape if d > 1} | set(big)
        mapping = {d: max(2, round(d * f)) for d in values}

        def shape_map(shape):
            return tuple(mapping.get(d, d) for d in shape)

    return _scale_dims(case, shape_map, strategy=strategy)


def scale_scalars(op, case, target: int):
    """For factories sized by numbers alone (arange(start, end), randperm(n), linspace(..., steps)):
    every int or float argument of magnitude above 1 multiplied by target / (the seed's output
    elements), which scales the output by about that factor. None for cases with tensors."""
    if case.tensor_specs() or _int_lists(case):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = bound_call(op, case, lambda t: t, torch.device("cpu"))()
    except Exception:
        return None
    numel = out.numel() if isinstance(out, torch.Tensor) else 0
    if numel < 1:
        return None
    f = target / numel

    def scale(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or abs(v) <= 1:
            return v
        return round(v * f) if isinstance(v, int) else v * f

    return dataclasses.replace(
        case, args=tuple(scale(a) for a in case.args), kwargs={k: scale(v) for k, v in case.kwargs.items()}
    )


def _scale_dims(case, shape_map, *, strategy: str):
    def transform(v):
        if isinstance(v, TensorSpec):
            return dataclasses.replace(
                v,
                shape=shape_map(v.shape),
                layout="contiguous",
                values="real" if v.values == "special" else v.values,
                requires_grad=False,
            )
        if strategy == "uniform+sizes" and _is_int_list(v):
            mapped = shape_map(tuple(v))
            return type(v)(mapped)
        return v

    args = tuple(_walk_values(list(case.args), transform))
    kwargs = _walk_values(dict(case.kwargs), transform)
    return dataclasses.replace(case, args=args, kwargs=kwargs)


def _main_tensor(case):
    specs = case.tensor_specs()
    return max(specs, key=lambda s: s.numel) if specs else None


def bound_call(op, case, to_device, device):
    """A no-argument call of the op on the case, its inputs already made on `device` (what is timed)."""
    args, kwargs = case.materialize(to_device, device)
    fn = op.resolve()
    return lambda: fn(*args, **kwargs)


def _output_elements(out) -> int:
    """Elements the op allocates for its outputs (views of an input allocate nothing)."""
    if isinstance(out, torch.Tensor):
        return 0 if out._is_view() else out.numel()
    if isinstance(out, (list, tuple)):
        return sum(_output_elements(o) for o in out)
    return 0


def _check_on_cpu(op, case, target: int, *, check_numel: bool = True) -> tuple[int, tuple[int, ...], float]:
    """(numel, shape, seconds per call) of the case on the CPU; raises if it does not run or
    would allocate outputs far beyond the target."""
    main = _main_tensor(case)
    if check_numel and main is not None and not _near(main.numel, target):
        raise NotTimeable(f"scaled case has {main.numel} elements, not about {target}")
    limit = OUTPUT_FACTOR * max(target, main.numel if main else 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:  # size the outputs on the meta device first: no memory, no time
            meta_out = bound_call(op, case, lambda t: t.to("meta"), torch.device("meta"))()
        except Exception:
            meta_out = None  # no meta kernel: the real call below decides
        if meta_out is not None and _output_elements(meta_out) > limit:
            raise NotTimeable(f"outputs of {_output_elements(meta_out)} elements")
        fn = bound_call(op, case, lambda t: t, torch.device("cpu"))
        t0 = time.perf_counter()
        out = fn()
        elapsed = time.perf_counter() - t0
    if _output_elements(out) > limit:
        raise NotTimeable(f"outputs of {_output_elements(out)} elements")
    if main is not None:
        return main.numel, tuple(main.shape), elapsed
    shape = tuple(out.shape) if isinstance(out, torch.Tensor) else ()
    if check_numel and not _near(math.prod(shape), target):
        raise NotTimeable(f"scaled case makes {math.prod(shape)} elements, not about {target}")
    return math.prod(shape), shape, elapsed


def _near(numel: int, target: int) -> bool:
    return target / NUMEL_SLACK <= numel <= target * NUMEL_SLACK


def sized_case(op, dtype: str, target: int, *, pool: SeedPool | None = None, prefer: tuple | None = None) -> SizedCase:
    """A case of `op` in cell `dtype` whose largest input holds about `target` elements and that
    runs on the CPU. `prefer` = (seed, strategy) of an earlier size is tried first, so that all
    sizes of a cell grow the same case. Raises NotTimeable with the last reason when none works."""
    pool = SeedPool(op, dtype) if pool is None else pool
    order = SCALE_STRATEGIES
    if op.family in BATCH_FIRST_FAMILIES:
        order = ("batch",) + tuple(s for s in SCALE_STRATEGIES if s != "batch")

    def candidates():
        if prefer is not None:
            yield prefer
        for batch in pool.batches():
            for strategy in order:
                for seed in batch:
                    yield seed, strategy

    reason = ""
    seen_seed = False
    slow: SizedCase | None = None
    tried: set = set()
    deadline = time.monotonic() + SEARCH_BUDGET_S
    for seed, strategy in candidates():
        seen_seed = True
        if time.monotonic() > deadline:
            reason = f"no input found within {SEARCH_BUDGET_S:.0f} s; last: {reason}"
            break
        scaled = scale_scalars(op, seed, target) if strategy == "scalars" else scale_case(seed, target, strategy)
        if scaled is None:
            reason = reason or "no tensor or size argument to scale"
            continue
        key = repr(scaled.to_json())
        if key in tried:
            continue
        tried.add(key)
        try:
            numel, shape, cpu_s = _check_on_cpu(op, scaled, target)
        except NotTimeable as e:
            reason = str(e)
            continue
        except Exception as e:  # the op rejects the scaled input: try the next candidate
            reason = f"scaled input rejected: {first_line(e, 200)}"
            continue
        found = SizedCase(scaled, numel, shape, "contiguous", strategy, seed, cpu_s)
        if cpu_s <= SLOW_CALL_S:
            return found
        slow = slow or found
    if slow is not None:
        return slow
    if not seen_seed:
        reason = "no valid small case to scale" + (
            f" (generator: {pool.generator_error})" if pool.generator_error else ""
        )
    raise NotTimeable(reason or "no scaled case reaches the size")

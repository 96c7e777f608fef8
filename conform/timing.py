"""The timing pass: how fast each passing op runs on the device and on the CPU reference, at a
few sizes, and which timings regressed between two runs.

`conform bench` times the cells that *passed* in a stored run, after the parallel sweep and
serially (timings taken while other workers load the machine are noise): one cell at a time in
one child process, which is replaced if an op crashes it; this process alone writes the store. For
each (op, dtype) it builds inputs at every requested size (by element count of the largest input
tensor), times the op on the device and on the CPU with `conform.timer.measure`, and stores one
`Timing` row per size against the run; speedup = reference time / device time.

Inputs at a size. Passing cells keep no case, so one is drawn: a handful of small cases from
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

Regressions: `timing_regressions(store, base_run, new_run)` lists the (op, dtype, size) whose
device time grew by more than `pct` *and* by more than the two runs' interquartile ranges added:
a change inside the measured spread is noise, however large its percentage.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import pickle
import os
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import click
import torch

from .errors import ConformError
from .timer import Measurement, device_events, measure

DEFAULT_SIZES: dict[str, int] = {"small": 1_000, "medium": 100_000, "large": 1_000_000}
DEFAULT_MIN_RUN_TIME = 0.05  # seconds of timed blocks per side and size
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
DIRECT_FIRST_FAMILIES = frozenset({"pointwise", "comparison", "activation", "reduction", "scan", "linalg", "sort", "factory"})
_BOOL_TENSOR_NAMES = ("condition", "mask")
_INDEX_NAMES = ("index", "indices", "offsets", "target")
_OMIT = object()


class NotTimeable(Exception):
    """No input of the requested size could be built; `str(exc)` is the reason."""


# -- sizes ---------------------------------------------------------------------------------


def parse_sizes(expr: str) -> dict[str, int]:
    """"small=1e3,medium=1e5,large=1e6" -> {"small": 1000, ...} (labels at most 16 characters)."""
    sizes: dict[str, int] = {}
    for part in expr.split(","):
        part = part.strip()
        if not part:
            continue
        label, sep, value = part.partition("=")
        label = label.strip()
        try:
            n = int(float(value))
        except ValueError:
            n = 0
        if not sep or not label or len(label) > 16 or n < 1:
            raise ConformError(f"--sizes takes LABEL=ELEMENTS pairs such as small=1e3,medium=1e5,large=1e6, not {part!r}")
        sizes[label] = n
    if not sizes:
        raise ConformError("--sizes is empty")
    return dict(sorted(sizes.items(), key=lambda kv: kv[1]))


# -- inputs at a size ----------------------------------------------------------------------


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
        import generators

        if self._drawn is None:
            self._drawn = []
            try:
                strategy = generators.from_schema(self.op, self.dtype, max_numel=self.max_numel)
                cases = _draw(strategy, self.count, f"timing/{self.op.qualname}/{self.dtype}")
            except Exception as e:  # Untestable, or a generator bug: the direct seeds may still serve
                self.generator_error = f"{type(e).__name__}: {_first_line(e)}"
                return self._drawn
            # the richest first: more non-trivial dimensions scale more smoothly
            valid = self._valid(_plain(c) for c in cases)
            self._drawn = [c for _, c in sorted(enumerate(valid), key=lambda ic: (tuple(-x for x in _richness(ic[1])), ic[0]))]
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
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis.errors import Unsatisfiable

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
    from generators import Case, TensorSpec

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
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def _walk_values(v, fn):
    """v with fn applied to every TensorSpec and int list, recursing through lists and dicts."""
    from generators import TensorSpec

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
    from generators import TensorSpec

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
            out = _call(op, case, lambda t: t, torch.device("cpu"))()
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

    return dataclasses.replace(case, args=tuple(scale(a) for a in case.args), kwargs={k: scale(v) for k, v in case.kwargs.items()})


def _scale_dims(case, shape_map, *, strategy: str):
    from generators import TensorSpec

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


def _call(op, case, to_device, device):
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
            meta_out = _call(op, case, lambda t: t.to("meta"), torch.device("meta"))()
        except Exception:
            meta_out = None  # no meta kernel: the real call below decides
        if meta_out is not None and _output_elements(meta_out) > limit:
            raise NotTimeable(f"outputs of {_output_elements(meta_out)} elements")
        fn = _call(op, case, lambda t: t, torch.device("cpu"))
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
            reason = f"scaled input rejected: {type(e).__name__}: {_first_line(e)}"
            continue
        found = SizedCase(scaled, numel, shape, "contiguous", strategy, seed, cpu_s)
        if cpu_s <= SLOW_CALL_S:
            return found
        slow = slow or found
    if slow is not None:
        return slow
    if not seen_seed:
        reason = "no valid small case to scale" + (f" (generator: {pool.generator_error})" if pool.generator_error else "")
    raise NotTimeable(reason or "no scaled case reaches the size")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else ""


# -- timing one cell -----------------------------------------------------------------------


@dataclass
class CellTiming:
    """The timings of one (op, dtype) at each size, and why sizes were skipped."""

    op: str
    dtype: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (size label, reason)


def _events_for(backend):
    hook = getattr(backend, "timing_events", None)  # an out-of-tree backend may provide its own
    if callable(hook):
        return hook()
    return device_events(backend.device)


@contextlib.contextmanager
def _device_context(backend):
    with contextlib.ExitStack() as stack:
        device = torch.device(backend.device)
        if device.type == "cuda" and device.index is not None:
            # timing events record on the current device's stream: make it the device under test
            stack.enter_context(torch.cuda.device(device))
        # the optional hook conform.execute honours too: device-specific modes around device work
        hook = getattr(backend, "device_context", None)
        if callable(hook):
            stack.enter_context(hook())
        yield


def time_cell(op, dtype: str, backend, sizes: dict[str, int] | None = None, *, min_run_time: float = DEFAULT_MIN_RUN_TIME) -> CellTiming:
    """Time one op x dtype at each size on `backend` and on the CPU reference."""
    sizes = DEFAULT_SIZES if sizes is None else sizes
    result = CellTiming(op.qualname, dtype)
    try:
        pool = SeedPool(op, dtype)
    except NotTimeable as e:
        result.skipped = [(label, str(e)) for label in sizes]
        return result
    events = _events_for(backend)
    prefer = None
    for label, target in sizes.items():
        try:
            sc = sized_case(op, dtype, target, pool=pool, prefer=prefer)
        except NotTimeable as e:
            result.skipped.append((label, str(e)))
            continue
        prefer = (sc.seed, sc.strategy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with _device_context(backend):
                    dev = measure(
                        _call(op, sc.case, backend.to_device, backend.device),
                        synchronize=backend.synchronize,
                        events=events,
                        min_run_time=min_run_time,
                    )
            except Exception as e:
                result.skipped.append((label, f"device raised {type(e).__name__}: {_first_line(e)}"))
                continue
            ref: Measurement | None
            try:
                ref = measure(_call(op, sc.case, lambda t: t, torch.device("cpu")), min_run_time=min_run_time)
            except Exception:
                ref = None  # the CPU has no kernel for this dtype: the device time still counts
        result.rows.append(
            {
                "op": op.qualname,
                "dtype": dtype,
                "size_label": label,
                "shape": list(sc.shape),
                "layout": sc.layout,
                "numel": sc.numel,
                "device_median_s": dev.median,
                "device_iqr_s": dev.iqr,
                # the stored name predates the label: this is device-event time, not kernel time
                # (conform.timer: launch spacing on CUDA at small sizes, encoding + commit on MPS)
                "device_kernel_s": dev.event_median,
                "device_event_error": dev.event_error,
                "ref_median_s": ref.median if ref else None,
                "ref_iqr_s": ref.iqr if ref else None,
                "repeats": dev.repeats,
            }
        )
    return result


# -- the store -----------------------------------------------------------------------------

TIMING_FIELDS = ("shape", "layout", "numel", "device_median_s", "device_iqr_s", "device_kernel_s", "ref_median_s", "ref_iqr_s", "repeats")


def passing_cells(store, run_id: int) -> list[tuple[str, str]]:
    """(qualname, dtype) of the cells of the run that passed with at least one example."""
    from sqlalchemy import select

    from .store.models import Op, Result

    with store.session() as s:
        rows = s.execute(
            select(Op.qualname, Result.dtype)
            .join(Op, Result.op_id == Op.id)
            .where(Result.run_id == run_id, Result.outcome == "pass", Result.examples_run > 0)
            .order_by(Op.qualname, Result.dtype)
        ).all()
    return [(q, d) for q, d in rows]


def record_timings(store, run_id: int, rows: list[dict[str, Any]]) -> None:
    """Store timing rows (dicts as `time_cell` makes them), replacing earlier timings of the
    same (op, dtype, size) in this run, in one transaction."""
    from sqlalchemy import delete

    from .store.models import Timing

    if not rows:
        return
    ids = {r["op"]: store.op_id(r["op"]) for r in rows}
    missing = [q for q, i in ids.items() if i is None]
    if missing:
        raise ConformError(f"timings for ops not in the store: {', '.join(missing)}")

    def go(s):
        for r in rows:
            s.execute(
                delete(Timing).where(
                    Timing.run_id == run_id, Timing.op_id == ids[r["op"]], Timing.dtype == r["dtype"], Timing.size_label == r["size_label"]
                )
            )
            s.add(Timing(run_id=run_id, op_id=ids[r["op"]], dtype=r["dtype"], size_label=r["size_label"], **{k: r[k] for k in TIMING_FIELDS}))

    store.write(go)


def load_timings(store, run_id: int) -> list[dict[str, Any]]:
    """Every timing of a run as dicts (with "speedup" = reference / device), for the site and the CLI."""
    from sqlalchemy import select

    from .store.models import Op, Timing

    with store.session() as s:
        rows = s.execute(select(Timing, Op.qualname).join(Op, Timing.op_id == Op.id).where(Timing.run_id == run_id).order_by(Op.qualname, Timing.dtype, Timing.numel)).all()
        out = []
        for t, q in rows:
            d = {"op": q, "dtype": t.dtype, "size_label": t.size_label, **{k: getattr(t, k) for k in TIMING_FIELDS}}
            d["speedup"] = t.speedup
            out.append(d)
    return out


# -- the pass ------------------------------------------------------------------------------


@dataclass
class BenchSummary:
    run_id: int
    cells: int = 0  # passing cells considered
    timings: int = 0  # rows stored
    skipped: list[tuple[str, str, str, str]] = field(default_factory=list)  # (op, dtype, size label, reason)
    elapsed_s: float = 0.0
    rows: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "cells": self.cells,
            "timings": self.timings,
            "elapsed_s": round(self.elapsed_s, 3),
            "skipped": [{"op": o, "dtype": d, "size_label": s, "reason": r} for o, d, s, r in self.skipped],
            "rows": self.rows,
        }


def _time_by_name(qualname: str, dtype: str, backend, sizes: dict[str, int], min_run_time: float) -> CellTiming:
    import opdb

    try:
        op = opdb.lookup(qualname)
    except Exception:
        return CellTiming(qualname, dtype, skipped=[(label, "not in the installed torch's catalog") for label in sizes])
    return time_cell(op, dtype, backend, sizes, min_run_time=min_run_time)


def _timing_setup(backend, sizes, min_run_time, threads):
    """Set up the clean child of an isolated timing pass: it times the cells it is sent (Ctrl-C is
    the parent's: conform.isolation ignores it in the child)."""
    torch.set_num_threads(threads)

    def time_one(cell):
        try:
            return _time_by_name(*cell, backend, sizes, min_run_time)
        except Exception as e:  # noqa: BLE001 - a bug in building one op's input skips that cell, without a traceback on the user's terminal
            return CellTiming(cell[0], cell[1], skipped=[(label, f"could not be timed: {type(e).__name__}: {_first_line(e)}") for label in sizes])

    return time_one


class _IsolatedTimer:
    """Times cells in one clean child process at a time (conform.isolation: never a fork of a
    process that used the device), so that an op that crashes the process (a segfault in a
    kernel, an abort) or hangs costs only its own cell: the child is replaced and the pass goes
    on. Still serial: the parent only waits while the child times."""

    def __init__(self, backend, sizes, min_run_time, cell_timeout: float):
        from .isolation import CleanChild

        self.sizes = sizes
        self.cell_timeout = cell_timeout
        self.child = CleanChild(_timing_setup, (backend, sizes, min_run_time, torch.get_num_threads()), name="conform-timing")

    def __call__(self, qualname: str, dtype: str) -> CellTiming:
        from .isolation import ChildDied, ChildTimedOut, IsolationError

        try:
            return self.child.call((qualname, dtype), timeout=self.cell_timeout)
        except ChildTimedOut:
            reason = f"timed out after {self.cell_timeout:.0f} s"
        except ChildDied as e:
            reason = f"crashed the timing process ({e})"
        except IsolationError as e:
            reason = str(e)
        return CellTiming(qualname, dtype, skipped=[(label, reason) for label in self.sizes])

    def close(self) -> None:
        self.child.close()


def _picklable(obj) -> bool:
    try:
        pickle.dumps(obj)
        return True
    except Exception:
        return False


def bench(
    store,
    run_id: int,
    backend,
    *,
    ops: Iterable[str] | None = None,
    dtypes: Iterable[str] | None = None,
    sizes: dict[str, int] | None = None,
    min_run_time: float = DEFAULT_MIN_RUN_TIME,
    isolate: bool = True,
    cell_timeout: float = 600.0,
    progress: Callable[[CellTiming, int, int], None] | None = None,
) -> BenchSummary:
    """Time every passing cell of `run_id` (restricted to the qualnames `ops`, if given) on
    `backend` and the CPU at each size, storing the timings against the run as each cell ends.
    `dtypes`, if given, keeps only those dtypes' cells.

    With `isolate` (the default, where the backend can be pickled), cells are timed in a child
    process, one cell at a time: a crash or a hang (over `cell_timeout` s) skips that cell with
    the reason instead of ending the pass. This process stays the only writer to the store."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        raise ConformError("the timing pass never runs inside a parallel worker: timings there measure the other workers")
    started = time.monotonic()
    sizes = DEFAULT_SIZES if sizes is None else sizes
    cells = passing_cells(store, run_id)
    if ops is not None:
        wanted = set(ops)
        cells = [c for c in cells if c[0] in wanted]
    if dtypes is not None:
        cells = [c for c in cells if c[1] in set(dtypes)]
    summary = BenchSummary(run_id=run_id, cells=len(cells))
    isolated = _IsolatedTimer(backend, sizes, min_run_time, cell_timeout) if isolate and _picklable(backend) else None
    try:
        for n, (qualname, dtype) in enumerate(cells, 1):
            if isolated is not None:
                cell = isolated(qualname, dtype)
            else:
                cell = _time_by_name(qualname, dtype, backend, sizes, min_run_time)
            _record_cell(store, run_id, cell, summary, progress, n, len(cells))
    finally:
        if isolated is not None:
            isolated.close()
    summary.elapsed_s = time.monotonic() - started
    return summary


def _record_cell(store, run_id, cell: CellTiming, summary: BenchSummary, progress, n: int, total: int) -> None:
    record_timings(store, run_id, cell.rows)
    summary.timings += len(cell.rows)
    summary.rows += cell.rows
    summary.skipped += [(cell.op, cell.dtype, label, reason) for label, reason in cell.skipped]
    if progress is not None:
        progress(cell, n, total)


# -- regressions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TimingChange:
    """A timing that changed beyond the noise between two runs."""

    op: str
    dtype: str
    size_label: str
    shape: tuple[int, ...]
    old_s: float
    new_s: float
    old_iqr_s: float
    new_iqr_s: float

    @property
    def ratio(self) -> float:
        """new / old: 1.25 is 25% slower."""
        return self.new_s / self.old_s

    @property
    def kind(self) -> str:
        return "regression" if self.new_s > self.old_s else "improvement"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shape"] = list(self.shape)
        d["ratio"] = self.ratio
        d["kind"] = self.kind
        return d

    def describe(self) -> str:
        return (
            f"{self.op} {self.dtype} {self.size_label} {list(self.shape)}: {self.old_s * 1e6:.1f} us -> {self.new_s * 1e6:.1f} us "
            f"({(self.ratio - 1) * 100:+.0f}%, spread {(self.old_iqr_s + self.new_iqr_s) * 1e6:.1f} us)"
        )


def is_significant(old_s: float, old_iqr_s: float, new_s: float, new_iqr_s: float, *, pct: float = 0.10) -> bool:
    """Whether old -> new is a real change: larger than `pct` of the old time *and* than the two
    measurements' interquartile ranges added together."""
    if not (old_s and old_s > 0 and new_s and new_s > 0):
        return False
    diff = abs(new_s - old_s)
    return diff > pct * old_s and diff > (old_iqr_s or 0.0) + (new_iqr_s or 0.0)


def timing_changes(store, base_run: int, new_run: int, *, pct: float = 0.10, side: str = "device") -> list[TimingChange]:
    """Significant changes (both directions) of `side` ("device" or "ref") times between two
    runs, over the (op, dtype, size) timed in both with the same shape; largest ratio first."""
    if side not in ("device", "ref"):
        raise ValueError("side is 'device' or 'ref'")
    base = {(r["op"], r["dtype"], r["size_label"]): r for r in load_timings(store, base_run)}
    changes = []
    for r in load_timings(store, new_run):
        b = base.get((r["op"], r["dtype"], r["size_label"]))
        if b is None or list(b["shape"]) != list(r["shape"]):
            continue  # not timed in both, or a different case: not comparable
        old, new = b[f"{side}_median_s"], r[f"{side}_median_s"]
        old_iqr, new_iqr = b[f"{side}_iqr_s"] or 0.0, r[f"{side}_iqr_s"] or 0.0
        if is_significant(old, old_iqr, new, new_iqr, pct=pct):
            changes.append(TimingChange(r["op"], r["dtype"], r["size_label"], tuple(r["shape"]), old, new, old_iqr, new_iqr))
    return sorted(changes, key=lambda c: -abs(math.log(c.ratio)))


def timing_regressions(store, base_run: int, new_run: int, *, pct: float = 0.10, side: str = "device") -> list[TimingChange]:
    """The significant slowdowns from `base_run` to `new_run` (see `timing_changes`)."""
    return [c for c in timing_changes(store, base_run, new_run, pct=pct, side=side) if c.kind == "regression"]


# -- the command ---------------------------------------------------------------------------


def _fmt_s(s: float | None) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


def render_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'op':<42} {'dtype':<9} {'size':<7} {'shape':<22} {'device':>10} {'+-iqr':>9} {'events':>9} {'cpu ref':>10} {'speedup':>8}"]
    for r in rows:
        speed = r["ref_median_s"] / r["device_median_s"] if r.get("ref_median_s") and r.get("device_median_s") else None
        lines.append(
            f"{r['op']:<42} {r['dtype']:<9} {r['size_label']:<7} {str(list(r['shape'])):<22} {_fmt_s(r['device_median_s']):>10} "
            f"{_fmt_s(r['device_iqr_s']):>9} {_fmt_s(r['device_kernel_s']):>9} {_fmt_s(r['ref_median_s']):>10} "
            f"{(f'{speed:.2f}x' if speed else '-'):>8}"
        )
    return "\n".join(lines)


@click.command("bench")
@click.option("--run", "run_ref", default="latest", show_default=True, metavar="RUN_ID|latest", help="the stored run whose passing cells are timed")
@click.option("--ops", "ops", default=None, help="only these ops (same syntax as `conform run --ops`: core, family:NAME, globs, @file) [default: every passing op]")
@click.option("--sizes", default="small=1e3,medium=1e5,large=1e6", show_default=True, help="LABEL=ELEMENTS pairs: element count of the largest input")
@click.option("--device", default=None, help="the backend to time [default: the run's own backend]")
@click.option("--min-time", "min_time", type=click.FloatRange(0.001), default=DEFAULT_MIN_RUN_TIME, show_default=True, help="seconds of timed blocks per op, size and side")
@click.option("--threads", type=click.IntRange(1), default=None, help="CPU threads for torch on both sides [default: torch's default, here %d]" % torch.get_num_threads())
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--isolate/--no-isolate", default=True, show_default=True, help="time in a child process, so that an op that crashes or hangs skips only its own cell")
@click.option("--cell-timeout", type=click.FloatRange(1), default=600.0, show_default=True, help="seconds before an isolated cell counts as hung")
@click.option("--quiet", "-q", is_flag=True, help="no per-op progress on stderr")
@click.option("--db", default=None, metavar="PATH|URL", help="SQLite file or SQLAlchemy URL (default: conform.db, or $CONFORM_DB)")
def bench_command(run_ref, ops, sizes, device, min_time, threads, fmt, isolate, cell_timeout, quiet, db):
    """Time the passing cells of a stored run on the device and on the CPU reference.

    The timing pass runs after `conform run`, serially: one cell at a time, in one child process
    (so that an op that crashes or hangs skips only its own cell), never in the run's parallel
    workers. Each passing op x dtype is timed at every size of --sizes (element count
    of its largest input) on the device and on the CPU: median and interquartile range over
    blocks of calibrated length, with the device synchronised before each clock read (the wall
    time, which speedups use), plus the device-event time where it has timing events (between
    events on its stream: on CUDA at small sizes that is launch spacing, on MPS it includes
    command-buffer encoding; an event failure leaves the wall time stored). Timings are stored against
    the run (speedup = CPU time / device time); timing it again replaces them. Ops for which no
    input of a size can be built are listed as skipped, with the reason.

    Example: conform bench --run latest --ops core --sizes small=1e3,medium=1e5,large=1e6
    """
    from . import backends, selection
    from .store import Store
    from .store.models import Environment, Run

    size_map = parse_sizes(sizes)
    if threads is not None:
        torch.set_num_threads(threads)
    store = Store(db, create=False)
    run_id = store.latest_run_id() if run_ref == "latest" else _run_id(run_ref)
    if run_id is None:
        raise ConformError(f"no run in {store.where}: run `conform run` first")
    with store.session() as s:
        run = s.get(Run, run_id)
        if run is None:
            raise ConformError(f"no run {run_id} in {store.where}")
        env = s.get(Environment, run.environment_id)
        run_device = (run.options or {}).get("device") or env.backend
    backend = backends.resolve(device or run_device)
    if backend.name != env.backend:
        raise ConformError(f"run {run_id} tested {env.backend}; its timings must come from the same device, not {backend.name}")
    wanted = None
    if ops is not None:
        try:
            wanted = [s.qualname for s in selection.select_ops(ops)]
        except Exception as e:
            raise ConformError(str(e)) from None

    load, cores = _load()
    if load is not None and load >= cores:
        click.echo(
            f"conform: warning: load average {load:.1f} on {cores} cores: other processes will be in the timings "
            "(multi-threaded CPU ops suffer most; --threads 1 is steadier)",
            err=True,
        )

    def progress(cell: CellTiming, n: int, total: int) -> None:
        if quiet:
            return
        sizes_done = ", ".join(f"{r['size_label']} {_fmt_s(r['device_median_s'])}" for r in cell.rows) or "skipped"
        click.echo(f"[{n}/{total}] {cell.op} {cell.dtype}: {sizes_done}", err=True)

    summary = bench(store, run_id, backend, ops=wanted, sizes=size_map, min_run_time=min_time, isolate=isolate, cell_timeout=cell_timeout, progress=progress)
    if fmt == "json":
        click.echo(__import__("json").dumps(summary.to_dict(), indent=1))
        return
    if summary.rows:
        click.echo(render_table(summary.rows))
    skipped_cells = {(o, d) for o, d, _, _ in summary.skipped}
    click.echo(
        f"\ntimed {summary.cells} passing cells of run {run_id} at {len(size_map)} sizes: {summary.timings} timings stored, "
        f"{len(summary.skipped)} sizes skipped ({len(skipped_cells)} cells) in {summary.elapsed_s:.0f} s -> {store.where}"
    )
    for o, d, label, reason in summary.skipped:
        click.echo(f"  skipped {o} {d} {label}: {reason}")


def _load() -> tuple[float | None, int]:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        return os.getloadavg()[0], cores
    except OSError:
        return None, cores


def _run_id(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConformError(f"--run takes a run id or 'latest', not {value!r}") from None

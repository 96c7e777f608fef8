"""Traced calls -> cases of their cells, judged by the same runner and verdict rule as a sweep.

Each distinct traced call becomes one `generators.case.Case` of its op: tensors of the traced
shapes, dtypes, strides and storage offsets (an explicit layout where no drawn one matches),
floating values from the op's input domain (opdb rules), integer values within the range the
trace recorded, or, where it recorded none (a trace on fake tensors), below every size of the
call's other tensors, which keeps any index valid along any of their dimensions. The case runs
through `conform.run.execute.run_case` (forward only: the model's backward ops are traced calls
of their own) and, for any verdict but pass, keeps its reproduction script.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch

import opdb
from conform.errors import first_line
from conform.model.trace import TensorMeta, Trace, TracedCall
from conform.outcomes import Outcome, worst
from conform.report.repro import repro_script
from conform.run import execute
from conform.run.execute import run_case
from conform.timing.inputs import bound_call
from conform.timing.timer import measure
from generators.case import Case
from generators.tensor import EXPLICIT_LAYOUT, VALUE_KINDS, TensorSpec

# time each case on each side this long (conform.timing.timer.measure's min_run_time)
CASE_RUN_TIME = 0.01
# A sweep declines cases whose outputs exceed conform.run.execute's caps (a drawn case that
# blows up); a traced call is the model's own and is judged whatever its size (a weight gradient
# of resnet18 has 2.4 million elements), up to this.
TRACED_OUTPUT_NUMEL = 1 << 28


@contextlib.contextmanager
def _traced_output_caps():

    saved = execute.MAX_OUTPUT_NUMEL, execute.MAX_OUTPUT_TENSORS
    execute.MAX_OUTPUT_NUMEL, execute.MAX_OUTPUT_TENSORS = TRACED_OUTPUT_NUMEL, 1 << 16
    try:
        yield
    finally:
        execute.MAX_OUTPUT_NUMEL, execute.MAX_OUTPUT_TENSORS = saved


@dataclass
class CaseOutcome:
    """One traced call, judged (and timed)."""

    call: TracedCall
    case: Case | None
    outcome: Outcome
    message: str = ""
    phase: str = ""  # where the verdict was decided: "forward" | "backward" | ""
    repro: str = ""
    device_s: float | None = None  # median time of one call on the device
    cpu_s: float | None = None  # and on the CPU

    def to_dict(self) -> dict[str, Any]:
        return {
            "call": self.call.describe(),
            "calls": self.call.calls,
            "module": self.call.module,
            "phase": self.call.phase,
            "outcome": self.outcome.value,
            "message": self.message,
            "case": self.case.to_json() if self.case is not None else None,
            "device_s": self.device_s,
            "cpu_s": self.cpu_s,
        }


@dataclass
class OpOutcome:
    """All traced calls of one op: its outcome is the worst of its cases'."""

    op: str
    cases: list[CaseOutcome] = field(default_factory=list)

    @property
    def outcome(self) -> Outcome:
        return worst(c.outcome for c in self.cases)

    @property
    def calls(self) -> int:
        return sum(c.call.calls for c in self.cases)

    @property
    def module(self) -> str:
        return next((c.call.module for c in self.cases if c.call.module), "")

    def _total(self, attr: str) -> float | None:
        times = [(getattr(c, attr), c.call.calls) for c in self.cases]
        if any(t is None for t, _ in times):
            return None
        return sum(t * n for t, n in times)

    @property
    def device_s(self) -> float | None:
        """The op's share of one model step on the device: calls x time, summed over its cases."""
        return self._total("device_s")

    @property
    def cpu_s(self) -> float | None:
        return self._total("cpu_s")

    @property
    def failing(self) -> CaseOutcome | None:
        """The case that gave the op its outcome."""
        return next((c for c in self.cases if c.outcome == self.outcome), None)

    def to_dict(self) -> dict[str, Any]:
        f = self.failing
        return {
            "op": self.op,
            "outcome": self.outcome.value,
            "calls": self.calls,
            "module": self.module,
            "message": f.message if f is not None and self.outcome is not Outcome.PASS else "",
            "device_s": self.device_s,
            "cpu_s": self.cpu_s,
            # per model step: calls x the median time of one call, summed over the op's cases
            "times": {"device_s": self.device_s, "cpu_s": self.cpu_s},
            "cases": [c.to_dict() for c in self.cases],
        }


def _seed(call_key: str, i: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{call_key}#{i}".encode()).digest()[:4], "little")


def _smallest_size(call: TracedCall) -> int:
    """The smallest size among the call's floating tensors (at least 1)."""
    sizes = []

    def walk(v):
        if isinstance(v, TensorMeta):
            if v.dtype.startswith(("float", "bfloat", "complex")):
                sizes.extend(n for n in v.shape if n > 0)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(list(call.args) + list(call.kwargs.values()))
    return max(1, min(sizes, default=1))


# Integer arguments that hold sorted starts into another tensor (embedding_bag's offsets, a
# segment reduction's): drawn at random within their range they are unsorted, and the op refuses
# every case ("offsets[-1] ... got 12").
# (argument -> the argument it indexes into)
MONOTONE = {"offsets": "indices"}


def _argument(call: TracedCall, op, name: str):
    """The call's argument `name` (a TensorMeta or a value) by `op`'s schema, or None."""
    names = [a.name for a in getattr(op, "arguments", ())]
    if not name or name not in names:
        return None
    i = names.index(name)
    return call.kwargs.get(name, call.args[i] if i < len(call.args) else None)


def _ignore_index(call: TracedCall, op) -> int | None:
    """The call's `ignore_index` argument (a loss's label meaning "no class"), or None."""
    value = _argument(call, op, "ignore_index")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def to_case(call: TracedCall, op=None) -> Case:
    """The Case that replays `call` (see the module docstring); `op` its OpSpec, for its domain."""
    domain = getattr(getattr(op, "rules", None), "domain", "real")
    domain = domain if domain in VALUE_KINDS else "real"
    counter = iter(range(1 << 30))
    key = call.key
    ignored = _ignore_index(call, op)

    def build(v, name=""):
        if isinstance(v, TensorMeta):
            i = next(counter)
            fields: dict[str, Any] = {"seed": _seed(key, i)}
            into = _argument(call, op, MONOTONE.get(name, ""))
            if isinstance(into, TensorMeta) and len(v.shape) == 1 and v.contiguous:
                # bag or segment starts: sorted, from the recorded first to the recorded last (a
                # trace on fake tensors records none: from 0 to the length of what they index)
                lo, hi = call.int_ranges.get(i) or (0, math.prod(into.shape))
                n = v.shape[0]
                data = tuple(lo + (hi - lo) * k // max(1, n - 1) for k in range(n))
                return TensorSpec(v.shape, v.dtype, data=data)
            if v.dtype.startswith(("float", "bfloat", "complex")):
                fields["values"] = domain
            elif v.dtype != "bool":
                known = call.int_ranges.get(i)
                lo, hi = known if known is not None else (0, _smallest_size(call) - 1)
                if lo == ignored and hi >= 0:
                    # a loss's labels padded with its ignore_index (-100 where a causal LM shifts
                    # them): the recorded range then starts there, and almost every label drawn
                    # between it and 0 is out of bounds; the classes start at 0
                    lo = 0
                fields.update(values="index", low=lo, high=hi + 1)
            if not v.contiguous:
                fields.update(layout=EXPLICIT_LAYOUT, stride=v.stride, storage_offset=v.storage_offset)
            return TensorSpec(v.shape, v.dtype, **fields)
        if isinstance(v, tuple):
            return tuple(build(x) for x in v)
        if isinstance(v, list):
            return [build(x) for x in v]
        return v

    names = [a.name for a in getattr(op, "arguments", ())]
    args = tuple(build(a, names[j] if j < len(names) else "") for j, a in enumerate(call.args))
    kwargs = {k: build(v, k) for k, v in call.kwargs.items()}
    case = Case(call.op, args, kwargs, seed=_seed(key, -1) % (1 << 31))
    return _with_derived(case) if call.op in DERIVED else case


# Backward ops that read their forward's outputs (attention's out and logsumexp): replayed with
# those outputs computed by the forward from the replayed inputs, as generators do for max
# pooling's indices. Drawn independently they describe no forward at all: exp(q k - logsumexp)
# then reaches values the real step never makes, on which the CPU and float64 part ways.
# op -> (forward op, forward's (args, kwargs) from the backward's, {backward arg: forward output})
DERIVED = {
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": (
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        lambda a, k: ((a[1], a[2], a[3], a[6], a[7]), {n: k[n] for n in ("attn_mask", "scale") if n in k}),
        {4: 0, 5: 1},
    ),
}


def _with_derived(case: Case) -> Case:
    """`case` with the arguments DERIVED names computed by their forward on the CPU."""
    forward, forward_args, outputs = DERIVED[case.op]
    fa, fk = forward_args(case.args, case.kwargs)
    args, kwargs = Case(forward, fa, fk).materialize(lambda t: t, torch.device("cpu"))
    with torch.no_grad():
        got = opdb.lookup(forward).resolve()(*args, **kwargs)
    new = list(case.args)
    for i, j in outputs.items():
        t = got[j].contiguous()
        new[i] = TensorSpec(tuple(t.shape), str(t.dtype).removeprefix("torch."), data=tuple(t.flatten().tolist()))
    return Case(case.op, tuple(new), case.kwargs, seed=case.seed)


def _device_context(backend):
    hook = getattr(backend, "device_context", None)
    return hook() if callable(hook) else contextlib.nullcontext()


def judge_call(call: TracedCall, backend, *, timing: bool = True) -> CaseOutcome:
    """Run one traced call as a case on `backend` (run_case), its repro script for any verdict
    but pass, and its time on the device and the CPU."""

    try:
        op = opdb.lookup(call.op)
    except opdb.UnknownOpError:
        return CaseOutcome(call, None, Outcome.SKIPPED, "not in the catalog of this torch")
    if op.rules.untestable:
        return CaseOutcome(call, None, Outcome.SKIPPED, op.rules.untestable)
    try:
        case = to_case(call, op)
    except ValueError as e:  # a layout TensorSpec cannot build
        return CaseOutcome(call, None, Outcome.SKIPPED, f"cannot replay: {e}")
    with warnings.catch_warnings(), _traced_output_caps():
        warnings.simplefilter("ignore")
        r = run_case(op, case, backend, grad=False)
    if r.invalid:
        return CaseOutcome(call, case, Outcome.SKIPPED, "the CPU rejects the case as replayed: " + r.message)
    out = CaseOutcome(call, case, r.outcome, r.message, r.phase)
    if r.outcome is not Outcome.PASS:
        out.repro = repro_script(op, case, backend.name, result=r)
    if timing and r.outcome in (Outcome.PASS, Outcome.FALLBACK, Outcome.MISMATCH, Outcome.GRAD_MISMATCH):
        out.device_s, out.cpu_s = time_case(op, case, backend)
    return out


def time_case(op, case: Case, backend) -> tuple[float | None, float | None]:
    """Median seconds of one call on the device and on the CPU (conform.timing.timer)."""

    def timed(to_device, device, sync, ctx):
        try:
            with warnings.catch_warnings(), ctx:
                warnings.simplefilter("ignore")
                return measure(
                    bound_call(op, case, to_device, device),
                    synchronize=sync,
                    min_run_time=CASE_RUN_TIME,
                    max_run_time=10 * CASE_RUN_TIME,
                    min_blocks=3,
                ).median
        except Exception:  # noqa: BLE001 - a side that cannot run the case has no time
            return None

    cpu = timed(lambda t: t, torch.device("cpu"), None, contextlib.nullcontext())
    if torch.device(backend.device).type == "cpu":
        return cpu, cpu
    return timed(backend.to_device, backend.device, backend.synchronize, _device_context(backend)), cpu


def judge_trace(trace: Trace, backend, *, timing: bool = True, progress=None) -> list[OpOutcome]:
    """Every distinct call of `trace` judged on `backend`, grouped by op (first-seen order)."""
    ops: dict[str, OpOutcome] = {}
    for i, call in enumerate(trace.calls):
        try:
            got = judge_call(call, backend, timing=timing)
        except Exception as e:  # noqa: BLE001 - one call that conform cannot replay is not the model's verdict
            got = CaseOutcome(call, None, Outcome.SKIPPED, f"conform could not replay it: {first_line(e, 200)}")
        ops.setdefault(call.op, OpOutcome(call.op)).cases.append(got)
        if progress is not None:
            progress(i + 1, len(trace.calls))
    return list(ops.values())

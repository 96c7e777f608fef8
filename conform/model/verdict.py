"""The per-model verdict: trace -> cases -> whole model -> one word, with the evidence.

* ``fails``: the model raises on the device (the op in flight and its module path are named);
* ``diverges``: it runs, and its outputs or gradients are off by more than float32 explains
  (conform.model.whole; the culprit op is named where the shadow pass finds one);
* ``runs_with_fallback``: it runs within float32, and some ops ran through the CPU fallback
  (named, with their share of the model's time);
* ``runs``: it runs within float32 on native kernels.
"""

# The ops' own outcomes (each traced call judged as a case) are listed beside the verdict: an op
# may mismatch on a replayed case while the model's step stays within float32, and that is shown,
# not hidden in the verdict.

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from conform.model import backendbench
from conform.model import cases as cases_mod
from conform.model import spec as spec_mod
from conform.model import trace as trace_mod
from conform.model import whole as whole_mod
from conform.outcomes import Outcome

VERDICTS = ("runs", "runs_with_fallback", "fails", "diverges")
PASSING = ("runs", "runs_with_fallback")


@dataclass
class ModelReport:
    spec: str
    device: str
    dtype: str
    train: bool
    verdict: str = ""
    trace: trace_mod.Trace | None = None
    ops: list[cases_mod.OpOutcome] = field(default_factory=list)
    whole: whole_mod.Whole | None = None
    fails_at: dict[str, str] | None = None  # {"op", "module", "error"} when the verdict is fails
    wall_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def fallback_ops(self) -> list[str]:
        return [o.op for o in self.ops if o.outcome is Outcome.FALLBACK]

    def times(self) -> dict[str, Any]:
        """The model's time by op: calls x each traced call's median time, device and CPU."""
        dev = [o.device_s for o in self.ops if o.device_s is not None]
        cpu = [o.cpu_s for o in self.ops if o.cpu_s is not None]
        device_s = sum(dev) if dev else None
        fallback_s = sum(o.device_s or 0.0 for o in self.ops if o.outcome is Outcome.FALLBACK)
        w = self.whole
        return {
            "ops_device_s": device_s,
            "ops_cpu_s": sum(cpu) if cpu else None,
            "fallback_s": fallback_s if device_s is not None else None,
            "fallback_share": (fallback_s / device_s) if device_s else None,
            "step_device_s": w.device_step_s if w else None,
            "step_cpu_s": w.cpu_step_s if w else None,
            "trace_s": self.trace.seconds if self.trace else None,
            "wall_s": self.wall_s,
        }

    def to_dict(self) -> dict[str, Any]:
        w = self.whole
        return {
            "model": self.spec,
            "device": self.device,
            "dtype": self.dtype,
            "train": self.train,
            "verdict": self.verdict,
            "fails_at": self.fails_at,
            "fallback_ops": self.fallback_ops,
            "traced": {
                "where": self.trace.where if self.trace else "",
                "calls": self.trace.total_calls if self.trace else 0,
                "cases": len(self.trace.calls) if self.trace else 0,
                "ops": len(self.ops),
            },
            "ops": [o.to_dict() for o in self.ops],
            "whole": w.to_dict() if w else None,
            "divergence": w.divergence.to_dict() if w and w.divergence else None,
            "times": self.times(),
        }


def decide(trace: trace_mod.Trace, ops: list[cases_mod.OpOutcome], whole: whole_mod.Whole) -> tuple[str, dict | None]:
    """(verdict, fails_at) by the module docstring's rule."""
    if whole.error or trace.error:
        return "fails", {
            "op": whole.failed_op or trace.failed_op,
            "module": whole.failed_module or trace.failed_module,
            "error": whole.error or trace.error,
        }
    if whole.diverges:
        return "diverges", None
    if any(o.outcome is Outcome.FALLBACK for o in ops):
        return "runs_with_fallback", None
    return "runs", None


def check_model(
    spec: str,
    backend,
    *,
    train: bool = True,
    dtype: str = "float32",
    timing: bool = True,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    case_progress: Callable[[int, int], None] | None = None,
) -> ModelReport:
    """The whole pipeline for one model on one backend; `progress` hears each stage,
    `case_progress(done, total)` each judged call."""
    started = time.perf_counter()
    say = progress or (lambda msg: None)
    torch_dtype = getattr(torch, dtype)
    model_spec = spec_mod.parse(spec)
    if model_spec.kind == "backendbench":
        return _check_trace(
            model_spec,
            backend,
            dtype=dtype,
            train=train,
            timing=timing,
            say=say,
            started=started,
            case_progress=case_progress,
        )
    say(f"building {spec}")
    built = model_spec.build(seed=seed)
    say("tracing one step")
    trace = trace_mod.trace_model(built, backend, train=train, dtype=torch_dtype, builder=model_spec.builder(seed=seed))
    say(f"judging {len(trace.calls)} distinct calls of {len(trace.ops())} ops on {backend.name}")
    ops = cases_mod.judge_trace(trace, backend, timing=timing, progress=case_progress)
    say("comparing the whole model with the CPU and float64")
    whole = whole_mod.compare_whole(built, backend, train=train, dtype=torch_dtype)
    verdict, fails_at = decide(trace, ops, whole)
    report = ModelReport(spec, backend.name, dtype, train, verdict, trace, ops, whole, fails_at)
    report.wall_s = time.perf_counter() - started
    return report


# what an imported trace's op outcome means for the model it came from: it cannot run there
_STOPS = (Outcome.NOT_IMPLEMENTED, Outcome.UNSUPPORTED_DTYPE, Outcome.DEVICE_ERROR, Outcome.CRASH, Outcome.TIMEOUT)


def _check_trace(model_spec, backend, *, dtype, train, timing, say, started, case_progress) -> ModelReport:
    """An imported trace: its calls judged; fails where an op cannot run, else runs (with
    fallback); no whole model to compare, so never diverges."""

    try:
        with open(model_spec.name, encoding="utf-8") as f:
            trace = backendbench.loads(f.read())
    except OSError as e:
        raise spec_mod.SpecError(f"cannot read trace {model_spec.name}: {e.strerror or e}") from None
    say(f"judging {len(trace.calls)} distinct calls of {len(trace.ops())} ops on {backend.name}")
    ops = cases_mod.judge_trace(trace, backend, timing=timing, progress=case_progress)
    whole = whole_mod.Whole()
    stop = next((o for o in ops if o.outcome in _STOPS), None)
    if stop is not None:
        whole.error, whole.failed_op = (stop.failing.message if stop.failing else stop.outcome.value), stop.op
    verdict, fails_at = decide(trace, ops, whole)
    report = ModelReport(model_spec.text, backend.name, dtype, train, verdict, trace, ops, whole, fails_at)
    report.wall_s = time.perf_counter() - started
    return report


# -- rendering --------------------------------------------------------------------------------


def _s(x: float | None) -> str:
    if x is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x / 1e-9:.3g} ns"


def _headline(r: ModelReport) -> str:
    if r.verdict == "fails":
        f = r.fails_at or {}
        where = f" in {f['module']}" if f.get("module") else ""
        return f"fails at {f.get('op') or 'an unknown op'}{where}: {f.get('error', '')}"
    if r.verdict == "diverges":
        w = r.whole
        d = w.divergence if w else None
        ratio = f"{w.ratio:.3g}" if w and w.ratio is not None and w.ratio != float("inf") else "non-finite"
        culprit = (
            f"; culprit {d.op} in {d.module or 'the top level'} ({d.phase}): local error {d.device_err:.3g}, "
            f"the CPU's float32 {d.cpu_err:.3g}"
            if d
            else f"; {w.unexplained}"
            if w
            else ""
        )
        return f"diverges: the device's error is {ratio} x the CPU's float32 error{culprit}"
    if r.verdict == "runs_with_fallback":
        share = r.times()["fallback_share"]
        share_txt = f", {share:.0%} of the ops' device time" if share is not None else ""
        return f"runs with CPU fallback: {', '.join(r.fallback_ops)}{share_txt}"
    ratio = r.whole.ratio if r.whole else None
    return "runs" + (
        f" (error {ratio:.3g} x the CPU's float32 error)" if ratio is not None and r.device != "cpu" else ""
    )


def render(r: ModelReport, fmt: str) -> str:

    if fmt == "json":
        return json.dumps(r.to_dict(), indent=1, default=str)
    t = r.times()
    traced = r.trace
    head = [
        f"{r.spec} on {r.device} ({r.dtype}, {'forward + backward' if r.train else 'forward'}): {r.verdict}",
        f"  {_headline(r)}",
        f"  traced on {traced.where}: {traced.total_calls} calls, {len(traced.calls)} distinct, {len(r.ops)} ops"
        f" ({traced.seconds:.1f} s); whole run {r.wall_s:.1f} s",
        f"  time by op: device {_s(t['ops_device_s'])}, cpu {_s(t['ops_cpu_s'])} per step"
        + (f"; fallback {t['fallback_share']:.0%}" if t["fallback_share"] else ""),
    ]
    rows = sorted(r.ops, key=lambda o: -(o.device_s or 0.0))
    if fmt == "markdown":
        lines = [f"### {r.spec} on {r.device}: **{r.verdict}**", "", _headline(r), ""]
        lines += [
            "| op | outcome | calls | cases | device time | share | module |",
            "| --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        total = t["ops_device_s"] or 0.0
        for o in rows:
            share = f"{(o.device_s or 0.0) / total:.1%}" if total else "-"
            lines.append(
                f"| `{o.op}` | {o.outcome.value} | {o.calls} | {len(o.cases)} | {_s(o.device_s)} | {share} | {o.module} |"
            )
        return "\n".join(lines)
    lines = head + ["", f"  {'op':<44} {'outcome':<16} {'calls':>6} {'cases':>5} {'device':>9} {'cpu':>9}  module"]
    for o in rows:
        lines.append(
            f"  {o.op:<44} {o.outcome.value:<16} {o.calls:>6} {len(o.cases):>5} {_s(o.device_s):>9} {_s(o.cpu_s):>9}  {o.module}"
        )
    bad = [o for o in r.ops if o.outcome not in (Outcome.PASS, Outcome.SKIPPED)]
    for o in bad:
        f = o.failing
        lines.append(f"  {o.op}: {o.outcome.value}: {f.message if f else ''}")
    return "\n".join(lines)

"""conform model on a handful of models, on the CPU: distinct cases, wall time, trace overhead.

For each model: the distinct traced calls (cases) of one training step, the wall time of the
whole pipeline (trace, judge every case, whole-model comparison; no per-case timing), and the
trace overhead: a traced step against a plain forward + backward, both measured in this process
(median of 3, after one warm-up step), so their ratio is like against like on a loaded machine.
Then the end-to-end time of `conform model torchvision:resnet18` as a user runs it (a fresh
process, per-case timing on, the verdict stored).

    python benchmarks/model_sweep.py [--models torchvision:resnet18,...]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = ("torchvision:resnet18", "timm:vit_tiny_patch16_224", "hf:gpt2", "hf:llama", "hf:bert")


def _median_steps(fns, n: int = 5) -> list[float]:
    """Median CPU seconds of each function, calls alternating so that drift hits them alike."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(n):
        for i, fn in enumerate(fns):
            t = time.process_time()
            fn()
            times[i].append(time.process_time() - t)
    return [statistics.median(t) for t in times]


def one(spec_text: str, *, judge: bool = True) -> dict:
    from torch.utils.module_tracker import ModuleTracker

    from conform.backends import resolve
    from conform.model import spec, trace
    from conform.model.verdict import check_model

    built = spec.parse(spec_text).build()
    model = spec.prepare(copy.deepcopy(built.model), train=True)

    def plain():
        model.zero_grad(set_to_none=True)
        spec.step(model, built.args, built.kwargs, train=True)

    def traced():
        model.zero_grad(set_to_none=True)
        with ModuleTracker() as mt, trace.Recorder(mt):
            spec.step(model, built.args, built.kwargs, train=True)

    plain_s, traced_s = _median_steps([plain, traced])
    out = {"model": spec_text, "plain_step_s": plain_s, "traced_step_s": traced_s}
    if not judge:
        return out
    started = time.perf_counter()
    r = check_model(spec_text, resolve("cpu"), timing=False)
    out.update(
        verdict=r.verdict,
        traced_on=r.trace.where,
        calls=r.trace.total_calls,
        cases=len(r.trace.calls),
        ops=len(r.ops),
        wall_s=time.perf_counter() - started,
    )
    return out


def end_to_end(spec_text: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        started = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "conform.cli", "model", spec_text, "--db", os.path.join(d, "c.db")],
            capture_output=True,
            text=True,
        )
        took = time.perf_counter() - started
    if p.returncode not in (0, 1):
        raise SystemExit(f"conform model {spec_text} failed: {p.stderr.strip().splitlines()[-1:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--no-end-to-end", action="store_true")
    ap.add_argument("--overhead-only", action="store_true", help="only the trace overhead")
    a = ap.parse_args()
    if a.overhead_only:
        print(f"{'model':<28} {'step (cpu s)':>12} {'traced':>8} {'overhead':>8}")
        for m in a.models.split(","):
            r = one(m, judge=False)
            ratio = r["traced_step_s"] / r["plain_step_s"]
            print(f"{m:<28} {r['plain_step_s']:>12.3f} {r['traced_step_s']:>8.3f} {ratio:>7.2f}x", flush=True)
        return
    print(
        f"{'model':<28} {'verdict':<10} {'traced on':<20} {'calls':>6} {'cases':>6} {'ops':>4} {'wall':>8} {'step cpu':>8} {'traced':>8} {'overhead':>8}"
    )
    for m in a.models.split(","):
        r = one(m)
        print(
            f"{r['model']:<28} {r['verdict']:<10} {r['traced_on']:<20} {r['calls']:>6} {r['cases']:>6} {r['ops']:>4} "
            f"{r['wall_s']:>7.1f}s {r['plain_step_s']:>7.3f}s {r['traced_step_s']:>7.3f}s {r['traced_step_s'] / r['plain_step_s']:>7.2f}x",
            flush=True,
        )
    if not a.no_end_to_end:
        print(
            f"end to end: conform model torchvision:resnet18 (timing on, stored): {end_to_end('torchvision:resnet18'):.1f} s"
        )


if __name__ == "__main__":
    main()

"""Is conform's timer accurate? Its median beside torch.utils.benchmark's, op by op.

For each of 36 representative ATen ops (pointwise, reductions, matmul, convolution, pooling,
norms, indexing, sort, scan, shape ops; float32 on the CPU, one shape each), this script times
the same callable with the same inputs twice, side by side in one run:

* conform: `conform.timing.timer.measure_stable(fn)` (the timer `conform bench` uses), and
* the anchor: `torch.utils.benchmark.Timer("fn()").blocked_autorange()` with the same thread
  count (Timer defaults to one thread; conform times with torch's default).

The two alternate (conform first on even rows, the anchor first on odd rows) so that a burst of
load from elsewhere on the machine does not always hit the same one. A row is "within 10%" when
|conform / anchor - 1| <= 0.10. Wall time is everything each one spent, calibration and warm-up
included. The last line states the result as "N/M within 10%".

    python benchmarks/timing_accuracy.py [--min-time 0.1] [--threads N] [--device cpu] [--busy]

conform's figure is what `conform bench` stores: `measure_stable`, which re-measures until two
clean rounds agree and otherwise marks the timing unstable (stored as such, never as a number).
`--busy` starts one busy-looping process per core, the way a browser or another job loads a
user's machine, and keeps them running while conform measures; while the anchor measures they
are stopped (SIGSTOP, then SIGCONT), so that the anchor is the machine's quiet time, as quiet as
the rest of the machine lets it be (an anchor measured under the load is no anchor: it can be
orders of magnitude off). The anchor is taken ANCHOR_REPEATS times and its lowest median kept
(interference only adds time); where its repeats disagree by more than 10%, the machine was not
quiet even for the anchor, and the output counts such rows, as it counts those whose threads waited
for a core more than ANCHOR_WAIT of the anchor's time (read from the scheduler's run delay). The
last lines state "N/M within 10%" and how many stored timings are off by more than 2x without
being marked unstable (the target is none).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time

import torch
import torch.nn.functional as F  # noqa: F401  (used in CASES' lambdas through torch.ops)
from torch.utils.benchmark import Timer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from conform.timing.timer import RunDelay, measure_stable  # noqa: E402

aten = torch.ops.aten
ANCHOR_REPEATS = 3
# an anchor whose threads waited for a core more than this share of its time was not quiet
ANCHOR_WAIT = 0.05


def _cases(dev):
    g = torch.Generator().manual_seed(0)

    def r(*shape, low=-3.0, high=3.0):
        return (torch.rand(shape, generator=g) * (high - low) + low).to(dev)

    def ints(high, *shape):
        return torch.randint(0, high, shape, generator=g).to(dev)

    a, b = r(512, 512), r(512, 512)
    big = r(1024, 1024)
    small = r(64, 64)
    img = r(8, 16, 32, 32)
    w = r(16, 16, 3, 3)
    pos = r(512, 512, low=0.1, high=4.0)
    idx_rows, idx_gather = ints(1024, 256), ints(512, 512, 512)
    return [
        ("add.Tensor", "[512, 512] x2", lambda: aten.add.Tensor(a, b)),
        ("mul.Tensor", "[512, 512] x2", lambda: aten.mul.Tensor(a, b)),
        ("div.Tensor", "[512, 512] x2", lambda: aten.div.Tensor(a, b)),
        ("add.Tensor (small)", "[64, 64] x2", lambda: aten.add.Tensor(small, small)),
        ("relu", "[1024, 1024]", lambda: aten.relu.default(big)),
        ("sigmoid", "[512, 512]", lambda: aten.sigmoid.default(a)),
        ("tanh", "[512, 512]", lambda: aten.tanh.default(a)),
        ("exp", "[512, 512]", lambda: aten.exp.default(a)),
        ("log", "[512, 512]", lambda: aten.log.default(pos)),
        ("sqrt", "[512, 512]", lambda: aten.sqrt.default(pos)),
        ("pow.Tensor_Scalar", "[512, 512]", lambda: aten.pow.Tensor_Scalar(a, 3)),
        ("clamp", "[512, 512]", lambda: aten.clamp.default(a, -1.0, 1.0)),
        ("where.self", "[512, 512] x3", lambda: aten.where.self(a > 0, a, b)),
        ("gelu", "[512, 512]", lambda: aten.gelu.default(a)),
        ("eq.Tensor", "[512, 512] x2", lambda: aten.eq.Tensor(a, b)),
        ("sum", "[1024, 1024]", lambda: aten.sum.default(big)),
        ("sum.dim_IntList", "[1024, 1024] dim 1", lambda: aten.sum.dim_IntList(big, [1])),
        ("mean.dim", "[1024, 1024] dim 0", lambda: aten.mean.dim(big, [0])),
        ("amax", "[1024, 1024] dim 1", lambda: aten.amax.default(big, [1])),
        ("argmax", "[1024, 1024] dim 1", lambda: aten.argmax.default(big, 1)),
        ("_softmax", "[512, 512] dim -1", lambda: aten._softmax.default(a, -1, False)),
        ("_log_softmax", "[512, 512] dim -1", lambda: aten._log_softmax.default(a, -1, False)),
        ("cumsum", "[512, 512] dim 1", lambda: aten.cumsum.default(a, 1)),
        ("mm", "[256, 256] x2", lambda: aten.mm.default(a[:256, :256], b[:256, :256])),
        ("mm (small)", "[64, 64] x2", lambda: aten.mm.default(small, small)),
        ("addmm", "[256] + [256, 256] x2", lambda: aten.addmm.default(a[0, :256], a[:256, :256], b[:256, :256])),
        ("bmm", "[8, 128, 128] x2", lambda: aten.bmm.default(a.view(16, 128, 128)[:8], b.view(16, 128, 128)[:8])),
        (
            "convolution",
            "[8, 16, 32, 32] * [16, 16, 3, 3]",
            lambda: aten.convolution.default(img, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        ),
        (
            "max_pool2d_with_indices",
            "[8, 16, 32, 32] k2",
            lambda: aten.max_pool2d_with_indices.default(img, [2, 2], [2, 2]),
        ),
        ("avg_pool2d", "[8, 16, 32, 32] k2", lambda: aten.avg_pool2d.default(img, [2, 2], [2, 2])),
        ("native_layer_norm", "[512, 512]", lambda: aten.native_layer_norm.default(a, [512], None, None, 1e-5)),
        ("index_select", "[1024, 1024] 256 rows", lambda: aten.index_select.default(big, 0, idx_rows)),
        ("gather", "[512, 512] dim 1", lambda: aten.gather.default(a, 1, idx_gather)),
        ("sort", "[512, 512] dim -1", lambda: aten.sort.default(a, -1)),
        ("cat", "[512, 512] x2 dim 0", lambda: aten.cat.default([a, b], 0)),
        ("clone", "[1024, 1024]", lambda: aten.clone.default(big)),
        (
            "transpose+contiguous",
            "[512, 512]",
            lambda: aten.clone.default(a.t(), memory_format=torch.contiguous_format),
        ),
    ]


def _spin() -> None:
    while True:
        pass


def start_load(n: int) -> list:
    """`n` processes that each keep a core busy until terminated."""
    import multiprocessing

    procs = [multiprocessing.get_context("fork").Process(target=_spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    return procs


@contextlib.contextmanager
def paused(procs: list):
    """The load processes stopped meanwhile (SIGSTOP), then resumed (SIGCONT)."""
    for p in procs:
        os.kill(p.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGCONT)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--min-time", type=float, default=0.1, help="conform's min_run_time per op, seconds (default 0.1)"
    )
    parser.add_argument(
        "--anchor-min-time",
        type=float,
        default=0.2,
        help="blocked_autorange's min_run_time (default 0.2, its own default)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch threads for both (default: torch's default)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, mps")
    parser.add_argument("--busy", action="store_true", help="keep every core busy with another process meanwhile")
    args = parser.parse_args(argv)
    load = start_load(os.cpu_count() or 1) if args.busy else []
    try:
        return _run(args, load)
    finally:
        for p in load:
            p.terminate()


def _run(args, load: list) -> int:
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    dev = torch.device(args.device)
    sync = {"cuda": torch.cuda.synchronize, "mps": lambda: torch.mps.synchronize()}.get(dev.type)
    cases = _cases(dev)

    print(f"torch {torch.__version__}, device {dev}, {threads} threads, load average {os.getloadavg()[0]:.2f}")
    if args.busy:
        print(
            f"busy machine: {len(load)} other processes keep all {os.cpu_count()} cores busy while conform measures;"
            " they are stopped while the anchor measures"
        )
    print(f"{'op':<26} {'shape':<34} {'conform':>10} {'anchor':>10} {'ratio':>6} {'conf wall':>9} {'anch wall':>9} ok")
    within = unstable = gross = unsure = gross_unsure = gross_above = not_quiet = within_quiet = 0
    outside = outside_quiet = 0
    wall_conform = wall_anchor = 0.0
    for i, (name, shape, fn) in enumerate(cases):

        def run_conform():
            t0 = time.perf_counter()
            m = measure_stable(fn, synchronize=sync, min_run_time=args.min_time, on_cpu=dev.type == "cpu")
            return m, time.perf_counter() - t0

        def run_anchor():
            with paused(load):
                fn()  # torch's intra-op threads exist: the run delay reads them
                delay = RunDelay.available()
                waited0 = delay() if delay else 0.0
                t0 = time.perf_counter()
                medians = [
                    Timer("fn()", globals={"fn": fn}, num_threads=threads)
                    .blocked_autorange(min_run_time=args.anchor_min_time)
                    .median
                    for _ in range(ANCHOR_REPEATS)
                ]
                wall = time.perf_counter() - t0
                waited = (delay() - waited0) / wall if delay else 0.0
                return (medians, waited), wall

        if i % 2 == 0:
            (m, cw), ((medians, waited), aw) = run_conform(), run_anchor()
        else:
            ((medians, waited), aw), (m, cw) = run_anchor(), run_conform()
        a = min(medians)
        anchor_unsure = max(medians) > 1.10 * a
        unsure += anchor_unsure
        anchor_waited = waited > ANCHOR_WAIT
        not_quiet += anchor_waited
        c = m.median
        ratio = c / a
        ok = m.stable and abs(ratio - 1) <= 0.10
        within += ok
        within_quiet += ok and not anchor_waited
        unstable += not m.stable
        off = m.stable and not 0.5 <= ratio <= 2.0
        gross += off
        gross_unsure += off and anchor_unsure
        gross_above += off and ratio > 2.0
        wall_conform += cw
        wall_anchor += aw
        shown = f"{c * 1e6:>8.1f}us" if m.stable else f"{'unstable':>10}"
        holds = m.low <= a <= m.high
        outside += m.stable and not holds
        outside_quiet += m.stable and not holds and not anchor_waited
        verdict = "yes" if ok else "NO" if m.stable else "unstable"
        verdict += f" ({m.low * 1e6:.1f}-{m.high * 1e6:.1f} us{'' if holds else ', anchor outside'})"
        verdict += " (anchor repeats disagree)" if anchor_unsure else ""
        verdict += f" (anchor waited {waited:.0%} for a core)" if anchor_waited else ""
        print(f"{name:<26} {shape:<34} {shown} {a * 1e6:>8.1f}us {ratio:>6.3f} {cw:>8.2f}s {aw:>8.2f}s {verdict}")
    print(
        f"wall time: conform {wall_conform:.1f} s, anchor {wall_anchor:.1f} s (conform {'<=' if wall_conform <= wall_anchor else '>'} anchor)"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)")
    print(
        f"anchors whose {ANCHOR_REPEATS} repeats disagreed by more than 10% (not quiet for the anchor either): {unsure}"
        f" ({gross_unsure} of them among the rows off by more than 2x)"
    )
    print(
        f"anchors whose threads waited for a core more than {ANCHOR_WAIT:.0%} of their time (other load):"
        f" {not_quiet}; of the {len(cases) - not_quiet} rows with a quiet anchor, {within_quiet} within 10%"
    )
    print(f"marked unstable (stored without a number): {unstable}")
    print(
        f"stable timings whose stored interval does not hold the anchor: {outside}"
        f" ({outside_quiet} of them with a quiet anchor)"
    )
    print(
        f"of the rows off by more than 2x, conform above the anchor: {gross_above} (interference only adds time:"
        f" conform's errors), below it: {gross - gross_above} (the anchor slowed, or conform too low)"
    )
    print(f"stored off by more than 2x without being marked unstable: {gross}")
    print(f"{within}/{len(cases)} within 10%")
    return 0 if within >= 0.9 * len(cases) and not gross else 1


if __name__ == "__main__":
    sys.exit(main())

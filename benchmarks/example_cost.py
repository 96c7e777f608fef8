"""What one example costs the harness, against the work it checks; and a single-op run's wall time.

Per-example cost: eight float32 cells (sinh, add.Tensor, mul.Tensor, sum, _softmax, mm, cumsum,
exp) run in this process through the device process's own code path (conform.run.cell's
`cell_process`: in-flight record, watchdog, run_cell, execute.run_case), once at --examples 5
and once at --examples 50, on the plain CPU, with conform's values per drawn case (a value
variant skips hypothesis's drawing; --values-per-draw 1 draws every case). The summary counts the cells that pass (a failing
cell stops at its failure and shrinks; on torch 2.13's CPU, sinh and cumsum do). The per-example cost of a cell is

    (time at 50 - time at 5) / 45

and its raw work is the same difference for the work itself: every case the cell ran
(execute.run_case), timed alone on inputs built beforehand: forward and backward (where the op
is differentiable) on the device, on the CPU reference and in float64 (golden), three sides
as on an accelerator, whatever the plain CPU's harness shares between them. Times are the
process's CPU time (torch runs one thread here, as in a device process), so that other
processes on the machine change them little. The ratio is harness / work.

Drawing alone: the cell's own strategy under the cell's hypothesis settings, with a test that does
nothing with its cases (`drawing ms`), the mean choices a case draws (`choices`), and hypothesis's
engine alone drawing that many plain integers (`engine ms`): the floor of any harness that draws
each case with hypothesis, whatever it does with the case.

Single-op wall time: `python -m conform.cli run --ops aten::abs --no-bench` in a fresh folder,
wall clock and the CPU time of its whole process tree.

    python benchmarks/example_cost.py [--repeats 3] [--no-single-op] [--only sinh,mm] [--values-per-draw N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CELLS = ("sinh", "add.Tensor", "mul.Tensor", "sum", "_softmax", "mm", "cumsum", "exp")
FEW, MANY = 5, 50


def _cell_runner(examples: int, folder: Path, seed: int, per_draw: int | None = None):
    from conform.config import CellSettings, RunConfig, WorkerSetup
    from conform.run.cell import cell_process

    (folder / "inflight").mkdir(parents=True, exist_ok=True)
    per_draw = CellSettings.values_per_draw if per_draw is None else per_draw
    settings = CellSettings(examples=examples, values_per_draw=per_draw, seed=seed, hypothesis_db=None)
    config = RunConfig(device="cpu", cell=settings)
    setup = WorkerSetup(config, "cpu", str(folder), str(folder / "crashers.txt"), None)
    return cell_process(setup, str(folder / "inflight" / f"bench-{examples}.json"))


class _Recorder:
    """Every case execute.run_case is asked to run, with whether it compared gradients."""

    def __init__(self):
        from conform.run import execute

        self.execute, self.original, self.cases = execute, execute.run_case, []

    def __enter__(self):
        def run_case(op, case, backend, *, grad=True, **options):
            self.cases.append((op, case, grad))
            return self.original(op, case, backend, grad=grad, **options)

        self.execute.run_case = run_case
        return self

    def __exit__(self, *exc):
        self.execute.run_case = self.original


def _work(op, case) -> float:
    """CPU seconds of the case's own work: forward and backward on the device, the CPU and in
    float64; inputs built beforehand. 0 for a case the op rejects."""
    import torch

    from conform.run.execute import _grad_inputs, leaves

    cpu = torch.device("cpu")
    total = 0.0
    fn = op.resolve()
    for dtype in (None, None, torch.float64):
        try:
            args, kwargs = case.materialize(lambda t: t, cpu, dtype=dtype)
            args, kwargs, inputs = _grad_inputs(op, args, kwargs)
            start = time.process_time()
            with torch.enable_grad():
                out = fn(*args, **kwargs)
                if inputs:
                    outs = [t for t in leaves(out) if t.requires_grad]
                    if outs:
                        torch.autograd.grad(outs, [t for _, t in inputs], [torch.ones_like(o) for o in outs])
            total += time.process_time() - start
        except Exception:  # noqa: BLE001 - an invalid case: the reference rejects it, nothing to time
            pass
    return total


def _drawing(cell: tuple[str, str], examples: int, seed: int) -> tuple[float, int]:
    """(CPU seconds, choices drawn) of hypothesis drawing the cell's cases alone, with the cell's
    own strategy and settings and a test that does nothing with them."""
    from hypothesis import given
    from hypothesis.control import current_build_context

    import generators
    import opdb
    from conform.config import CellSettings
    from conform.judge import references
    from conform.run.cell import _hypothesis_settings

    op = opdb.lookup(cell[0])
    strategy = generators.from_schema(
        op, cell[1], max_numel=CellSettings.max_numel, reference=references.float64_function
    )
    choices = []

    def count(case):
        choices.append(len(current_build_context().data.choices))

    test = _hypothesis_settings(CellSettings(examples=examples, hypothesis_db=None))(given(strategy)(count))
    test._hypothesis_internal_use_seed = seed
    start = time.process_time()
    test()
    return time.process_time() - start, round(statistics.mean(choices))


def _engine_floor(choices: int, examples: int, seed: int) -> float:
    """CPU seconds of hypothesis alone: `examples` tests each drawing `choices` integers (from a
    range too wide to exhaust) and doing nothing with them, with the cells' settings."""
    from hypothesis import given
    from hypothesis import strategies as st

    from conform.config import CellSettings
    from conform.run.cell import _hypothesis_settings

    many = st.lists(st.integers(0, 2**20), min_size=choices, max_size=choices)
    test = _hypothesis_settings(CellSettings(examples=examples, hypothesis_db=None))(given(many)(lambda xs: None))
    test._hypothesis_internal_use_seed = seed
    start = time.process_time()
    test()
    return time.process_time() - start


def _median_work(cases, repeats: int) -> float:
    return sum(statistics.median(_work(op, c) for _ in range(repeats)) for op, c, _ in cases)


def per_example(names, repeats: int, seed: int, per_draw: int | None = None) -> list[dict]:
    import torch

    import opdb

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runners = {n: _cell_runner(n, Path(tmp), seed, per_draw) for n in (FEW, MANY)}
        torch.set_num_threads(1)
        for name in names:
            cell = (opdb.lookup(f"aten::{name}").qualname, "float32")
            runners[FEW](cell)  # warm: first calls build strategies and load kernels
            harness, work, drawing, floor = {}, {}, {}, {}
            for n in (FEW, MANY):
                times, cases = [], []
                for _ in range(repeats):
                    with _Recorder() as rec:
                        start = time.process_time()
                        result, _ = runners[n](cell)
                        times.append(time.process_time() - start)
                    cases = rec.cases
                harness[n] = statistics.median(times)
                work[n] = _median_work(cases, repeats)
                drawn = [_drawing(cell, n, seed) for _ in range(repeats)]
                drawing[n] = statistics.median(t for t, _ in drawn)
                choices = drawn[0][1]
                floor[n] = statistics.median(_engine_floor(choices, n, seed) for _ in range(repeats))
            rows.append(
                {
                    "cell": f"{name}[float32]",
                    "outcome": result.outcome,
                    "examples": result.examples_run,
                    "harness_ms": (harness[MANY] - harness[FEW]) / (MANY - FEW) * 1e3,
                    "work_ms": (work[MANY] - work[FEW]) / (MANY - FEW) * 1e3,
                    "drawing_ms": (drawing[MANY] - drawing[FEW]) / (MANY - FEW) * 1e3,
                    "floor_ms": (floor[MANY] - floor[FEW]) / (MANY - FEW) * 1e3,
                    "choices": choices,
                }
            )
    return rows


def _tree_cpu(root: int, seen: dict[int, float]) -> None:
    """Record the CPU seconds of `root` and its descendants so far, from /proc (Linux)."""
    parents, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    for pid, t in cpu.items():
        p = pid
        while p in parents and p != root:
            p = parents[p]
        if p == root:
            seen[pid] = max(seen.get(pid, 0.0), t)


def single_op(args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the process tree, exit status) of `conform run` in a fresh folder. The CPU
    time is sampled from /proc every 0.1 s (the fork server's children are nobody's to wait for,
    so getrusage would miss them); on a busy machine it is the steadier number."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "conform.cli", "run", *args],
            cwd=tmp,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        while proc.poll() is None:
            _tree_cpu(proc.pid, seen)
            time.sleep(0.1)
        wall = time.perf_counter() - start
        out, err = proc.communicate()
    if proc.returncode:
        print(out[-2000:], err[-2000:], sep="\n")
    return wall, sum(seen.values()), proc.returncode


def sweep_sample(n: int, examples: list[int], seed: int) -> dict[int, float]:
    """CPU seconds of `n` cells drawn at random from a full CPU sweep's plan, at each count of
    `examples`, each cell in a forked child (a kernel may kill its process): what a full sweep's
    cell time scales by when the examples per cell change."""
    import random

    import opdb
    from conform.config import CPU_DEFAULT_DTYPES
    from conform.run import selection

    plan = selection.plan_cells(opdb.catalog(), list(CPU_DEFAULT_DTYPES))
    cells = random.Random(seed).sample(plan, n)
    totals = dict.fromkeys(examples, 0.0)
    with tempfile.TemporaryDirectory() as tmp:
        # warm, as a sweep's long-lived device process is (its fork server warms it the same way)
        _cell_runner(1, Path(tmp) / "warm", seed)(("aten::add.Tensor", "float32"))
        for cell in cells:
            for e in examples:
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child: one cell, its CPU time to the parent
                    os.close(read)
                    try:
                        run = _cell_runner(e, Path(tmp) / str(e), seed)
                        start = time.process_time()
                        run(cell)
                        os.write(write, f"{time.process_time() - start}".encode())
                    finally:
                        os._exit(0)
                os.close(write)
                with os.fdopen(read) as f:
                    spent = f.read()
                os.waitpid(pid, 0)
                totals[e] += float(spent or 0.0)
    return totals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each cell and each case; the median counts")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help="comma list of the cells' ops (default: all eight)")
    ap.add_argument("--no-single-op", action="store_true", help="skip the single-op wall time")
    ap.add_argument(
        "--values-per-draw",
        type=int,
        default=None,
        help="cases per drawn case (default: conform's); 1 draws every case",
    )
    ap.add_argument(
        "--sweep-sample",
        type=int,
        default=0,
        metavar="N",
        help="instead: CPU time of N random cells of a CPU sweep at --sample-examples each",
    )
    ap.add_argument("--sample-examples", default="5,10,20", help="examples per cell for --sweep-sample")
    a = ap.parse_args()
    if a.sweep_sample:
        counts = [int(x) for x in a.sample_examples.split(",")]
        totals = sweep_sample(a.sweep_sample, counts, a.seed)
        base = totals[counts[0]]
        for e, t in totals.items():
            print(f"{a.sweep_sample} random cells at {e} examples: {t:.1f} s CPU ({t / base:.2f}x {counts[0]})")
        return
    names = [n for n in a.only.split(",") if n] or list(CELLS)
    from conform.config import CellSettings

    per_draw = CellSettings.values_per_draw if a.values_per_draw is None else a.values_per_draw
    print(
        f"per-example cost, float32 cells, CPU time, median of {a.repeats}, seed {a.seed}, "
        f"{per_draw} value(s) per drawn case"
    )
    print(
        f"{'cell':24} {'outcome':10} {'harness ms':>11} {'work ms':>9} {'ratio':>7}"
        f" {'drawing ms':>11} {'choices':>8} {'engine ms':>10}"
    )
    rows = per_example(names, a.repeats, a.seed, per_draw)
    for r in rows:
        ratio = r["harness_ms"] / r["work_ms"] if r["work_ms"] > 0 else float("inf")
        print(
            f"{r['cell']:24} {r['outcome']:10} {r['harness_ms']:11.2f} {r['work_ms']:9.3f} {ratio:6.1f}x"
            f" {r['drawing_ms']:11.2f} {r['choices']:8d} {r['floor_ms']:10.2f}"
        )
    # a failing cell stops at its failure and shrinks: its examples do not scale with the count
    passing = [r for r in rows if r["outcome"] == "pass"] or rows
    harness = statistics.mean(r["harness_ms"] for r in passing)
    work = statistics.mean(r["work_ms"] for r in passing)
    left = ", ".join(r["cell"] for r in rows if r not in passing)
    print(
        f"per example ({len(passing)} passing cells{'; not ' + left if left else ''}): "
        f"harness {harness:.2f} ms, work {work:.3f} ms: {harness / work:.1f}x the work"
    )
    drawing = statistics.mean(r["drawing_ms"] for r in passing)
    engine = statistics.mean(r["floor_ms"] for r in passing)
    print(
        f"of the harness: drawing the cases alone {drawing:.2f} ms ({drawing / work:.1f}x the work); hypothesis's"
        f" engine alone, drawing as many plain integers for a test that does nothing: {engine:.2f} ms"
        f" ({engine / work:.1f}x)"
    )
    if not a.no_single_op:
        wall, cpu, rc = single_op(["--ops", "aten::abs", "--no-bench"])
        print(f"single op (conform run --ops aten::abs --no-bench): {wall:.1f} s wall, {cpu:.1f} s CPU, exit {rc}")


if __name__ == "__main__":
    main()

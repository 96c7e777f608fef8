"""How many catalog ops does the generator reach? Probe every op on the CPU and summarise.

    python benchmarks/generator_coverage.py [--examples 12] [--jobs 2] [--seed N] [--ops REGEX] [--output results.json]

Each op's cells are the dtypes a default CPU sweep runs (`conform run --ops all`), tried in order
until one has a valid case, with as many draws per cell as the runner allows before it gives up;
so an op without a valid case here is one the sweep would report as "no valid case". `--seed`
draws other cases (default: derandomized): two seeds that agree say the valid case is not luck.

Ops run in worker subprocesses, a chunk at a time, because some ops crash the process on random
inputs; a crash is recorded against the op in flight and the worker restarts after it. Each op
has a time cap; one that exceeds it is recorded as a timeout.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# cells tried in order until one has a valid case: an op is exercised if some dtype works. These
# are the cells of a default CPU sweep (conform.config.CPU_DEFAULT_DTYPES).
FALLBACK_DTYPES = ("float32", "float16", "bfloat16", "complex64", "int64", "int32", "bool")
# draws per cell with no valid case before the runner gives up on it, and sooner when every
# rejection gives the same reason (conform.run.cell._invalid_limit)
RUNNER_DRAWS = 12
RUNNER_PATIENCE = 5


def load_catalog():
    try:
        import opdb

        return list(opdb.catalog()), "opdb"
    except Exception:  # opdb not there yet: a minimal parse of torch's schemas
        from generators.testing import aten_catalog

        return aten_catalog(), "generators.testing"


# -- worker --------------------------------------------------------------------------------------


class _OpTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise _OpTimeout()


_CPU_DISPATCH = re.compile(r"Could not run '[^']*' with arguments from the 'CPU' backend")
NO_CPU_KERNEL_REASON = "no CPU kernel in this build: the CPU reference cannot run it"


def worker(indices: list[int], examples: int, cap: float, seed: int | None = None) -> None:
    import torch

    torch.set_num_threads(1)
    from generators import cell_dtypes
    from generators.coverage_probe import probe

    catalog, _ = load_catalog()
    signal.signal(signal.SIGALRM, _alarm)
    for i in indices:
        op = catalog[i]
        print(f"START {i}", flush=True)
        t0 = time.time()
        valid, reason, cell = 0, None, None
        signal.setitimer(signal.ITIMER_REAL, cap)
        try:
            cells = cell_dtypes(op, list(FALLBACK_DTYPES))
            first_reason = None
            for cell in cells:
                valid, reason = probe(op, cell, examples=examples, stop_after=1, seed=seed, patience=RUNNER_PATIENCE)
                # a cell-level Untestable (a quantized op's float cells) leaves the other cells to try
                first_reason = first_reason or reason
                if valid:
                    break
            reason = None if valid else first_reason
        except _OpTimeout:
            valid, reason = 0, "timeout"
        except Exception as exc:  # never let one op end the worker
            valid, reason = 0, f"probe error: {type(exc).__name__}: {exc}"[:200]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if reason and _CPU_DISPATCH.search(reason):
            # what `conform coverage` says of an op the CPU reference cannot dispatch
            reason = "untestable: " + NO_CPU_KERNEL_REASON
        rec = {
            "i": i,
            "op": op.qualname,
            "valid": valid,
            "reason": reason,
            "cell": cell,
            "seconds": round(time.time() - t0, 3),
        }
        print("RESULT " + json.dumps(rec), flush=True)


# -- controller ----------------------------------------------------------------------------------


def run_chunk(indices, examples, cap, results, catalog, seed=None):
    """Run `indices` in a worker; restart after a crash or hang, skipping the op in flight."""
    pending = list(indices)
    while pending:
        proc = subprocess.Popen(
            [
                sys.executable,
                os.path.abspath(__file__),
                "--worker",
                ",".join(map(str, pending)),
                "--examples",
                str(examples),
                "--cap",
                str(cap),
            ]
            + ([] if seed is None else ["--seed", str(seed)]),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")},
        )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)], daemon=True).start()
        in_flight = None
        while True:
            try:
                line = lines.get(timeout=cap * 2 + 30)
            except queue.Empty:
                proc.kill()
                proc.wait()
                if in_flight is not None:
                    results[in_flight] = {
                        "i": in_flight,
                        "op": catalog[in_flight].qualname,
                        "valid": 0,
                        "reason": "timeout (hard)",
                    }
                break
            if line is None:
                proc.wait()
                if in_flight is not None:
                    results[in_flight] = {
                        "i": in_flight,
                        "op": catalog[in_flight].qualname,
                        "valid": 0,
                        "reason": f"crash (exit status {proc.returncode})",
                    }
                break
            if line.startswith("START "):
                in_flight = int(line.split()[1])
            elif line.startswith("RESULT "):
                rec = json.loads(line[7:])
                results[rec["i"]] = rec
                in_flight = None
        pending = [i for i in pending if i not in results]


def _crashed(rec: dict) -> bool:
    return (rec.get("reason") or "").startswith(("crash", "timeout"))


def is_public_functional(op) -> bool:
    return not op.base_name.startswith("_") and op.variant == "functional"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--examples",
        type=int,
        default=RUNNER_DRAWS,
        help=f"cases drawn per op and dtype (default {RUNNER_DRAWS}, as the runner)",
    )
    ap.add_argument("--seed", type=int, default=None, help="draw the cases of this seed (default: derandomized)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--cap", type=float, default=10.0, help="seconds per op before it counts as a timeout (default 10)")
    ap.add_argument("--chunk", type=int, default=200, help="ops per worker process (default 200)")
    ap.add_argument("--ops", default=None, help="only ops whose qualname matches this regex")
    ap.add_argument("--output", default=None, help="write per-op results as JSON here")
    ap.add_argument("--top", type=int, default=25, help="failure reasons to list (default 25)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        worker([int(x) for x in args.worker.split(",") if x], args.examples, args.cap, args.seed)
        return 0

    t0 = time.time()
    catalog, source = load_catalog()
    indices = [i for i, op in enumerate(catalog) if args.ops is None or re.search(args.ops, op.qualname)]
    chunks = [indices[k : k + args.chunk] for k in range(0, len(indices), args.chunk)]
    results: dict[int, dict] = {}
    work: queue.Queue = queue.Queue()
    for c in chunks:
        work.put(c)

    def drain():
        while True:
            try:
                c = work.get_nowait()
            except queue.Empty:
                return
            run_chunk(c, args.examples, args.cap, results, catalog, args.seed)

    threads = [threading.Thread(target=drain) for _ in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.time() - t0

    total = len(indices)
    ok = sum(1 for i in indices if results.get(i, {}).get("valid"))
    pub = [i for i in indices if is_public_functional(catalog[i])]
    pub_ok = sum(1 for i in pub if results.get(i, {}).get("valid"))
    testable = [i for i in indices if not catalog[i].rules.untestable]
    testable_ok = sum(1 for i in testable if results.get(i, {}).get("valid"))
    pub_testable = [i for i in pub if not catalog[i].rules.untestable]
    pub_testable_ok = sum(1 for i in pub_testable if results.get(i, {}).get("valid"))
    reasons = collections.Counter()
    for i in indices:
        r = results.get(i, {})
        if not r.get("valid"):
            reasons[r.get("reason") or "no result"] += 1
    print(f"catalog: {source}; examples per op and dtype: {args.examples}; jobs: {args.jobs}")
    print(f"total ops:            {total}")
    print(f"ops with >=1 valid:   {ok} ({100 * ok / max(total, 1):.1f}%)")
    print(f"public functional:    {pub_ok} / {len(pub)} ({100 * pub_ok / max(len(pub), 1):.1f}%)")
    print(
        f"testable (no opdb untestable rule): {testable_ok} / {len(testable)} ({100 * testable_ok / max(len(testable), 1):.1f}%); "
        f"public functional among them: {pub_testable_ok} / {len(pub_testable)} ({100 * pub_testable_ok / max(len(pub_testable), 1):.1f}%)"
    )
    stated = sum(n for k, n in reasons.items() if k.startswith("untestable"))
    print(
        f"not exercised, with a stated reason (untestable rule, unsupported argument type, no CPU kernel): {stated}; "
        f"without: {total - ok - stated}"
    )
    print(
        f"crashes: {sum(v for k, v in reasons.items() if k.startswith('crash'))}; timeouts: {sum(v for k, v in reasons.items() if k.startswith('timeout'))}"
    )
    # the denominator that matters: ops this machine can run (no opdb untestable rule, which
    # includes "no CPU kernel in this build"); among them, one without a valid case is a defect
    runnable = [i for i in indices if not catalog[i].rules.untestable]
    no_case = sorted(
        (catalog[i].qualname, results.get(i, {}).get("reason"))
        for i in runnable
        if not results.get(i, {}).get("valid") and not _crashed(results.get(i, {}))
    )
    print(
        "untestable (opdb rule, not counting no CPU kernel): "
        f"{sum(1 for i in indices if catalog[i].rules.untestable and catalog[i].rules.untestable != NO_CPU_KERNEL_REASON)}"
    )
    print(f"with a kernel here and testable: {len(runnable)}; no valid case among them: {len(no_case)}")
    for name, reason in no_case:
        print(f"  no valid case: {name}: {reason}")
    print(f"elapsed: {elapsed:.0f} s")
    print("top failure reasons:")
    for reason, n in reasons.most_common(args.top):
        print(f"  {n:5d}  {reason}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(
                [
                    results.get(i, {"i": i, "op": catalog[i].qualname, "valid": 0, "reason": "no result"})
                    for i in indices
                ],
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

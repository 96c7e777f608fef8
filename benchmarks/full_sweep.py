"""The main job, timed: `conform run --ops all` with default settings, then `conform coverage`.

    python benchmarks/full_sweep.py [--out DIR] [--seed N] [--keep-workdir DIR] [-- extra run args]

It runs in a fresh folder (so no example database, crash memory or earlier run helps it, as on a
user's first run), exactly as README's first command does, and prints:
  * the wall time of `conform run --ops all` (the budget: under 15 minutes on 2
    cores) and the cells per second;
  * the run's outcome counts (`conform report --format json`), and that the report accounts for
    every catalog op;
  * `conform coverage` totals: ops exercised, public functional ops exercised (the
    targets: 85% and 95%), and the reasons for the rest.
The database stays in the output folder for `conform report`/`coverage`/`site`.
Timings on a shared machine are noisy: run it when nothing else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def conform(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conform.cli", *args], cwd=cwd, capture_output=True, text=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="work folder (default: a temporary one, kept)")
    ap.add_argument("--seed", type=int, default=None, help="run seed (default: conform's, random)")
    ap.add_argument("extra", nargs="*", help="more `conform run` arguments, after --")
    a = ap.parse_args()

    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="conform-sweep-"))
    out.mkdir(parents=True, exist_ok=True)
    if (out / "conform.db").exists():
        sys.exit(f"{out}/conform.db exists: give a fresh --out")
    args = ["run", "--ops", "all", "--quiet", *(["--seed", str(a.seed)] if a.seed is not None else []), *a.extra]
    print(f"conform {' '.join(args)}   (in {out}, {os.cpu_count()} cores)", flush=True)
    # output to files, not pipes: the wall time is until the conform process exits (what a user
    # at a terminal waits for), not until every process that inherited its pipes has gone
    log, err = out / "run.out", out / "run.err"
    with open(log, "w") as fo, open(err, "w") as fe:
        started = time.monotonic()
        p = subprocess.Popen([sys.executable, "-m", "conform.cli", *args], cwd=out, stdout=fo, stderr=fe)
        printed = None
        while p.poll() is None:
            time.sleep(0.5)
            if printed is None and " cells recorded, " in log.read_text():
                printed = time.monotonic() - started
        wall = time.monotonic() - started
    stdout = log.read_text()
    if p.returncode not in (0, 1):
        sys.exit(f"conform run failed ({p.returncode}):\n{stdout[-2000:]}{err.read_text()[-2000:]}")
    print("\n".join(line for line in stdout.splitlines() if line.startswith(("run ", "timed "))))
    if printed is not None:
        # after the sweep's summary: the timing pass (unless --no-bench is in the extra arguments) and the shutdown
        print(f"sweep {printed:.0f} s, then {wall - printed:.0f} s more (timing pass and exit): {wall:.0f} s in all")

    report = json.loads(conform("report", "--format", "json", cwd=out).stdout)
    env = report["environments"][-1]
    cells = sum(env["cells"].values())
    cov = json.loads(conform("coverage", "--format", "json", cwd=out).stdout)
    t = cov["totals"]
    accounted = len(cov["ops"]) == t["ops"] == env["ops_total"]

    print()
    print(f"torch {env['torch_version']}, backend {env['backend']} ({env['device_name']})")
    print(f"wall time          {int(wall // 60)} min {int(wall % 60)} s   ({cells} cells, {cells / wall:.1f} cells/s)")
    print(f"15-minute budget   {'met' if wall <= 900 else 'NOT met'}")
    print("outcomes           " + ", ".join(f"{k} {v}" for k, v in sorted(env["cells"].items(), key=lambda kv: -kv[1])))
    print(
        f"report accounts    {env['ops_total']} catalog ops, {env['ops_exercised']} exercised; every op listed by coverage: {accounted}"
    )
    print(f"coverage           {t['exercised']}/{t['ops']} = {t['exercised_pct']}% of all ops (target 85%)")
    print(
        f"                   {t['public_functional_exercised']}/{t['public_functional']} = {t['public_functional_pct']}% of public functional ops (target 95%)"
    )
    print("not exercised, by reason (top 12):")
    for reason, n in sorted(t["reasons"].items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {n:5d}  {reason[:110]}")
    print(f"\ndatabase: {out / 'conform.db'}")


if __name__ == "__main__":
    main()

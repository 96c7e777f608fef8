"""Regenerate the declared-coverage table of docs/declared.md from torch wheels.

    python benchmarks/declared_history.py --wheels wheels --download --db declared.db

For every release in --versions it takes the macOS arm64 wheel from --wheels (downloading it
with `pip download` when --download is given and it is missing: ~50-80 MB each), stores what the
wheel declares into --db as conform's `declared` command does, and rewrites the table between the
markers in --docs. Only native_functions.yaml is read from each wheel; nothing is installed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from conform.report import declared
from conform.store import Store

# the newest patch release of every minor release since MPS appeared (1.12)
VERSIONS = "1.12.1 1.13.1 2.0.1 2.1.2 2.2.2 2.3.1 2.4.1 2.5.1 2.6.0 2.7.1 2.8.0 2.9.1 2.10.0 2.11.0 2.12.1 2.13.0 2.14.1 2.15.0"
# macOS arm64 wheels: older releases are tagged macosx_11_0, newer ones macosx_14_0; pip only
# matches a tag it is asked for, and not every Python version has a wheel of every release
PLATFORMS = ("macosx_11_0_arm64", "macosx_14_0_arm64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
START, END = "<!-- declared-table:start -->", "<!-- declared-table:end -->"


def find_wheel(folder: Path, version: str) -> Path | None:
    found = sorted(folder.glob(f"torch-{version}-*macosx*arm64.whl"))
    return found[0] if found else None


def download(folder: Path, version: str) -> Path | None:
    # a machine-wide pip constraint may pin torch to the installed release; downloading another
    # release's wheel for another platform installs nothing, so lift it for this call only
    env = dict(os.environ, PIP_CONSTRAINT="/dev/null")
    for platform in PLATFORMS:
        for python in PYTHONS:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                platform,
                "--python-version",
                python,
                f"torch=={version}",
                "-d",
                str(folder),
            ]
            if subprocess.run(cmd, env=env, capture_output=True).returncode == 0:
                return find_wheel(folder, version)
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default=VERSIONS, help="space- or comma-separated torch releases")
    ap.add_argument("--wheels", type=Path, default=Path("wheels"), help="folder of torch-*.whl (default: ./wheels)")
    ap.add_argument("--download", action="store_true", help="pip download missing wheels")
    ap.add_argument("--db", default="declared.db", help="database to store the declared environments in")
    ap.add_argument("--docs", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "declared.md")
    args = ap.parse_args(argv)

    args.wheels.mkdir(parents=True, exist_ok=True)
    store = Store(args.db)
    for version in args.versions.replace(",", " ").split():
        wheel = find_wheel(args.wheels, version) or (download(args.wheels, version) if args.download else None)
        if wheel is None:
            print(
                f"torch {version}: no macOS arm64 wheel in {args.wheels}"
                + ("" if args.download else " (use --download)"),
                file=sys.stderr,
            )
            continue
        release = declared.read_wheel(wheel)
        declared.record(store, release)
        print(f"torch {release.torch_version}: {len(release.kernels)} ops from {wheel.name}", file=sys.stderr)
    table = declared.render_coverage(declared.declared_coverage(store), "markdown")
    print(table)
    text = args.docs.read_text()
    if START in text and END in text:
        head, rest = text.split(START, 1)
        args.docs.write_text(f"{head}{START}\n{table}\n{END}{rest.split(END, 1)[1]}")
        print(f"table written to {args.docs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

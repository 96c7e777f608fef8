"""Running a stored reproduction script as `python repro.py` would, without paying the torch
import for each one.

A script starts from nothing but its own imports, so each test ran it in a fresh interpreter:
about 2 s of CPU for the torch import alone, dozens of times a session. Here one process per
test worker imports torch once (and nothing else: no conform, no test module), and each script
runs in a fork of it, as `__main__`, in fresh globals, with its own argv, sys.path[0], working
folder and environment, its stdout and stderr in files. What it does to the process (torch's
global settings, its threads, a crash) ends with that fork. A name the script forgets to import
is still a NameError, since nothing of the server's is in its globals.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# The server: reads one JSON request a line, forks, and answers the fork's pid, then its status.
_SERVER = r"""
import json, os, runpy, sys, traceback
import torch  # the cost every script would pay again

for line in sys.stdin:
    r = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)
            os.chdir(r["cwd"])
            os.environ.clear()
            os.environ.update(r["env"])
            for fd, name in ((1, "out"), (2, "err")):
                f = os.open(r[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(f, fd)
                os.close(f)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the server's requests
            sys.stdin = open(0, closefd=False)
            sys.argv = [r["path"], *r["args"]]
            sys.path[0] = os.path.dirname(os.path.abspath(r["path"]))
            try:
                runpy.run_path(r["path"], run_name="__main__")
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""

_server: subprocess.Popen | None = None


def _started() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        atexit.register(_server.kill)
    return _server


def _line(proc: subprocess.Popen, timeout: float) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise subprocess.TimeoutExpired("python script", timeout)
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError("the script server ended")
    return line.strip()


def run_script(path, *args, cwd=None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python PATH ARGS` in `cwd` (this process's folder if None): its exit status (negative for
    a signal, as subprocess gives it), stdout and stderr."""
    global _server
    proc = _started()
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        request = {
            "path": str(path),
            "args": [str(a) for a in args],
            "cwd": str(cwd or os.getcwd()),
            "env": dict(os.environ),
            "out": str(out),
            "err": str(err),
        }
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        pid = int(_line(proc, 60))
        try:
            code = int(_line(proc, timeout))
        except subprocess.TimeoutExpired:
            # the fork makes its own process group first thing; one stuck before that has none
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.kill()  # its answer would come to the next request: start a new one
            _server = None
            raise
        return subprocess.CompletedProcess(
            [sys.executable, str(path), *args], code, out.read_text(errors="replace"), err.read_text(errors="replace")
        )

"""The in-flight record and hang watchdog of a worker.

Before each case a worker writes what it is about to run to a small JSON file. If the process
dies (segfault, abort), the controller reads that file and records the cell as `crash` with the
case in flight. If a case runs past its time limit, the watchdog thread marks the file as a
timeout and ends the process with os._exit: a kernel stuck in native code cannot be interrupted
any other way, and xdist replaces the worker so the sweep goes on.

A kernel that hangs while holding the GIL would stop that thread too, so the controller runs a
`Monitor` as well: it reads the same files and kills a worker whose case is far past its limit.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

TIMEOUT_EXIT_STATUS = 75


class Watchdog:
    def __init__(self, path: Path, limit_s: float):
        self.path = Path(path)
        self.limit_s = limit_s
        self.worker_pid = os.getpid()
        self._deadline: float | None = None
        self._record: dict = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        # one descriptor, rewritten in place: a worker writes this record twice per case, and
        # open + write + rename each time was 8% of a sweep's cell time
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._thread = threading.Thread(target=self._watch, name="conform-watchdog", daemon=True)
        self._thread.start()

    def arm(self, record: dict) -> None:
        """A case is about to run: record it, and start its clock."""
        # pid runs the case; worker_pid is the xdist worker (they differ in a forked child)
        record = {**record, "limit_s": self.limit_s, "pid": os.getpid(), "worker_pid": self.worker_pid, "started": time.time()}
        self._write(record)
        with self._lock:
            self._record = record
            self._deadline = time.monotonic() + self.limit_s
        self._wake.set()

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None
            idle = {"op": self._record.get("op"), "dtype": self._record.get("dtype"), "idle": True, "pid": os.getpid()}
        self._write(idle)

    def _write(self, record: dict) -> None:
        _rewrite(self._fd, record)

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def _watch(self) -> None:
        while not self._stopped:
            with self._lock:
                deadline = self._deadline
            if deadline is None:
                self._wake.wait()
                self._wake.clear()
                continue
            remaining = deadline - time.monotonic()
            if remaining > 0:
                self._wake.wait(min(remaining, 1.0))
                self._wake.clear()
                continue
            with self._lock:
                if self._deadline is None:  # finished just in time
                    continue
                record = {**self._record, "timeout": True}
            self._write(record)
            os._exit(TIMEOUT_EXIT_STATUS)


class Monitor:
    """Controller side: kill a worker whose case runs `grace_s` past its limit (the worker's own
    watchdog could not act, e.g. a kernel holding the GIL). The cell is then recorded as timeout."""

    def __init__(self, folder: Path, *, grace_s: float = 10.0, period_s: float = 1.0):
        self.folder = Path(folder)
        self.grace_s = grace_s
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="conform-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.period_s):
            for path in self.folder.glob("*.json"):
                try:
                    record = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                if record.get("idle") or "started" not in record:
                    continue
                if record.get("timeout"):
                    # a forked case was killed, but its worker has not moved on since: end it too
                    # (xdist replaces it; the cell is recorded as timeout from this record)
                    worker = record.get("worker_pid")
                    if record.get("killed_at") and worker and worker != record.get("pid") and time.time() - record["killed_at"] > 3 * self.grace_s:
                        _write(path, {**record, "worker_pid": None})
                        _kill(worker)
                    continue
                if time.time() - record["started"] > record.get("limit_s", 60) + self.grace_s:
                    _write(path, {**record, "timeout": True, "killed_at": time.time()})
                    _kill(record.get("pid"))


def _kill(pid) -> None:
    import signal

    try:
        os.kill(int(pid), signal.SIGKILL)
    except (OSError, TypeError, ValueError):
        pass


def _write(path: Path, record: dict) -> None:
    """The monitor's rewrite of a worker's record: in place, like the worker's own writes (a
    rename would leave the worker writing to an unlinked file)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _rewrite(fd, record)
    finally:
        os.close(fd)


def _rewrite(fd: int, record: dict) -> None:
    """Rewrite a record in place. A reader that catches it half-written gets invalid JSON and
    reads again later (the monitor) or treats it as unknown (a crash report)."""
    data = json.dumps(record).encode()
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))

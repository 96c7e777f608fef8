"""The in-flight record and hang watchdog of a worker.

Before each case a worker writes what it is about to run to a small JSON file. If the process
dies (segfault, abort), the controller reads that file and records the cell as `crash` with the
case in flight. If a case runs past its time limit, the watchdog thread marks the file as a
timeout and ends the process with os._exit: a kernel stuck in native code cannot be interrupted
any other way, and xdist replaces the worker so the sweep goes on.
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
        self._deadline: float | None = None
        self._record: dict = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._watch, name="conform-watchdog", daemon=True)
        self._thread.start()

    def arm(self, record: dict) -> None:
        """A case is about to run: record it, and start its clock."""
        record = {**record, "limit_s": self.limit_s, "pid": os.getpid()}
        _write(self.path, record)
        with self._lock:
            self._record = record
            self._deadline = time.monotonic() + self.limit_s
        self._wake.set()

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None

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
            _write(self.path, record)
            os._exit(TIMEOUT_EXIT_STATUS)


def _write(path: Path, record: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, path)

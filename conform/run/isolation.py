"""Process isolation: the one way conform starts a process that does device work, the in-flight
record and hang watchdog of such a process.
"""

# The fork-safety rule. Accelerator runtimes do not survive fork() once initialised:
#
# * CUDA: torch/cuda/__init__.py `_lazy_init` raises "Cannot re-initialize CUDA in forked
#   subprocess. To use CUDA with multiprocessing, you must use the 'spawn' start method" when
#   `torch._C._cuda_isInBadFork()` is set; torch/csrc/cuda/Module.cpp sets it from a
#   pthread_atfork child handler registered at the first CUDA initialisation.
# * MPS: torch/csrc/mps/Module.cpp does the same (`forked_mps_child` sets `in_bad_fork` through
#   pthread_atfork, read by torch/mps/__init__.py `_is_in_bad_fork`); Metal itself is not fork-safe,
#   and a forked child that touches it hangs or crashes.
# * torch/multiprocessing's docs (multiprocessing.rst, "CUDA in multiprocessing") name "spawn" or
#   "forkserver" as the start methods that work.
#
# So no conform process that has touched the device ever forks a process that will touch it.
# Every process that runs device work (the device process of a worker, the one-shot child of an
# isolated cell, the timing pass's child) is a `CleanChild`, started by multiprocessing's
# "forkserver" method: the fork server is a freshly exec'd interpreter that never touches a
# device (it imports torch, opdb, generators and hypothesis and warms them up on the CPU, see
# conform.run.forkserver, which checks that no device got initialised), and each child is a fork
# of that server, so it starts clean in milliseconds whatever the process that asked for it has
# done. Where fork() does not exist (Windows), "spawn" gives the same guarantee, slower.
#
# A child that dies costs only itself: the parent sees the end of the pipe, reads the in-flight
# record the child wrote before each case (`Watchdog`), and records the case that killed it.

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
# imported once by the fork server, so that every child starts with them loaded and warm
PRELOAD = ["conform.run.forkserver"]
TIMEOUT_EXIT_STATUS = 75


def context():
    """The multiprocessing context of every process conform starts for device work."""
    ctx = multiprocessing.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        ctx.set_forkserver_preload(PRELOAD)  # takes effect when this process's server starts
    return ctx


SERVER_BACKEND_ENV = "CONFORM_FORKSERVER_BACKEND"
SERVER_WARM_DISPATCH_ENV = "CONFORM_FORKSERVER_WARM_DISPATCH"


def start_server(device_spec: str | None = None, *, warm_dispatch: bool = False) -> None:
    """Start this process's fork server now (in the background: it imports torch), so that the
    first child does not wait for it. With `device_spec`, the server also runs that backend's
    optional `fork_server_preload()` hook: loading a device library (an out-of-tree backend's
    extension) once, for every child, without initialising the device. With `warm_dispatch`, it
    also pays what the first dispatch mode and caller-drawn ops load (conform.run.forkserver):
    seconds that every one-shot child would pay again."""
    if START_METHOD == "forkserver":
        context()
        from multiprocessing import forkserver  # POSIX only

        if device_spec:
            os.environ[SERVER_BACKEND_ENV] = device_spec  # the server inherits it when it starts
        if warm_dispatch:
            os.environ[SERVER_WARM_DISPATCH_ENV] = "1"
        forkserver.ensure_running()


# -- clean children ------------------------------------------------------------------------


class IsolationError(Exception):
    """The clean child could not be started or set up: isolation failed, not the work it was
    given (the crash memory must not learn from it)."""


class ChildDied(Exception):
    """The child died while serving a request (a crash of the work itself)."""

    def __init__(self, exitcode: int | None):
        self.exitcode = exitcode
        how = (
            "no exit status"
            if exitcode is None
            else f"signal {-exitcode}"
            if exitcode < 0
            else f"exit status {exitcode}"
        )
        super().__init__(how)


class ChildTimedOut(Exception):
    """The child did not answer within the parent's limit, and was killed."""


def _serve(conn, setup: Callable, args: tuple) -> None:
    """A clean child's life: `handler = setup(*args)`, then answer requests until told to stop.
    Ctrl-C is its parent's to handle (it reaches the whole process group): a child that died of
    it would look like a crash of its case."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for name in PRELOAD:  # already loaded in a fork of the server; under spawn, loaded here
            importlib.import_module(name)
        handler = setup(*args)
    except BaseException:  # noqa: BLE001 - the parent reports it as an isolation failure
        conn.send(("setup-failed", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        try:
            conn.send(("ok", handler(request)))
        except BaseException:  # noqa: BLE001 - a bug of the handler: the parent decides
            conn.send(("error", traceback.format_exc()))


class CleanChild:
    """A process started clean (never forked from one that touched the device) that answers
    requests one at a time: `setup(*args)` runs once in the child and returns the handler.
    `setup` must be a module-level function and `args` picklable."""

    def __init__(self, setup: Callable, args: tuple = (), *, name: str = "conform-child", start_timeout: float = 300.0):
        self.setup, self.args, self.name, self.start_timeout = setup, args, name, start_timeout
        self.proc = None
        self.conn = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start the child and wait until its setup is done; IsolationError if it cannot."""
        self.close()
        try:
            ctx = context()
            self.conn, child_conn = ctx.Pipe()
            self.proc = ctx.Process(
                target=_serve, args=(child_conn, self.setup, self.args), daemon=True, name=self.name
            )
            self.proc.start()
            child_conn.close()
        except Exception as e:  # noqa: BLE001 - no child at all: the parent records why
            self.close()
            raise IsolationError(f"could not start a clean child process: {type(e).__name__}: {e}") from None
        try:
            reply = (
                self.conn.recv()
                if self.conn.poll(self.start_timeout)
                else ("setup-failed", f"no answer within {self.start_timeout:.0f} s")
            )
        except (EOFError, OSError):
            reply = ("setup-failed", f"it died while starting ({ChildDied(self._exitcode())})")
        if reply[0] != "ready":
            self.close()
            raise IsolationError(f"the clean child process failed to start: {str(reply[1]).strip().splitlines()[-1]}")

    def call(self, request: Any, timeout: float | None = None) -> Any:
        """The child's answer to `request`, starting the child first if needed. Raises
        IsolationError (could not start), ChildDied or ChildTimedOut (then the child is gone)."""
        if not self.alive:
            self.start()
        try:
            self.conn.send(request)
            deadline = None if timeout is None else time.monotonic() + timeout
            # waiting in slices: EOF arrives when the child dies, and the limit is checked
            while not self.conn.poll(1.0):
                if deadline is not None and time.monotonic() > deadline:
                    self.kill()
                    raise ChildTimedOut(f"no answer within {timeout:.0f} s")
                if not self.proc.is_alive():
                    break
            kind, value = self.conn.recv()
        except (EOFError, OSError):
            code = self._exitcode()
            self.close()
            raise ChildDied(code) from None
        if kind == "error":
            raise RuntimeError(f"the clean child's handler raised:\n{value}")
        return value

    def _exitcode(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.join(5)
        return self.proc.exitcode

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        self.close()

    def close(self) -> None:
        """Ask the child to end (it finishes its request first), then make sure it has."""
        if self.proc is not None:
            if self.proc.is_alive():
                try:
                    self.conn.send(None)
                except (OSError, ValueError):
                    pass
                self.proc.join(5)
                if self.proc.is_alive():
                    self.proc.kill()
                    self.proc.join(5)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None


# -- in-flight records and the hang watchdog -----------------------------------------------


# The run's list of ops that killed a device process, one a line (in the run's directory): their
# later cells run isolated, and the forms relation of their siblings is not held
CRASHED_OPS = "crashed-ops.txt"
# how a device process ends itself when the forms relation's functional poisoned its context
POISONED_EXIT_STATUS = 76


def op_base(qualname: str) -> str:
    """aten::native_batch_norm.out -> aten::native_batch_norm: overloads share their kernels,
    and so their crashes."""
    return qualname.split(".", 1)[0]


def crashed_ops(run_dir: Path) -> set[str]:
    """Base names of the ops that killed a device process in this run."""
    try:
        return {op_base(q) for q in (Path(run_dir) / CRASHED_OPS).read_text().split()}
    except OSError:
        return set()


@dataclass(frozen=True)
class InFlight:
    """What a device process is running: written before each case, read by its parent when the
    process dies (conform.plugin.died_result) and by the Monitor. Stored as JSON; the fields
    left at their defaults are not written."""

    op: str | None = None
    dtype: str | None = None
    case: dict | None = None  # the case's JSON (none while the generator draws)
    describe: str = ""  # the case in words
    passed: int = 0  # the cell's cases that passed before this one
    failed: bool = False  # one of them failed
    side: str = ""  # "device", "reference" or "golden": named where the device is not the CPU
    phase: str = ""  # "forward" or "backward", with the side
    functional: str = ""  # the functional overload the forms relation runs on the device, while it runs
    limit_s: float | None = None  # the case's time limit
    pid: int | None = None
    started: float | None = None  # time.time() when the case started
    timeout: bool = False  # a watchdog ended the case
    killed_at: float | None = None  # when the Monitor killed the process
    idle: bool = False  # no case in flight
    # what the cell had found when this case ran ({"failures": [...], "findings": [...]}: its
    # malformed arguments run last, conform.run.cell._malformed_last), kept if the process dies
    earlier: dict | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) != f.default}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InFlight:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def running(self, cell) -> bool:
        """Whether this record is a case of `cell` (op, dtype) still in flight."""
        return (self.op, self.dtype) == tuple(cell[:2]) and not self.idle


class Watchdog:
    """The in-flight record and hang watchdog of the process that runs cases.

    Before each case the process writes what it is about to run to a small JSON file. If it
    dies (segfault, abort), its parent reads that file and records the cell as `crash` with the
    case in flight. If a case runs past its time limit, this thread marks the file as a timeout
    and ends the process with os._exit: a kernel stuck in native code cannot be interrupted any
    other way."""

    def __init__(self, path: Path, limit_s: float):
        self.path = Path(path)
        self.limit_s = limit_s
        self._deadline: float | None = None
        self._record = InFlight()
        self._drawn: InFlight | None = None  # the armed case, while a variant of it runs
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = False
        # one descriptor, rewritten in place: a worker writes this record twice per case, and
        # open + write + rename each time was 8% of a sweep's cell time
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._thread = threading.Thread(target=self._watch, name="conform-watchdog", daemon=True)
        self._thread.start()

    def arm(self, record: InFlight) -> None:
        """A case is about to run: record it, and start its clock."""
        record = replace(record, limit_s=self.limit_s, pid=os.getpid(), started=time.time())
        _rewrite(self._fd, record)
        with self._lock:
            self._record, self._drawn = record, None
            idle, self._deadline = self._deadline is None, time.monotonic() + self.limit_s
        if idle:
            # a thread already watching a deadline looks again within a second and finds the
            # new one (later, never earlier); waking it for every case cost a thread switch each
            self._wake.set()

    def side(self, name: str, phase: str) -> None:
        """Which side of the armed case is about to run (conform.run.execute.on_side), so that a
        death there is told apart; rewritten only when it changes."""
        with self._lock:
            if self._deadline is None or (self._record.side, self._record.phase) == (name, phase):
                return
            self._record = record = replace(self._record, side=name, phase=phase)
        _rewrite(self._fd, record)

    def functional(self, qualname: str | None) -> None:
        """The forms relation runs `qualname` on the device (None: it is done), so that a death or
        a hang there is told apart as that functional's (conform.run.execute.on_functional)."""
        with self._lock:
            if self._deadline is None:
                return
            self._record = record = replace(self._record, functional=qualname or "")
        _rewrite(self._fd, record)

    def variant(self, case: dict | None, describe: str = "") -> None:
        """A variant of the armed case is about to run (an out= written through other strides:
        conform.run.execute.on_variant), so that a death there names the call that died and its
        script replays it; None: the armed case again. The clock runs on."""
        with self._lock:
            if self._deadline is None:
                return
            drawn = self._drawn or self._record
            if case is None:  # (the side and functional running now stay)
                record, self._drawn = replace(self._record, case=drawn.case, describe=drawn.describe), None
            else:
                record, self._drawn = replace(self._record, case=case, describe=describe), drawn
            self._record = record
        _rewrite(self._fd, record)

    def functional_poisoned(self, qualname: str, error: str) -> None:
        """The functional's error poisoned the device context: the process ends as the
        functional's failure (conform.run.execute.on_functional_poisoned); its parent replaces it."""
        with self._lock:
            record = replace(
                self._record,
                functional=qualname,
                describe=f"{self._record.describe}; its error poisoned the device context: {error}",
            )
        _rewrite(self._fd, record)
        os._exit(POISONED_EXIT_STATUS)

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None
            idle = InFlight(op=self._record.op, dtype=self._record.dtype, idle=True, pid=os.getpid())
        _rewrite(self._fd, idle)

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
                if self._deadline is None or self._deadline > time.monotonic():  # finished, or re-armed, just in time
                    continue
                record = replace(self._record, timeout=True)
            _rewrite(self._fd, record)
            os._exit(TIMEOUT_EXIT_STATUS)


def killed_for_time(exitcode: int | None) -> bool:
    """Whether a process's exit status is a hang's end: its own watchdog's exit, or SIGKILL
    (the monitor's, or the parent's)."""
    return exitcode in (TIMEOUT_EXIT_STATUS, -signal.SIGKILL)


def read_record(path: Path) -> InFlight | None:
    try:
        data = json.loads(Path(path).read_text())
        return InFlight.from_dict(data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def mark_idle(path: Path) -> None:
    """The parent has dealt with the death the record describes: it is no longer in flight
    (the monitor must not act on it, and a later crash report must not reuse it)."""
    record = read_record(path) or InFlight()
    _write(path, InFlight(op=record.op, dtype=record.dtype, idle=True))


class Monitor:
    """Controller side: kill a process whose case runs `grace_s` past its limit (its own watchdog
    could not act, e.g. a kernel holding the GIL). Its parent then records the cell as timeout."""

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
                record = read_record(path)
                # (a Watchdog's armed record holds its start and limit; anything else is not a case in flight)
                if not record or record.idle or record.timeout or record.started is None or record.limit_s is None:
                    continue
                if time.time() - record.started > record.limit_s + self.grace_s:
                    _write(path, replace(record, timeout=True, killed_at=time.time()))
                    _kill(record.pid)


def _kill(pid) -> None:
    try:
        os.kill(int(pid), signal.SIGKILL)
    except (OSError, TypeError, ValueError):
        pass


def _write(path: Path, record: InFlight) -> None:
    """A rewrite of another process's record: in place, like that process's own writes (a
    rename would leave it writing to an unlinked file)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        _rewrite(fd, record)
    finally:
        os.close(fd)


def _rewrite(fd: int, record: InFlight) -> None:
    """Rewrite a record in place. A reader that catches it half-written gets invalid JSON and
    reads again later (the monitor) or treats it as unknown (a crash report)."""
    data = _encoded(record).encode()
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


# The JSON of the last few cases and cell tallies a record held, by identity: a case's record is
# rewritten as each side and variant of it runs, and encoding its case again each time was a
# fiftieth of a sweep's work
_ENCODED: dict[int, tuple[Any, str]] = {}
_ENCODED_KEPT = 8
_LARGE_FIELDS = ("case", "earlier")


def _encoded(record: InFlight) -> str:
    parts = []
    for name, value in record.to_dict().items():
        if name in _LARGE_FIELDS:
            kept = _ENCODED.get(id(value))
            if kept is None or kept[0] is not value:
                if len(_ENCODED) >= _ENCODED_KEPT:
                    del _ENCODED[next(iter(_ENCODED))]
                kept = _ENCODED[id(value)] = (value, json.dumps(value))
            text = kept[1]
        else:
            text = json.dumps(value)
        parts.append(f"{json.dumps(name)}: {text}")
    return "{" + ", ".join(parts) + "}"


def apply_memory_limit(limit: int | None) -> None:
    """Cap this process's address space: a case over it fails to allocate and is recorded."""
    if not limit:
        return
    try:
        import resource  # POSIX only

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard == resource.RLIM_INFINITY else min(limit, hard), hard))
    except (ImportError, ValueError, OSError):  # not on this OS: the element cap still holds
        pass

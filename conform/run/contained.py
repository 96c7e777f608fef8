"""Calls that may kill their process or never end, made in a disposable fork first.

The malformed-argument contract (conform.run.execute.run_malformed) calls an op with arguments its
contract does not allow: shapes that no longer fit, integers at int64's extremes, index tensors
whose every element is out of range. Most of them raise. A kernel that trusts them indexes past
what it checked and the process dies; one that loops over an extreme count never ends, and one
that sizes a result by it allocates until the address-space cap refuses. Only the death is a bug
(the op must raise or compute, never kill its caller); a long loop over 2**63 - 1 terms is the
caller's choice.

So the calls run first in a `Disposable`: a fork of the cell's process, made once and kept, which
runs the calls it is sent one after another and says which one it is about to start. Its death
names the call that killed it; a call that runs past its time is a hang, and the fork is killed
and replaced, that call skipped. The caller then makes the fatal call again in its own process
(conform.run.execute.run_malformed), where the in-flight record names it, so that the cell is a
crash whose script replays it, and a death that does not happen again there (a heap corrupted
by an earlier call) is not recorded.

Fork safety (conform.run.isolation's rule: no process that touched a device forks one that will
touch it): a `Disposable` is made on the plain CPU only, where no device runtime exists; it
inherits the cell process's address-space cap (conform.run.isolation.apply_memory_limit, or its
own where that process has none) and one intra-op thread, so no OpenMP pool is forked.
"""

from __future__ import annotations

import ctypes
import faulthandler
import json
import os
import signal
import socket
import struct

# whether this system can fork (not on Windows: there the numbers are not tried)
AVAILABLE = hasattr(os, "fork")

# how long one call may run before it counts as a hang (cases are small: a call takes well under
# a millisecond). A longer one is skipped, not judged: a loop over 2**63 - 1 terms (matrix_power,
# a string padded to that width) costs this much each, 17 of them in a float32 sweep
CALL_TIMEOUT_S = 1.0


def _send(sock: socket.socket, message) -> None:
    data = json.dumps(message).encode()
    sock.sendall(struct.pack("!I", len(data)) + data)


def _receive(sock: socket.socket):
    """The next message, or None at the end of the connection (the other side is gone)."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    body = _read_exactly(sock, struct.unpack("!I", head)[0])
    return None if body is None else json.loads(body)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = b""
    while len(chunks) < n:
        try:
            chunk = sock.recv(n - len(chunks))
        except TimeoutError:
            raise
        except OSError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return chunks


def _die_with_parent() -> None:
    """Linux: the fork is killed when the cell's process dies (a fork in a long call would
    otherwise outlive it). Elsewhere the fork ends at the end of its connection."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _quiet_death() -> None:
    """The fork's death is expected and told by its parent: no fault handler's traceback and no
    C library's message of its own on the terminal (the fork's stderr goes nowhere)."""
    faulthandler.disable()
    os.environ["LIBC_FATAL_STDERR_"] = "1"
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


# the address space the fork may add to its own at the fork where its process had no cap
# (--memory-limit none): a size computed from an extreme is refused there, never met by the
# system's out-of-memory killer
UNCAPPED_HEADROOM = 2 << 30


def _capped() -> None:
    try:
        import resource  # POSIX only

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            with open("/proc/self/statm") as f:  # Linux: the address space in pages, first
                size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (size + UNCAPPED_HEADROOM, hard))
    except (ImportError, OSError, ValueError):  # elsewhere: the process's own cap, if any
        pass


class Disposable:
    """A fork of this process that makes calls for it (see the module's docstring). `call` is
    what a request (a JSON-able value) runs: call(request) for each request sent, in the fork;
    `setup()` runs there first (the fork has only the thread that made it: what other threads
    hold, such as a watchdog's lock, must not be waited for there)."""

    def __init__(self, call, setup=lambda: None, timeout_s: float = CALL_TIMEOUT_S):
        self._call, self._setup, self.timeout_s = call, setup, timeout_s
        self._pid: int | None = None
        self._sock: socket.socket | None = None
        self._owner = os.getpid()

    def run(self, requests: list) -> tuple[int | None, int]:
        """Make each call in turn, in the fork; (index of the first call that killed it or None,
        how many calls hung and were skipped). Calls after a fatal one are not made."""
        hung, i = 0, 0
        while i < len(requests):
            sock = self._connection()
            _send(sock, requests[i:])
            while True:
                sock.settimeout(self.timeout_s)  # for each call
                try:
                    message = _receive(sock)
                except TimeoutError:
                    self.close()  # call i hangs: skipped, the rest in a new fork
                    hung, i = hung + 1, i + 1
                    break
                if message == "ok":
                    i += 1
                elif message == "done":
                    break
                else:  # the end of the connection: the fork died in call i
                    if _signalled(self._reap()):
                        return i, hung
                    i += 1  # it exited (a call that ended the interpreter): no death by a signal
                    break
        return None, hung

    def _connection(self) -> socket.socket:
        if self._pid is not None and self._owner == os.getpid():
            return self._sock
        self._owner = os.getpid()
        parent, child = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the fork: serve until the connection ends
            parent.close()
            status = 0
            try:
                _die_with_parent()
                _quiet_death()
                _capped()
                self._setup()
                self._serve(child)
            except BaseException:  # noqa: BLE001 - the fork never returns into its parent's code
                status = 1
            finally:
                os._exit(status)
        child.close()
        self._pid, self._sock = pid, parent
        return parent

    def _serve(self, sock: socket.socket) -> None:
        while (requests := _receive(sock)) is not None:
            for request in requests:
                try:
                    self._call(request)
                except Exception:  # noqa: BLE001 - a call that raises is a call that returned
                    pass
                _send(sock, "ok")
            _send(sock, "done")

    def _reap(self) -> int | None:
        pid, self._pid = self._pid, None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if pid is None:
            return None
        try:
            return os.waitpid(pid, 0)[1]
        except ChildProcessError:
            return None

    def close(self) -> None:
        """Kill the fork (if any) and wait for it."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._reap()


def _signalled(status: int | None) -> bool:
    """A death by a signal of the kernel's own (SIGSEGV, SIGFPE, SIGBUS, SIGILL, SIGABRT...), not
    one that ends a process from outside (SIGKILL: the address-space cap's OOM or a watchdog)."""
    return status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) not in (signal.SIGKILL,)

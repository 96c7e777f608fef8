"""Ctrl-C that is never lost.

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread happens to be. Raised
inside a garbage-collector callback (hypothesis installs one) or a `__del__`, it is printed as
"Exception ignored" and dropped, and a sweep would go on as if no one had pressed Ctrl-C. The
handler here raises it again after a collector callback, and also notes the interrupt, so that
the controller finds one lost elsewhere at its next checkpoint;
and while the controller writes to the store (`held()`) it only notes it: a write cut in half can
leave its transaction open, and the run's final state could then not be written.
"""

# While the controller starts its workers, SIGINT is blocked (`block()`): a blocked signal stays
# blocked in a child process, so that a worker that is still importing torch when Ctrl-C comes does
# not die with a traceback; each worker unblocks it once its pytest is configured, and the
# interrupt then ends it the ordinary way.

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import threading

_state = {"seen": False, "raised": False, "held": 0, "installed": False, "outer": ()}


def _on_sigint(signum, frame):
    _state["seen"] = True
    if _state["held"] or _state["raised"]:
        return  # one KeyboardInterrupt stops a process; more would only land in its shutdown
    if _in_gc_callback(frame) or _in_source_string(frame):
        # raised here it would be dropped, or leave the process to die by SIGINT at exit: deliver
        # it again once the main thread is out of there (unless a checkpoint raised it meanwhile)
        again = threading.Timer(0.05, _again)
        again.daemon = True
        again.start()
        return
    _state["raised"] = True
    raise KeyboardInterrupt


def _again() -> None:
    if not _state["raised"]:
        os.kill(os.getpid(), signal.SIGINT)


def _in_gc_callback(frame) -> bool:
    codes = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in codes:
            return True
        frame = frame.f_back
    return False


def _in_source_string(frame) -> bool:
    """Whether the main thread is running code that exec() or eval() compiled from a string
    (dataclasses and namedtuple build their methods so, many times while torch is imported).
    A KeyboardInterrupt that leaves such code sets CPython's "unhandled KeyboardInterrupt" flag
    even when it is caught later, and `python -m conform.cli` then ends by SIGINT after its
    `sys.exit(130)`: builtin exec/eval of a str go through PyRun_StringFlags -> run_eval_code_obj,
    which sets the flag, and Py_RunMain, once the interpreter is finalized, re-raises SIGINT with
    the default action (CPython 3.11 Python/pythonrun.c, Python/bltinmodule.c, Modules/main.c;
    later versions only clear it at start-up: python/cpython#129975). Only the frames below
    the one that took SIGINT over count: `python -c`, and execnet's bootstrap of an xdist
    worker, run everything under such a frame, and there the KeyboardInterrupt is caught first."""
    outer = _state["outer"]
    while frame is not None and frame not in outer:
        if frame.f_code.co_filename == "<string>":
            return True
        frame = frame.f_back
    return False


def _frames(frame) -> tuple:
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return tuple(out)


def install() -> None:
    """Take over SIGINT (idempotent; a no-op off the main thread, where Python cannot), and let
    in one that is blocked: a process started with SIGINT blocked (an xdist worker, see block())
    gets an interrupt that came while the interpreter started as a noted one, not as a
    KeyboardInterrupt in the middle of its imports."""
    if _state["installed"]:
        return
    try:
        signal.signal(signal.SIGINT, _on_sigint)
        _state["installed"] = True
        _state["outer"] = _frames(sys._getframe(1))
    except ValueError:
        return
    unblock()


def seen() -> bool:
    """Whether SIGINT came since `install()`, raised or not."""
    return _state["seen"]


def check(*, held_too: bool = False) -> None:
    """A checkpoint: raise the KeyboardInterrupt of a SIGINT that was held or swallowed (inside
    a held block too with `held_too`: where the holder catches it, before anything is written)."""
    if _state["seen"] and (held_too or not _state["held"]):
        _state["raised"] = True  # (a SIGINT still to be delivered again would be a second one)
        raise KeyboardInterrupt


@contextlib.contextmanager
def held(*, deliver: bool = True):
    """Code that must complete: an interrupt meanwhile is only noted. With `deliver`, it is
    raised when the outermost held block ends without an error of its own; without, the caller
    looks at `seen()` itself (at a checkpoint of its choosing)."""
    _state["held"] += 1
    try:
        yield
    finally:
        _state["held"] -= 1
    if deliver:
        check()


@contextlib.contextmanager
def importing():
    """Imports that load torch: an interrupt meanwhile is noted and raised once they are done. A
    KeyboardInterrupt raised inside torch's import leaves its C++ half initialised, and the
    interpreter's teardown then aborts ("terminate called after throwing an instance of
    'python_error'", status -6) instead of ending with 130."""
    with held(deliver=False):
        yield
    check()


def block() -> None:
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def unblock() -> None:
    """Let SIGINT in; one that came while blocked is delivered now (noted, as held() is on)."""
    if hasattr(signal, "pthread_sigmask"):
        with held(deliver=False):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def release() -> None:
    """Plain KeyboardInterrupt again from here on (once the run's final state is written)."""
    unblock()
    _state["held"] = 0
    _state["installed"] = False
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass

"""conform's pytest plugin: one test item per (op, dtype) cell, driven by pytest-xdist.

Roles:
* the **controller** (the pytest process you start; with -n 0 also the only worker) resolves the
  backend, selects ops, opens the store, starts or resumes the run, writes the plan of cells,
  and is the only process that writes results;
* **workers** read the plan and the settings from `workerinput`, run cells, and send each
  result back in `report.user_properties` as ("conform", dict). A worker never touches the
  device: its cells run in clean child processes (conform.isolation, `WorkerContext`).

A device process that dies (segfault, abort, our own hang watchdog) or whose device context an
error poisoned is replaced by its worker, which records the cell as `crash`, `timeout` or
`device_error`, with the case that was in flight, read from the file the process wrote before
running it. Should a worker itself die, xdist replaces it and the controller records its cell
from the same file.

Active only when the collected tests include `conform.suite` (`conform run` does that, and so
does `pytest --pyargs conform.suite`); the project's other test runs are untouched.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from pathlib import Path

import pytest

from . import __version__, interrupts
from .cell import CellResult, CellSettings, cell_process
from .errors import ConformError
from .outcomes import Outcome

# int32 as well as int64: MPS lacks int64 in places, and integer promotion bugs show on int32
DEFAULT_DTYPES = ("float32", "float16", "bfloat16", "float64", "complex64", "int64", "int32", "bool")
# On the CPU the reference is float64 itself, so a float64 cell would compare a computation with
# itself: it is left out of the CPU's default set (name it in --dtypes to run it anyway).
CPU_DEFAULT_DTYPES = tuple(d for d in DEFAULT_DTYPES if d != "float64")
PROPERTY = "conform"


def pytest_addoption(parser):
    g = parser.getgroup("conform", "conform: op conformance of a PyTorch backend")
    g.addoption("--conform-device", default=None, help="device under test: cpu, mps, cuda[:N], xpu, meta, an entry point of group conform.backends, or module:attr (default: best available accelerator, else cpu against float64 golden)")
    g.addoption("--conform-ops", default="all", help="ops: all, core, family:NAME, comma list, globs (add*), or @file (default: all)")
    g.addoption("--conform-dtypes", default=None, help=f"comma-separated dtypes (default: {','.join(DEFAULT_DTYPES)}; without float64 on the cpu backend, whose reference is float64)")
    g.addoption("--conform-examples", type=int, default=CellSettings.examples, help=f"valid hypothesis examples per cell (default: {CellSettings.examples})")
    g.addoption("--conform-seed", type=int, default=None, help="run seed, recorded with the run (default: random)")
    g.addoption("--conform-derandomize", action="store_true", default=False, help="derive every cell's examples from the op name alone (gating runs)")
    g.addoption("--conform-db", default=None, help="SQLite path or SQLAlchemy URL (default: conform.db or $CONFORM_DB)")
    g.addoption("--conform-no-grad", action="store_true", default=False, help="skip backward comparisons (default: compare gradients)")
    g.addoption("--conform-max-numel", type=int, default=CellSettings.max_numel, help=f"elements per case, all tensors together (default: {CellSettings.max_numel})")
    g.addoption("--conform-case-timeout", type=float, default=60.0, help="seconds one case may run before it counts as a hang (default: 60)")
    g.addoption("--conform-cell-budget", type=float, default=CellSettings.cell_budget_s, help=f"seconds of example generation per cell (default: {CellSettings.cell_budget_s})")
    g.addoption("--conform-memory-limit", default="auto", metavar="GiB|auto|none", help="address-space cap per worker; a case over it fails to allocate and is recorded, the worker lives on (default: auto = 4 GiB on cpu/meta, none on GPUs, whose drivers reserve large address ranges)")
    g.addoption("--conform-resume", default=None, metavar="RUN_ID|latest", help="continue a run: only cells it has not recorded yet run")
    g.addoption("--conform-workdir", default=".conform", help="folder for the hypothesis example database and per-run files (default: .conform)")
    g.addoption("--conform-progress", action="store_true", default=False, help="show a progress bar (conform run turns it on)")


def _is_conform_session(config) -> bool:
    if hasattr(config, "workerinput"):
        return "conform" in config.workerinput
    suite = str(Path(__file__).parent / "suite")
    return any(a.split("::")[0].startswith(("conform.suite", suite)) for a in config.invocation_params.args)


# -- controller ------------------------------------------------------------------------------


class Controller:
    """The controller's state: the store, the run, the plan, the progress bar."""

    def __init__(self, config):
        # Ctrl-C is taken over first: from here on a run may exist in the store, and it must end
        # `interrupted` whatever moment the interrupt lands (conform.interrupts)
        interrupts.install()
        self.finished = False
        interrupts.check()  # an interrupt swallowed before: no run is started
        # the run, its catalog and plan are written whole, and the workers start, before an
        # interrupt takes effect: in pytest_runtestloop, before the first cell
        interrupts.block()  # (per thread: a thread that does not block it may still take it)
        try:
            with interrupts.held(deliver=False):
                self._start(config)
        except BaseException:
            interrupts.unblock()
            raise

    @property
    def interrupted(self) -> bool:
        return interrupts.seen()

    def _start(self, config):
        from opdb import UnknownOpError

        from . import backends, environment, selection
        from .store import Store

        opt = config.getoption
        self.config = config
        self.run_id = None
        self.store = Store(opt("conform_db"))
        workdir = Path(opt("conform_workdir"))
        resume = opt("conform_resume")
        if resume:
            run_id = self.store.latest_run_id() if resume == "latest" else int(resume)
            run = self.store.get_run(run_id) if run_id else None
            if run is None:
                raise ConformError(f"no run {resume} to resume in {self.store.where}")
            options = dict(run.options)
            self.seed = run.seed
        else:
            options = {
                "device": opt("conform_device"),
                "ops": opt("conform_ops"),
                "dtypes": opt("conform_dtypes"),
                "examples": opt("conform_examples"),
                "grad": not opt("conform_no_grad"),
                "max_numel": opt("conform_max_numel"),
                "case_timeout": opt("conform_case_timeout"),
                "cell_budget": opt("conform_cell_budget"),
                "derandomize": opt("conform_derandomize"),
            }
            self.seed = opt("conform_seed") if opt("conform_seed") is not None else random.randrange(2**31)
        self.options = options
        self.backend = backends.resolve(options["device"])
        try:
            ops = selection.select_ops(options["ops"])
        except UnknownOpError as e:
            raise ConformError(str(e)) from None
        if options["dtypes"] is None:
            from .execute import is_plain_cpu

            # (a third-party backend on the cpu device computes its own float64: it keeps it)
            options["dtypes"] = ",".join(CPU_DEFAULT_DTYPES if is_plain_cpu(self.backend) else DEFAULT_DTYPES)
        dtypes = selection.parse_dtypes(options["dtypes"])
        cells = selection.plan_cells(ops, dtypes)
        import opdb

        catalog = opdb.catalog()
        self.planned = len(cells)
        if resume:
            self.run_id = run_id
            done = self.store.recorded_cells(run_id)
            cells = [c for c in cells if c not in done]
            self.store.set_run_state(run_id, "running")
        else:
            env = environment.capture(self.backend)
            self.run_id = self.store.start_run(
                env, options=options, seed=self.seed, ops_total=len(catalog), cells_planned=len(cells), conform_version=__version__
            )
            self.store.record_catalog(self.run_id, catalog)
        self.cells = cells
        self.rundir = workdir / "runs" / f"{self.store.engine.url.database and Path(str(self.store.engine.url.database)).stem or 'db'}-{self.run_id}"
        (self.rundir / "inflight").mkdir(parents=True, exist_ok=True)
        self.plan_path = self.rundir / "plan.json"
        self.plan_path.write_text(json.dumps([list(c) for c in cells]))
        # ops that crashed a process in an earlier run on this torch and device run isolated from
        # the start, each cell in a fresh clean process
        self.crashers_path = workdir / re.sub(r"[^\w.-]", "_", f"crashers-{_torch_version()}-{self.backend.name}.txt")
        known = _read_lines(self.crashers_path)
        if known:
            with open(self.rundir / CRASHED_OPS, "a") as f:
                f.write("".join(q + "\n" for q in sorted(known)))
        self.settings = CellSettings(
            examples=options["examples"],
            grad=options["grad"],
            seed=self.seed,
            max_numel=options["max_numel"],
            cell_budget_s=options.get("cell_budget", CellSettings.cell_budget_s),
            hypothesis_db=str(workdir / "hypothesis"),
            derandomize=options.get("derandomize", False),
        )
        self.case_timeout = float(options.get("case_timeout", 60.0))
        self.memory_limit = _memory_limit_bytes(opt("conform_memory_limit"), self.backend)
        from .isolation import Monitor

        self.monitor = Monitor(self.rundir / "inflight")
        self.counts: dict[str, int] = {}
        self.stored = 0  # cells of the run in the store, this session's and earlier ones'
        self.state = "running"
        self.fatal = ""
        self.session = None
        self.recorded = 0
        self.progress = None
        if opt("conform_progress"):
            from tqdm import tqdm

            self.progress = tqdm(total=len(cells), unit="cell", dynamic_ncols=True, file=sys.stderr, smoothing=0.05)

    def workerinput(self) -> dict:
        return {
            "conform": True,
            "conform_plan": str(self.plan_path),
            "conform_rundir": str(self.rundir),
            "conform_device": self.options["device"],
            "conform_device_name": self.backend.name,  # what --device chose (repro scripts name it)
            "conform_settings": self.settings.to_dict(),
            "conform_case_timeout": self.case_timeout,
            "conform_memory_limit": self.memory_limit,
            "conform_crashers": str(self.crashers_path),
        }

    def record(self, result: dict) -> None:
        with interrupts.held():  # the result whole, then the interrupt
            self._record(result)

    def _record(self, result: dict) -> None:
        if self.fatal or self.finished:
            return
        try:
            stored = self.store.record_result(self.run_id, result)
        except ConformError as e:
            # the store cannot take more (disk full, database gone read-only): stop the run
            # cleanly; every cell recorded so far is intact, and --resume continues later
            self.fatal = str(e)
            if self.session is not None:
                self.session.shouldstop = self.fatal
            return
        if stored:
            self.recorded += 1
            self.counts[result["outcome"]] = self.counts.get(result["outcome"], 0) + 1
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix_str(f"{result['op'].split('::')[-1]}[{result['dtype']}]", refresh=False)

    def crash_result(self, report) -> dict:
        """The result of a cell whose worker died: `crash`, or `timeout` if a watchdog killed it.
        Not remembered as the op's crash: workers run no device work themselves (their clean
        device processes do, and a worker remembers the crashes of those)."""
        from .isolation import read_record

        cell = _cell_of_nodeid(report.nodeid)
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "") or "main"
        # the repro names the device tested, also when it was chosen automatically
        return died_result(cell, read_record(self.rundir / "inflight" / f"{worker}.json"), self.options["device"] or self.backend.name, f"({report.longrepr})")

    def finish(self, exitstatus) -> None:
        """Store the run's final state once (from pytest_sessionfinish, or from
        pytest_unconfigure when an interrupt ended the session before it began). `finished`
        only when no interrupt came and every planned cell is stored; `stored` and `counts` are
        read back from the store, so they are exact however the run ended."""
        if self.finished:
            return
        self.finished = True
        self.state = "interrupted"
        with interrupts.held(deliver=False):  # a second Ctrl-C must not cut the final state in half
            self.monitor.stop()
            if self.progress is not None:
                self.progress.close()
            try:
                done = self.store.recorded_cells(self.run_id)
                if not (self.interrupted or self.fatal or exitstatus == pytest.ExitCode.INTERRUPTED) and all(c in done for c in self.cells):
                    self.state = "finished"
                self.store.set_run_state(self.run_id, self.state)
                self.stored, self.counts = len(done), self.store.outcome_counts(self.run_id)
            except ConformError as e:
                self.fatal = self.fatal or str(e)
        interrupts.release()  # Ctrl-C now ends whatever follows (pytest's shutdown, the timing pass)


CRASHED_OPS = "crashed-ops.txt"


def _torch_version() -> str:
    import torch

    return torch.__version__


def _read_lines(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _isolated(qualname: str) -> bool:
    """opdb knows the op kills the process on some inputs (opdb/rules/isolate.toml)."""
    import opdb

    try:
        return bool((opdb.lookup(qualname).rules.hints or {}).get("isolate"))
    except opdb.UnknownOpError:  # an op of another catalog: the run's crash list still applies
        return False


def _op_base(qualname: str) -> str:
    """aten::native_batch_norm.out -> aten::native_batch_norm: overloads share their kernels,
    and so their crashes."""
    return qualname.split(".", 1)[0]


def died_result(cell, inflight: dict | None, device: str | None, detail: str = "") -> dict:
    """A cell whose process died: `crash`, or `timeout` when the in-flight record says a watchdog
    ended it, with the case that was running."""
    r = CellResult(op=cell[0], dtype=cell[1], outcome=Outcome.CRASH.value)
    if inflight and (inflight.get("op"), inflight.get("dtype")) == tuple(cell) and not inflight.get("idle"):
        r.case = inflight.get("case")
        desc = inflight.get("describe", "")
        if inflight.get("timeout"):
            r.outcome = Outcome.TIMEOUT.value
            r.message = f"case did not finish within {inflight.get('limit_s')} s: {desc}"
        else:
            r.message = f"the process died while running {desc}"
        if r.case is not None:  # (none when the process hung while drawing a case)
            r.examples_run = 1
            # the case's own op: the functional an out= cell's generator was running, if that died
            r.repro = _repro_from_json(r.case.get("op") or cell[0], r.case, device or "auto")
    else:
        r.message = f"the process died {detail} before its case was recorded".replace("  ", " ")
    return r.to_dict()


def _repro_from_json(op_name: str, case_json: dict, device: str) -> str:
    try:
        import opdb
        from generators.case import Case

        from .repro import repro_script

        return repro_script(opdb.lookup(op_name), Case.from_json(case_json), device)
    except Exception:
        return ""


def _cell_of_nodeid(nodeid: str) -> tuple[str, str]:
    ident = nodeid[nodeid.index("[") + 1 : nodeid.rindex("]")]
    short, dtype = ident.rsplit("/", 1)
    return f"aten::{short}", dtype


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config._conform = None
    config._conform_worker = None
    if not _is_conform_session(config):
        return
    if hasattr(config, "workerinput"):
        interrupts.install()  # a Ctrl-C never dropped in a collector callback
        interrupts.unblock()  # blocked by the controller while it started this worker
        interrupts.check()
        return
    try:
        config._conform = Controller(config)
    except ConformError as e:
        raise pytest.UsageError(str(e)) from None


def pytest_configure_node(node):
    """xdist hook (controller side): what each worker needs to run cells."""
    controller = node.config._conform
    if controller is not None:
        node.workerinput.update(controller.workerinput())


def pytest_xdist_auto_num_workers(config):
    return os.cpu_count() or 1


# -- workers ---------------------------------------------------------------------------------


def _memory_limit_bytes(value: str, backend) -> int | None:
    if value in ("none", "0", None):
        return None
    if value == "auto":
        return 4 << 30 if backend.device.type in ("cpu", "meta") else None
    try:
        return int(float(value) * (1 << 30))
    except ValueError:
        raise ConformError(f"--memory-limit takes GiB, 'auto' or 'none', not {value!r}") from None


class WorkerContext:
    """A worker's side of running cells. The worker itself never touches the device: each cell
    runs in a clean child process (conform.isolation), the worker's long-lived device process for
    most cells and a fresh one per cell for ops that are known to kill processes (opdb's isolate
    rules, and ops that crashed earlier). A crash, a hang or a poisoned device context costs that
    process only; the worker records the cell and goes on, so xdist never blames another cell."""

    def __init__(self, winput: dict, worker_id: str):
        from .isolation import CleanChild, start_server

        start_server(winput["conform_device"])  # it imports in the background
        self.rundir = Path(winput["conform_rundir"]).absolute()
        self.inflight = self.rundir / "inflight" / f"{worker_id}.json"
        self.device_spec = winput["conform_device"]
        self.device_name = winput.get("conform_device_name") or self.device_spec  # for repro scripts
        self.crashers_path = winput.get("conform_crashers") and Path(winput["conform_crashers"]).absolute()
        self.child_args = (self.device_spec, winput["conform_settings"], str(self.inflight), float(winput["conform_case_timeout"]), winput.get("conform_memory_limit"))
        self.name = f"conform-device-{worker_id}"
        self.device = CleanChild(cell_process, self.child_args, name=self.name)
        self._crashed_mtime = None
        self._crashed: set[str] = set()

    def run(self, cell) -> dict:
        from .isolation import CleanChild

        if _op_base(cell[0]) in self._crashed_ops() or _isolated(cell[0]):
            # a process that has not touched the device before this cell, ended after it
            once = CleanChild(cell_process, self.child_args, name=f"{self.name}-isolated")
            try:
                return self._run_in(once, cell)
            finally:
                once.close()
        return self._run_in(self.device, cell)

    def _run_in(self, child, cell) -> dict:
        from .isolation import ChildDied, IsolationError, killed_for_time, mark_idle, read_record

        try:
            result, poisoned = child.call(tuple(cell))
        except IsolationError as e:
            # isolation failed, not the op: recorded as conform's own error, never remembered
            r = CellResult(op=cell[0], dtype=cell[1], message=f"conform internal error: {e}")
            return r.to_dict()
        except ChildDied as e:
            inflight = read_record(self.inflight)
            mark_idle(self.inflight)
            if inflight and inflight.get("timeout") and not killed_for_time(e.exitcode):
                # it died of its own (an abort still dumping core when the monitor looked)
                inflight = {k: v for k, v in inflight.items() if k != "timeout"}
            if child is self.device and _in_case(inflight, cell):
                # the op's own case killed the shared process (not its start-up, not isolation):
                # its later cells run isolated
                self._remember_crash(cell[0])
            return died_result(cell, inflight, self.device_name, f"({e})")
        if poisoned:
            child.kill()  # a fresh device process serves the next cell
        return result

    def _remember_crash(self, qualname: str) -> None:
        """Later cells of the op run isolated (this run's list) and so do the next runs' (the
        crashers file of this torch and device)."""
        for path in (self.rundir / CRASHED_OPS, self.crashers_path):
            if not path:
                continue
            try:
                with open(path, "a") as f:
                    f.write(qualname + "\n")
            except OSError:  # the memory across runs is an optimisation; the run's own list is not
                if path != self.crashers_path:
                    raise

    def _crashed_ops(self) -> set[str]:
        """Base names of the ops that crashed a process in this run (or an earlier one)."""
        path = self.rundir / CRASHED_OPS
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return set()
        if mtime != self._crashed_mtime:
            self._crashed_mtime = mtime
            self._crashed = {_op_base(q) for q in _read_lines(path)}
        return self._crashed

    def close(self) -> None:
        self.device.close()


def _in_case(inflight: dict | None, cell) -> bool:
    return bool(inflight) and (inflight.get("op"), inflight.get("dtype")) == tuple(cell) and not inflight.get("idle")


def _worker_context(config) -> WorkerContext:
    if config._conform_worker is None:
        if hasattr(config, "workerinput"):
            winput, wid = config.workerinput, config.workerinput.get("workerid", "gw")
        else:
            winput, wid = config._conform.workerinput(), "main"
        config._conform_worker = WorkerContext(winput, wid)
    return config._conform_worker


def pytest_generate_tests(metafunc):
    if "conform_cell" not in metafunc.fixturenames:
        return
    config = metafunc.config
    if hasattr(config, "workerinput"):
        cells = [tuple(c) for c in json.loads(Path(config.workerinput["conform_plan"]).read_text())]
    elif config._conform is not None:
        cells = config._conform.cells
    else:
        cells = []
    metafunc.parametrize("conform_cell", cells, ids=[f"{op.split('::', 1)[1]}/{dt}" for op, dt in cells])


@pytest.fixture
def conform_context(request):
    return _worker_context(request.config)


def pytest_collection_modifyitems(session, config, items):
    if _is_conform_session(config) and not items:
        # every requested cell is already recorded (a finished run resumed): nothing to do
        pass


def pytest_runtest_logreport(report):
    config = _CONFIG.get("config")
    controller = getattr(config, "_conform", None) if config else None
    if controller is None:
        return
    props = dict((k, v) for k, v in report.user_properties if k == PROPERTY) if report.user_properties else {}
    if PROPERTY in props and report.when == "call":
        controller.record(props[PROPERTY])
    elif report.when == "???" or (report.failed and report.when == "call" and PROPERTY not in props):
        # after Ctrl-C a worker that stops mid-cell looks like a crash to xdist: the cell was
        # interrupted, not crashed, and `--resume` runs it again
        if not controller.interrupted:
            controller.record(controller.crash_result(report))
    elif report.failed and report.when == "setup":
        cell = _cell_of_nodeid(report.nodeid)
        r = CellResult(op=cell[0], dtype=cell[1], message=f"conform internal error in setup: {str(report.longrepr).strip().splitlines()[-1]}")
        controller.record(r.to_dict())


_CONFIG: dict = {}


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session):
    _CONFIG["config"] = session.config
    if getattr(session.config, "_conform", None) is not None:
        session.config._conform.session = session


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """An interrupt that came during start-up (held until the run was fully written) stops the
    session here, before any cell runs, through pytest's own path for Ctrl-C."""
    if getattr(session.config, "_conform", None) is not None:
        interrupts.unblock()
        interrupts.check()


def pytest_sessionfinish(session, exitstatus):
    controller = getattr(session.config, "_conform", None)
    if controller is not None:
        controller.finish(exitstatus)


def pytest_unconfigure(config):
    worker = getattr(config, "_conform_worker", None)
    if worker is not None:
        worker.close()
    if hasattr(config, "workerinput") and _is_conform_session(config):
        # an xdist worker with its cells done: a Ctrl-C to the process group is the controller's
        # to handle, and here it would only land in the interpreter's teardown (torch.library's
        # atexit finalizers) and print a traceback over the run's last lines
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)
    controller = getattr(config, "_conform", None)
    if controller is not None:
        controller.finish(pytest.ExitCode.INTERRUPTED)  # no-op unless the session never finished
        controller.store.close()

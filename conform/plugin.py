"""conform's pytest plugin: one test item per (op, dtype) cell, driven by pytest-xdist.

Loaded only where it is asked for: `conform run` passes `-p conform.plugin`, and so does
`pytest -p conform.plugin --pyargs conform.suite`; it has no pytest11 entry point, so it never
joins another project's pytest sessions. Each hook also returns at once outside a conform session.
"""

# Roles:
# * the **controller** (the pytest process you start; with -n 0 also the only worker) is the
#   `Controller` plugin object, registered as "conform-controller": it resolves the backend,
#   selects ops, opens the store, starts or resumes the run, writes the plan of cells, and is the
#   only process that writes results. `conform run` builds it from a `conform.config.RunConfig`
#   and passes it to pytest; under plain pytest, `pytest_configure` builds it from the
#   `--conform-*` options;
# * **workers** get a `conform.config.WorkerSetup` through `workerinput`, run cells, and send each
#   `conform.results.CellResult` back in `report.user_properties` as ("conform", its to_json() as JSON text).
#   A worker never touches the device: its cells run in clean child processes
#   (conform.run.isolation, `WorkerContext`).
#
# A device process that dies (segfault, abort, our own hang watchdog) or whose device context an
# error poisoned is replaced by its worker, which records the cell as `crash`, `timeout` or
# `device_error`, with the case that was in flight, read from the file the process wrote before
# running it. Should a worker itself die, xdist replaces it and the controller records its cell
# from the same file.

from __future__ import annotations

import dataclasses
import functools
import json
import random
import re
import signal
import sys
import types
from pathlib import Path

import pytest
import torch
from tqdm import tqdm

import opdb
from conform import __version__, backends, environment
from conform.config import AUTO_CASE_TIMEOUT_S, CPU_DEFAULT_DTYPES, DEFAULT_DTYPES, CellSettings, RunConfig, WorkerSetup
from conform.errors import ConformError
from conform.judge.outcome import of_death, of_reference_death, reference_death
from conform.judge.verdict import REFERENCE, Finding
from conform.outcomes import Outcome
from conform.report.repro import repro_script
from conform.results import CellResult
from conform.run import interrupts, selection
from conform.run.cell import cell_process
from conform.run.execute import is_plain_cpu
from conform.run.isolation import (
    CRASHED_OPS,
    POISONED_EXIT_STATUS,
    ChildDied,
    CleanChild,
    InFlight,
    IsolationError,
    Monitor,
    killed_for_time,
    mark_idle,
    op_base,
    read_record,
    start_server,
)
from conform.store import Store
from generators.case import Case
from opdb import UnknownOpError

PROPERTY = "conform"
CONTROLLER = "conform-controller"  # the Controller's name in the plugin manager


def pytest_addoption(parser):
    # default=None everywhere: the defaults are RunConfig's and CellSettings', written once there
    g = parser.getgroup("conform", "conform: op conformance of a PyTorch backend")
    g.addoption(
        "--conform-device",
        default=None,
        help="device under test: cpu, mps, cuda[:N], xpu, meta, an entry point of group conform.backends, "
        "or module:attr (default: best available accelerator, else cpu against float64 golden)",
    )
    g.addoption(
        "--conform-ops",
        default=None,
        help=f"ops: all, core, family:NAME, comma list, globs (add*), or @file (default: {RunConfig.ops})",
    )
    g.addoption(
        "--conform-dtypes",
        default=None,
        help=f"comma-separated dtypes (default: {','.join(DEFAULT_DTYPES)}; without float64 on the cpu backend, whose reference is float64)",
    )
    g.addoption(
        "--conform-examples",
        type=int,
        default=None,
        help=f"valid cases per cell, drawn ones and their value variants (default: {CellSettings.examples})",
    )
    g.addoption(
        "--conform-values-per-draw",
        type=int,
        default=None,
        help=f"cases per drawn case: it, then the same case with other values (default: {CellSettings.values_per_draw})",
    )
    g.addoption("--conform-seed", type=int, default=None, help="run seed, recorded with the run (default: random)")
    g.addoption(
        "--conform-derandomize",
        action="store_true",
        default=None,
        help="derive every cell's examples from the op name alone (gating runs)",
    )
    g.addoption("--conform-db", default=None, help="SQLite path or SQLAlchemy URL (default: conform.db or $CONFORM_DB)")
    g.addoption(
        "--conform-no-grad",
        action="store_false",
        dest="conform_grad",
        default=None,
        help="skip backward comparisons (default: compare gradients)",
    )
    g.addoption(
        "--conform-max-numel",
        type=int,
        default=None,
        help=f"elements per case, all tensors together (default: {CellSettings.max_numel})",
    )
    g.addoption(
        "--conform-case-timeout", type=float, default=None,
        help="seconds one case may run before it counts as a hang (default: "
        f"{AUTO_CASE_TIMEOUT_S['cpu']:g} on cpu and meta, {AUTO_CASE_TIMEOUT_S['accelerator']:g} on accelerators)",
    )  # fmt: skip
    g.addoption(
        "--conform-cell-budget",
        type=float,
        default=None,
        help=f"seconds of example generation per cell (default: {CellSettings.cell_budget_s})",
    )
    g.addoption(
        "--conform-memory-limit", default=None, metavar="GiB|auto|none",
        help="address-space cap per worker; a case over it fails to allocate and is recorded, the worker lives on "
        f"(default: {RunConfig.memory_limit} = 4 GiB on cpu/meta, none on GPUs, whose drivers reserve large address ranges)",
    )  # fmt: skip
    g.addoption(
        "--conform-resume",
        default=None,
        metavar="RUN_ID|latest",
        help="continue a run: only cells it has not recorded yet run",
    )
    g.addoption(
        "--conform-workdir",
        default=None,
        help=f"folder for the hypothesis example database and per-run files (default: {RunConfig.workdir})",
    )
    g.addoption(
        "--conform-progress", action="store_true", default=None, help="show a progress bar (conform run turns it on)"
    )


def _config_from_options(config) -> RunConfig:
    """The RunConfig of `pytest -p conform.plugin --pyargs conform.suite --conform-*`."""
    names = (
        "device",
        "ops",
        "dtypes",
        "examples",
        "values_per_draw",
        "seed",
        "derandomize",
        "db",
        "grad",
        "max_numel",
        "memory_limit",
        "resume",
        "workdir",
        "progress",
    )
    options = {n: config.getoption(f"conform_{n}") for n in names}
    return RunConfig.from_options(
        **options,
        case_timeout_s=config.getoption("conform_case_timeout"),
        cell_budget_s=config.getoption("conform_cell_budget"),
    )


def _names_the_suite(config) -> bool:
    suite = str(Path(__file__).parent / "suite")
    return any(a.split("::")[0].startswith(("conform.suite", suite)) for a in config.invocation_params.args)


def _controller(config) -> Controller | None:
    return config.pluginmanager.get_plugin(CONTROLLER)


def _worker_setup(config) -> WorkerSetup | None:
    """This xdist worker's setup; None in the controller and outside a conform session."""
    winput = getattr(config, "workerinput", None)
    return WorkerSetup.from_json(winput[PROPERTY]) if winput and PROPERTY in winput else None


# -- controller ------------------------------------------------------------------------------


class Controller:
    """The controller's state (the store, the run, the plan, the progress bar) and its hooks.
    Built before pytest's session starts, from a RunConfig that is valid by construction:
    what it resolves (backend, ops, dtypes, the store) raises ConformError."""

    def __init__(self, config: RunConfig):
        # Ctrl-C is taken over first: from here on a run may exist in the store, and it must end
        # `interrupted` whatever moment the interrupt lands (conform.run.interrupts)
        interrupts.install()
        self.finished = False
        interrupts.check(held_too=True)  # an interrupt noted before (conform.cli.main holds them): no run is started
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

    def _start(self, config: RunConfig):
        self.run_id = None
        workdir = Path(config.workdir)
        resume = config.resume
        if resume:  # the run's own settings, from the store
            self.store = Store(config.db)
            run_id = self.store.latest_run_id() if resume == "latest" else int(resume)
            run = self.store.get_run(run_id) if run_id else None
            if run is None:
                raise ConformError(f"no run {resume} to resume in {self.store.where}")
            config = config.resumed(dict(run.options), run.seed)
        elif config.seed is None:
            config = dataclasses.replace(config, seed=random.randrange(2**31))
        # what needs torch, before a new run's database is created: a typo creates nothing
        self.backend = backends.resolve(config.device)
        try:
            ops = selection.select_ops(config.ops)
        except UnknownOpError as e:
            raise ConformError(str(e)) from None
        if config.dtypes is None:
            # (a third-party backend on the cpu device computes its own float64: it keeps it)
            config = dataclasses.replace(
                config, dtypes=",".join(CPU_DEFAULT_DTYPES if is_plain_cpu(self.backend) else DEFAULT_DTYPES)
            )
        cells = selection.plan_cells(ops, selection.parse_dtypes(config.dtypes))
        if not resume:
            self.store = Store(config.db)
        # the run's settings, complete: what is stored with the run and what every worker gets
        self.config = config = dataclasses.replace(
            config, cell=dataclasses.replace(config.cell, seed=config.seed, hypothesis_db=str(workdir / "hypothesis"))
        )
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
                env,
                options=config.stored_options(),
                seed=config.seed,
                ops_total=len(catalog),
                cells_planned=len(cells),
                conform_version=__version__,
            )
            self.store.record_catalog(self.run_id, catalog)
        self.cells = cells
        self.rundir = (
            workdir
            / "runs"
            / f"{self.store.engine.url.database and Path(str(self.store.engine.url.database)).stem or 'db'}-{self.run_id}"
        )
        (self.rundir / "inflight").mkdir(parents=True, exist_ok=True)
        (self.rundir / PLAN).write_text(json.dumps([list(c) for c in cells]))
        # ops that crashed a process in an earlier run on this torch and device run isolated from
        # the start, in a clean process of the op's own
        crashers = workdir / re.sub(r"[^\w.-]", "_", f"crashers-{_torch_version()}-{self.backend.name}.txt")
        known = _read_lines(crashers)
        if known:
            with open(self.rundir / CRASHED_OPS, "a") as f:
                f.write("".join(q + "\n" for q in sorted(known)))
        self.worker_setup = WorkerSetup(
            config=config,
            device_name=self.backend.name,
            run_dir=str(self.rundir.absolute()),
            crashers=str(crashers.absolute()),
            memory_limit=config.memory_limit_bytes(self.backend.device.type),
            warm_dispatch=bool(known) or any(_isolated(q) for q in {c[0] for c in cells}),
        )
        self.monitor = Monitor(self.rundir / "inflight")
        self.counts: dict[str, int] = {}
        self.stored = 0  # cells of the run in the store, this pytest session's and earlier ones'
        self.state = "running"
        self.fatal = ""
        self.session = None
        self.recorded = 0
        self.progress = None

    # -- hooks (this object is a pytest plugin, registered as CONTROLLER) ----------------------

    def pytest_configure_node(self, node):
        """xdist hook: what each worker needs to run cells."""
        node.workerinput[PROPERTY] = self.worker_setup.to_json()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session):
        self.session = session
        if self.config.progress:
            self.progress = tqdm(
                total=len(self.cells), unit="cell", dynamic_ncols=True, file=sys.stderr, smoothing=0.05
            )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """An interrupt that came during start-up (held until the run was fully written) stops the
        session here, before any cell runs, through pytest's own path for Ctrl-C."""
        interrupts.unblock()
        interrupts.check()

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo):
        """A Ctrl-C lands wherever the controller's own loop is (it runs cells in-process with one
        worker): inside a multi-line `with` a frame of the traceback can have no line number, and
        pytest's terminal reporter, formatting it next, raises TypeError over the interrupt (a
        traceback instead of `interrupted`). Those frames are left out of what it formats."""

        def numbered(entry) -> bool:
            try:
                return entry.lineno is not None
            except TypeError:  # its own `tb_lineno - 1` on a frame without one
                return False

        excinfo.traceback = excinfo.traceback.filter(numbered)

    def pytest_runtest_logreport(self, report):
        props = dict((k, v) for k, v in report.user_properties if k == PROPERTY) if report.user_properties else {}
        if PROPERTY in props and report.when == "call":
            found = props[PROPERTY]
            self.record(CellResult.from_json(json.loads(found) if isinstance(found, str) else found))
        elif report.when == "???" or (report.failed and report.when == "call" and PROPERTY not in props):
            # after Ctrl-C a worker that stops mid-cell looks like a crash to xdist: the cell was
            # interrupted, not crashed, and `--resume` runs it again
            if not self.interrupted:
                self.record(self.crash_result(report))
        elif report.failed and report.when == "setup":
            cell = _cell_of_nodeid(report.nodeid)
            self.record(
                CellResult(
                    op=cell[0],
                    dtype=cell[1],
                    message=f"conform internal error in setup: {str(report.longrepr).strip().splitlines()[-1]}",
                )
            )

    def pytest_sessionfinish(self, session, exitstatus):
        self.finish(exitstatus)

    def pytest_unconfigure(self, config):
        self.finish(pytest.ExitCode.INTERRUPTED)  # no-op unless the session never finished
        self.store.close()

    # -- results --------------------------------------------------------------------------

    def record(self, result: CellResult) -> None:
        with interrupts.held():  # the result whole, then the interrupt
            self._record(result)

    def _record(self, result: CellResult) -> None:
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
            self.counts[result.outcome] = self.counts.get(result.outcome, 0) + 1
        if self.progress is not None:
            self.progress.update(1)
            self.progress.set_postfix_str(f"{result.op.split('::')[-1]}[{result.dtype}]", refresh=False)

    def crash_result(self, report) -> CellResult:
        """The result of a cell whose worker died: `crash`, or `timeout` if a watchdog killed it.
        Not remembered as the op's crash: workers run no device work themselves (their clean
        device processes do, and a worker remembers the crashes of those)."""
        cell = _cell_of_nodeid(report.nodeid)
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "") or "main"
        # the repro names the device tested, also when it was chosen automatically
        return died_result(
            cell,
            read_record(self.rundir / "inflight" / f"{worker}.json"),
            self.config.device or self.backend.name,
            f"({report.longrepr})",
        )

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
                if not (self.interrupted or self.fatal or exitstatus == pytest.ExitCode.INTERRUPTED) and all(
                    c in done for c in self.cells
                ):
                    self.state = "finished"
                self.store.set_run_state(self.run_id, self.state)
                self.stored, self.counts = len(done), self.store.outcome_counts(self.run_id)
            except ConformError as e:
                self.fatal = self.fatal or str(e)
        interrupts.release()  # Ctrl-C now ends whatever follows (pytest's shutdown, the timing pass)


PLAN = "plan.json"


def _torch_version() -> str:
    return torch.__version__


def _read_lines(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


@functools.cache
def _isolated(qualname: str) -> bool:
    """opdb knows the op kills the process on some inputs (opdb/rules/isolate.toml); asked for
    every cell, and the op's rules are read once."""
    try:
        return opdb.lookup(qualname).rules.hint("isolate")
    except opdb.UnknownOpError:  # an op of another catalog: the run's crash list still applies
        return False


_op_base = op_base


def died_result(cell, inflight: InFlight | None, device: str | None, detail: str = "") -> CellResult:
    """A cell whose process died: `crash`, or `timeout` when the in-flight record says a watchdog
    ended it, with the case that was running."""
    r = CellResult(op=cell[0], dtype=cell[1], outcome=Outcome.CRASH.value)
    if inflight and inflight.running(cell):
        r.case = inflight.case
        desc = inflight.describe
        r.outcome = of_death(inflight).value
        if r.outcome == Outcome.TIMEOUT.value:
            r.message = f"case did not finish within {inflight.limit_s} s: {desc}"
        else:
            r.message = f"the process died while running {desc}"
        if reference_death(inflight):
            return _reference_died(r, inflight, detail)
        if inflight.functional and not inflight.failed:
            return _functional_died(r, inflight, detail)
        if inflight.earlier:
            # the death came after the cell's other checks (its malformed arguments run last):
            # what they found stands beside it
            r.further_failures = list(inflight.earlier.get("failures") or ())
            r.findings = list(inflight.earlier.get("findings") or ())
        if r.case is not None:  # (none when the process hung while drawing a case)
            r.examples_run = 1
            # the case's own op: the functional an out= cell's generator was running, if that died
            r.repro = _repro_from_json(r.case.get("op") or cell[0], r.case, device or "auto", inflight.phase)
    else:
        r.message = f"the process died {detail} before its case was recorded".replace("  ", " ")
    return r


def _reference_died(r: CellResult, inflight: InFlight, detail: str) -> CellResult:
    """The CPU reference or float64 golden, not the device, killed (or hung) the process: the
    record names a side only where the device under test is not the CPU (conform.run.cell). The
    device is not blamed: the cell is what its completed cases said, with a reference finding
    naming the case; skipped (REFERENCE_CRASH) if none had passed. A cell that had already
    failed stays `crash`: its failure died with the process."""
    side = "float64 golden" if inflight.side == "golden" else "reference"
    what = "hung" if r.outcome == Outcome.TIMEOUT.value else f"died {detail}".strip()
    message = f"the CPU {side} {what} on {inflight.describe}; the device is not to blame"
    passed = int(inflight.passed or 0)
    r.findings = [Finding(REFERENCE, inflight.phase or "forward", message).to_dict()]
    r.case = None  # (a stored case makes a failure row: this is no failure of the device)
    outcome, r.skip_reason = of_reference_death(passed)
    r.outcome = outcome.value
    if passed:
        r.examples_run = r.examples_passed = passed
        r.message = f"{passed} examples passed; then {message}"
    else:
        r.message = message
    return r


FUNCTIONAL_DIED = "the functional overload"


def _functional_died(r: CellResult, inflight: InFlight, detail: str) -> CellResult:
    """The forms relation was running the cell's functional overload on the device when the
    process died or hung: that is the functional's own failure, which its own cell records. The
    cell is what its completed cases said, with a finding naming the functional; it is drawn again
    without that case, and without the forms relation (conform.run.execute.functional_failed)."""
    what = "hung" if r.outcome == Outcome.TIMEOUT.value else f"died {detail}".strip()
    message = (
        f"{FUNCTIONAL_DIED} {inflight.functional} {what} on the device (the forms relation runs it on "
        f"{inflight.describe}): its own cell's failure, not this overload's"
    )
    passed = int(inflight.passed or 0)
    r.findings = [Finding(REFERENCE, "forward", message).to_dict()]
    r.case = None  # (a stored case makes a failure row: this is no failure of this overload)
    outcome, r.skip_reason = of_reference_death(passed)  # the other op's death: as the reference's
    r.outcome = outcome.value
    r.examples_run = r.examples_passed = passed
    r.message = f"{passed} examples passed; then {message}" if passed else message
    return r


def _repro_from_json(op_name: str, case_json: dict, device: str, phase: str = "") -> str:
    # a death in a backward replays the backward (the phase is all a script takes of a result)
    result = types.SimpleNamespace(phase=phase) if phase == "backward" else None
    try:
        return repro_script(opdb.lookup(op_name), Case.from_json(case_json), device, result=result)
    except Exception:
        return ""


def _cell_of_nodeid(nodeid: str) -> tuple[str, str]:
    ident = nodeid[nodeid.index("[") + 1 : nodeid.rindex("]")]
    short, dtype = ident.rsplit("/", 1)
    return f"aten::{short}", dtype


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if _worker_setup(config) is not None:
        interrupts.install()  # a Ctrl-C never dropped in a collector callback
        interrupts.unblock()  # blocked by the controller while it started this worker
        interrupts.check()
        return
    if hasattr(config, "workerinput") or _controller(config) is not None or not _names_the_suite(config):
        return  # another project's worker or session, or `conform run`, which brought its controller
    try:
        controller = Controller(_config_from_options(config))
    except ConformError as e:
        raise pytest.UsageError(str(e)) from None
    config.pluginmanager.register(controller, CONTROLLER)


# -- workers ---------------------------------------------------------------------------------


class WorkerContext:
    """A worker's side of running cells. The worker itself never touches the device: each cell
    runs in a clean child process (conform.run.isolation), the worker's long-lived device process for
    most cells and one of the op's own for ops that are known to kill processes (opdb's isolate
    rules, and ops that crashed earlier). A crash, a hang or a poisoned device context costs that
    process only; the worker records the cell and goes on, so xdist never blames another cell."""

    def __init__(self, setup: WorkerSetup, worker_id: str):
        start_server(setup.config.device, warm_dispatch=setup.warm_dispatch)  # it imports in the background
        self.rundir = Path(setup.run_dir)
        self.inflight = self.rundir / "inflight" / f"{worker_id}.json"
        self.device_name = setup.device_name  # for repro scripts
        self.crashers_path = Path(setup.crashers)
        self.child_args = (setup, str(self.inflight))
        self.name = f"conform-device-{worker_id}"
        self.device = self._child(self.name)
        self._own: tuple[str, CleanChild] | None = None  # (op base name, its process): see run
        self._crashed_mtime = None
        self._crashed: set[str] = set()

    def _child(self, name: str):
        return CleanChild(cell_process, self.child_args, name=name)

    def run(self, cell) -> CellResult:
        base = _op_base(cell[0])
        if base in self._crashed_ops() or _isolated(cell[0]):
            # a process of the op's own, started clean: a death there costs that process only.
            # The op's later cells (its other dtypes and overloads) reuse it while it lives, with
            # the op's strategies and kernels warm: a fresh process's first cell cost six times
            # a warm one's, and a sweep runs about a thousand such cells
            if self._own is None or self._own[0] != base:
                self._close_own()
                self._own = (base, self._child(f"{self.name}-isolated"))
            return self._run_in(self._own[1], cell)
        return self._run_in(self.device, cell)

    def _close_own(self) -> None:
        if self._own is not None:
            self._own[1].close()
            self._own = None

    # How often a cell whose CPU reference killed the process is drawn again without the case
    # that killed it: the device is not to blame, and the cell's remaining examples should still
    # reach it (integer div's floor mode after a trunc INT_MIN / -1, pytorch#138425).
    REFERENCE_RETRIES = 2

    def _run_in(self, child, cell) -> CellResult:
        result, death = self._run_once(child, cell, [])
        excluded, before = [], result
        while death and len(excluded) < self.REFERENCE_RETRIES:
            # the cell's seed is the same, so the examples before that case run again, it is
            # rejected, and later ones are drawn anew, in a fresh process
            excluded.append(death)
            once = self._child(f"{self.name}-isolated")
            try:
                result, death = self._run_once(once, cell, excluded)
            finally:
                once.close()
        if excluded:
            result.findings = before.findings + [f for f in result.findings if f not in before.findings]
            if death is None:
                who = "the forms relation's functional" if FUNCTIONAL_DIED in before.message else "the CPU reference"
                result.message += f" (drawn again without the case {who} died on: {before.message})"
        return result

    def _run_once(self, child, cell, excluded: list) -> tuple[CellResult, dict | None]:
        """The cell's result, and, where the CPU reference killed the process, the case it died on
        ({} if it hung: a hang is not drawn again, since it costs its time limit each time)."""
        try:
            result, poisoned = child.call((*cell, excluded) if excluded else tuple(cell))
        except IsolationError as e:
            # isolation failed, not the op: recorded as conform's own error, never remembered
            return CellResult(op=cell[0], dtype=cell[1], message=f"conform internal error: {e}"), None
        except ChildDied as e:
            inflight = read_record(self.inflight)
            mark_idle(self.inflight)
            if inflight and inflight.timeout and not killed_for_time(e.exitcode):
                # it died of its own (an abort still dumping core when the monitor looked)
                inflight = dataclasses.replace(inflight, timeout=False)
            functional = inflight.functional if inflight and inflight.running(cell) and not inflight.failed else ""
            if functional:
                # the forms relation's functional killed it: that op is the crasher, and the
                # cell is drawn again without the case, its siblings without the forms relation
                # (a context it poisoned is an error, not a crash: this run's list only)
                self._remember_crash(functional, across_runs=e.exitcode != POISONED_EXIT_STATUS)
            elif child is self.device and inflight and inflight.running(cell):
                # the op's own case killed the shared process (not its start-up, not isolation):
                # its later cells run isolated
                self._remember_crash(cell[0])
            result = died_result(cell, inflight, self.device_name, f"({e})")
            if functional:
                return result, inflight.case or {"functional": functional}
            # also after a case had failed: its failure died with the process (a shrink step the
            # reference crashed on), and drawn again without that case it is found and shrunk
            if not (inflight and inflight.side in ("reference", "golden")):
                return result, None
            return result, {} if inflight.timeout else inflight.case or {}
        if poisoned:
            child.kill()  # a fresh device process serves the next cell
        return result, None

    def _remember_crash(self, qualname: str, across_runs: bool = True) -> None:
        """Later cells of the op run isolated (this run's list) and so do the next runs' (the
        crashers file of this torch and device)."""
        for path in (self.rundir / CRASHED_OPS, self.crashers_path)[: 2 if across_runs else 1]:
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
        self._close_own()


def pytest_generate_tests(metafunc):
    if "conform_cell" not in metafunc.fixturenames:
        return
    setup, controller = _worker_setup(metafunc.config), _controller(metafunc.config)
    if setup is not None:
        cells = [tuple(c) for c in json.loads((Path(setup.run_dir) / PLAN).read_text())]
    elif controller is not None:
        cells = controller.cells
    else:
        return  # not a conform session: another project's `conform_cell` is its own
    metafunc.parametrize("conform_cell", cells, ids=[f"{op.split('::', 1)[1]}/{dt}" for op, dt in cells])


@pytest.fixture(scope="session")
def conform_context(request):
    """This process's WorkerContext: an xdist worker's, or the controller's own with -n 0."""
    setup, controller = _worker_setup(request.config), _controller(request.config)
    if setup is not None:
        context = WorkerContext(setup, request.config.workerinput.get("workerid", "gw"))
    elif controller is not None:
        context = WorkerContext(controller.worker_setup, "main")
    else:
        pytest.skip("conform's suite runs through `conform run` or `pytest -p conform.plugin --pyargs conform.suite`")
    yield context
    context.close()


def pytest_unconfigure(config):
    if _worker_setup(config) is not None:
        # an xdist worker with its cells done: a Ctrl-C to the process group is the controller's
        # to handle, and here it would only land in the interpreter's teardown (torch.library's
        # atexit finalizers) and print a traceback over the run's last lines
        signal.signal(signal.SIGINT, signal.SIG_IGN)

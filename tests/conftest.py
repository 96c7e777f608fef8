# Shared fixtures. PostgreSQL (a throwaway server, or $CONFORM_TEST_POSTGRES_URL): see tests/pg.py.
import inspect
import json
import os
import re

import pytest

from pg import postgres_server, postgres_url  # noqa: F401


def pytest_configure(config):
    """The tests run in pytest-xdist workers (-n auto), and the conform runs they start are pytest
    sessions of their own: those must not read this worker's variables as theirs (conform's timing
    pass refuses to run inside a parallel worker, and rightly, for conform's own workers)."""
    if hasattr(config, "workerinput"):
        for name in [n for n in os.environ if n.startswith("PYTEST_XDIST_")]:
            del os.environ[name]


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker more than the cores. Many end-to-end tests spend their time waiting
    (a hang's time limit, a slow device's sleep, a subprocess's start-up) with their worker's core
    idle; a third worker on two cores keeps both busy."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_finish(session):
    """Load the emulated device before any test runs when a selected test uses it (the `emu`
    fixture of tests/test_emulated.py, `emu_available` of tests/test_model.py). The autograd engine sizes its per-device ready queues
    once, at the process's first backward, by the device types registered then
    (Engine::start_device_threads, a call_once in torch/csrc/autograd/engine.cpp): a device
    registered after any CPU backward in the same process (tests/test_finding_power.py's) fails
    an internal assert on its own first backward ("device_ready_queues_.size()")."""
    if not any({"emu", "emu_available"} & set(getattr(item, "fixturenames", ())) for item in session.items):
        return
    from conform.backends import emulated

    try:
        emulated.load()
    except emulated.EmulatorUnavailable:
        pass  # the fixture skips (no compiler) or fails, with the reason, where a test asks for it


@pytest.fixture(autouse=True, scope="session")
def _one_intra_op_thread():
    """Each process that runs tests computes with one intra-op thread, as conform's cells do
    (conform.run.cell.cell_process, the fork server): -n auto starts a worker more than the cores,
    and a second thread in each spent its wait for a core spinning (resnet18's model check: 8.9 s
    of CPU with one thread, 11.4 s with two on a quiet 2-core machine, 28 s in the whole suite)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _draws_follow_the_seed_alone(request):
    """Every test draws as a run's cell does (generators.seeding.seed_only): hypothesis's pool of
    constants from loaded local modules left out, so that a derandomized draw in a test does not
    depend on which modules the tests before it imported (tests/test_generators_stress.py drew
    other cases alone than after other test files). tests/test_seeding.py checks that pool's
    effect itself, so it runs without."""
    if request.module.__name__.endswith("test_seeding"):
        yield
        return
    from generators.seeding import seed_only

    with seed_only():
        yield


@pytest.fixture(autouse=True)
def _hypothesis_shrinks_as_configured():
    """A cell run in a test's process sets hypothesis's shrinking time cap to the run's shrink
    budget (conform.run.cell._set_shrink_budget, a module attribute: there is no setting for it);
    put back after each test, so that a later test's shrinking in the same worker is not cut to
    about a second, short of its minimal case on a loaded machine."""
    from hypothesis.internal.conjecture import engine

    cap = engine.MAX_SHRINKING_SECONDS
    yield
    engine.MAX_SHRINKING_SECONDS = cap


# What makes a test end-to-end: it starts `conform` (or another program) in a subprocess, drives
# a click command, runs a cell in a clean child, starts a database server or a browser, or builds
# the emulated device. Such tests run in CI and under README's test command like every other;
# `-m "not e2e"` leaves them out for a quick loop while editing.
_E2E_SOURCE = re.compile(
    r"\b(?:conform|conform_here|popen_conform|run_conform|run_script|_run|sweep)\(|subprocess\.|Popen\(|CliRunner\(|CleanChild|cell_process"
)
_E2E_FIXTURES = {"emu", "postgres_url", "postgres_server", "browser", "page", "site_dir", "built_site", "opinfo_checks"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        fn = getattr(item, "function", None)
        try:
            source = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            source = ""
        if _E2E_SOURCE.search(source) or _E2E_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


def once_per_session(request, tmp_path_factory, name: str, make):
    """`make(folder)` run once in the whole test session, by whichever pytest-xdist worker asks
    first: the others wait for it and get the same folder and result (which must be JSON). For an
    expensive fixture (a whole conform run) whose tests only read what it made, and which
    pytest-xdist would otherwise rebuild in each worker that runs one of them."""
    from filelock import FileLock  # torch's own dependency

    root = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # the workers' folders share their parent
        root = root.parent
    folder, done = root / name, root / f"{name}.json"
    with FileLock(str(root / f"{name}.lock")):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            done.write_text(json.dumps(make(folder)))
    return folder, json.loads(done.read_text())


# A fixed op set on which the CPU must agree with its float64 golden reference (not softmax: its
# NaN at one +inf in a row, where its value is one-hot, is a finding of the values at infinity).
CLEAN_OPS = (
    "aten::add.Tensor,aten::mul.Tensor,aten::relu,aten::sum.dim_IntList,aten::dot,aten::exp,"
    "aten::index_select,aten::cat,aten::where.self,aten::sub.Tensor"
)


@pytest.fixture(scope="session")
def clean_run(request, tmp_path_factory):
    """A small CPU run on which nothing may alarm (tests/test_cli.py), whose database other
    tests read or copy (tests/test_coverage.py): (its folder, its CompletedProcess)."""
    import subprocess

    from cli_helpers import conform

    def make(tmp):
        proc = conform(
            "run",
            "--ops",
            CLEAN_OPS,
            "--dtypes",
            "float32,bfloat16,int64",
            "--device",
            "cpu",
            "--examples",
            "5",
            "--seed",
            "3",
            # one worker (no property here is about several; test_durability's crash and hang
            # sweep runs two): a torch import and catalog load less
            "-n",
            "1",
            "--db",
            tmp / "c.db",
            cwd=tmp,
        )
        return [proc.returncode, proc.stdout, proc.stderr]

    # one run for the whole session: its tests read its database (or a copy of it)
    tmp, (code, out, err) = once_per_session(request, tmp_path_factory, "clean-run", make)
    return tmp, subprocess.CompletedProcess([], code, out, err)

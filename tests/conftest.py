# Shared fixtures. PostgreSQL (a throwaway server, or $CONFORM_TEST_POSTGRES_URL): see tests/pg.py.
import pytest

from pg import postgres_server, postgres_url  # noqa: F401


def pytest_collection_finish(session):
    """Load the emulated device before any test runs when a selected test uses it (the `emu`
    fixture of tests/test_emulated.py). The autograd engine sizes its per-device ready queues
    once, at the process's first backward, by the device types registered then
    (Engine::start_device_threads, a call_once in torch/csrc/autograd/engine.cpp): a device
    registered after any CPU backward in the same process (tests/test_finding_power.py's) fails
    an internal assert on its own first backward ("device_ready_queues_.size()")."""
    if not any("emu" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    from conform.backends import emulated

    try:
        emulated.load()
    except emulated.EmulatorUnavailable:
        pass  # the fixture skips (no compiler) or fails, with the reason, where a test asks for it


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

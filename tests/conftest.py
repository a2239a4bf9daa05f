from __future__ import annotations

import asyncio
import os
import shlex
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from clawgate.agent.llm import LLMClient
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.kernel.config import AgentConfig
from tests import forked, process
from tests.bytecode import keep_bytecode_out_of_the_tree, rewrite_test_modules
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.postgres import PrivatePostgres

if TYPE_CHECKING:
    from tests.dashboard_harness import Chromium


def pytest_configure(config: pytest.Config) -> None:
    keep_bytecode_out_of_the_tree()
    # `clawgate` children are forked from one that imported it already (tests/forked.py).
    process.FORK = os.environ.get("CLAWGATE_TEST_EXEC") != "1"
    if _starts_workers(config):
        if process.FORK:
            # One for all the workers, importing while they start: ~1 s of CPU a worker less.
            # Started before the test modules are rewritten (~4 s on a new checkout), which
            # then runs beside its imports.
            config.stash[SHARED_ZYGOTE] = forked.start_shared(process.CLAWGATE)
        rewrite_test_modules(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    zygote = config.stash.get(SHARED_ZYGOTE, None)
    if zygote is not None:
        zygote.close()


SHARED_ZYGOTE = pytest.StashKey[Any]()
FORK_PYTHON = Path(__file__).with_name("fork_python.py")


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown to a run without xdist
def pytest_xdist_setupnodes(config: pytest.Config, specs: list[Any]) -> None:
    """The workers are forked from the shared zygote, which has imported what each would import
    (tests/fork_python.py), once it is ready; a zygote that failed leaves them to start as
    usual."""
    zygote = config.stash.get(SHARED_ZYGOTE, None)
    if zygote is None:
        return
    try:
        zygote.wait_ready()
    except RuntimeError:
        return
    python = shlex.join([sys.executable, "-I", "-S", str(FORK_PYTHON)])
    for spec in specs:
        if spec.popen and not spec.python:
            spec.python = python


def _starts_workers(config: pytest.Config) -> bool:
    """This process is xdist's controller, about to start workers."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))


# Names a test module imports (or defines) when its tests start `clawgate`, a cluster worker
# or a fresh Python as a child process: seconds each, where most tests take milliseconds.
PROCESS_HELPERS = frozenset(
    {
        "ClawgateProcess",
        "run_clawgate",
        "clawgate_output",
        "DashboardGateway",
        "start_worker",
        "printed_by",
    }
)


# What goes through litellm in the test process (its import: ~4 s of CPU a process), found by
# watching its import over a suite run: these modules' tests, tests parametrized with the
# litellm model path, and these others.
LITELLM_MODULES = frozenset(
    {
        "test_llm",
        "test_llm_stream",
        "test_llm_anthropic",
        "test_llm_gemini",
        "test_model_params",
        "test_spend_ledger",
    }
)
LITELLM_TESTS = frozenset(
    {
        "test_voice_is_transcribed_when_a_model_is_configured",
        "test_litellm_embedder_against_the_fake_endpoint",
    }
)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown to a run without xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scheduler for loadscope with our units: each test alone, except the tests that
    go through litellm, one unit, so that one worker imports litellm instead of each, the
    browser tests, BROWSER_UNITS units, and the modules of WHOLE_MODULES. xdist hands out
    the units with the most tests first. (`--dist loadgroup` would do it by mark, but with
    pytest 9.2 its groups are lost: pytest-xdist issue #1386.)"""
    from xdist.scheduler import LoadScopeScheduling

    browser_units: dict[str, str] = {}  # module -> unit

    class Scheduler(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if _goes_through_litellm(nodeid):
                return "litellm"
            module = nodeid.partition("::")[0]
            if module.rpartition("/")[2].removesuffix(".py") in WHOLE_MODULES:
                return module
            if module.endswith("_browser.py"):
                unit = f"browser-{len(browser_units) % BROWSER_UNITS}"
                return browser_units.setdefault(module, unit)
            return nodeid

    return Scheduler(config, log)


# Modules whose tests share a module-scoped fixture that costs seconds: split over workers,
# each worker would pay for it (test_warm_up's child Python importing litellm, ~5 s of CPU).
# As one unit of several tests they are also handed out early, not among the last.
WHOLE_MODULES = frozenset({"test_warm_up"})


# The browser tests' modules are dealt out in turn to this many units, so that only as many
# workers launch a Chromium (~1.2 s of CPU each, and more for its first pages): with one per
# worker, the browser tests cost ~5 s more CPU. Two units of ~55 s each fit in a run.
BROWSER_UNITS = 2


def _goes_through_litellm(nodeid: str) -> bool:
    """By the node id alone (all the controller sees)."""
    path, _, name = nodeid.partition("::")
    if path.rpartition("/")[2].removesuffix(".py") in LITELLM_MODULES:
        return True
    function, _, params = name.partition("[")
    return function in LITELLM_TESTS or "litellm" in params.removesuffix("]").split("-")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # xdist (the scheduler above) hands tests out in this order as workers free up, keeping
    # two or three queued on each. The slow tests (long, browser, process-starting: mostly
    # waiting, on real time or on children) are spread through the first part of the run with
    # quick in-process ones between them, which keep the cores busy while they wait, and the
    # rest of the quick ones come last, so no worker is left running a slow test alone at the
    # end. The `long` ones are spaced out evenly among the other slow ones: all of them first
    # kept every worker waiting at once for the run's first ~40 s.
    ranked: dict[int, list[pytest.Item]] = {0: [], 1: [], 2: [], 3: []}
    for item in items:
        ranked[_start_order(item)].append(item)
    quick = ranked[3]
    among = int(len(quick) * QUICK_SHARE)
    slow = _spread(ranked[0], _by_turns(ranked[1] + ranked[2]))
    items[:] = _spread(slow, quick[:among]) + quick[among:]


# The share of the quick tests handed out among the slow ones; the rest come last.
QUICK_SHARE = 0.6


def _spread(few: list[pytest.Item], many: list[pytest.Item]) -> list[pytest.Item]:
    """All of `few` and `many`: `few` evenly spaced out in `many`, each first of its share."""
    out: list[pytest.Item] = []
    step = len(many) / len(few) if few else 0.0
    used = 0
    for n, item in enumerate(few, start=1):
        out.append(item)
        upto = min(len(many), round(n * step))
        out.extend(many[used:upto])
        used = upto
    out.extend(many[used:])
    return out


def _by_turns(items: list[pytest.Item]) -> list[pytest.Item]:
    """One test of each module in turn: a module's tests tend to wait on the same thing (the
    cluster's on PostgreSQL and its leases), and all of them at once left the cores idle."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.partition("::")[0], []).append(item)
    queues = list(modules.values())
    out: list[pytest.Item] = []
    while queues:
        out.extend(queue.pop(0) for queue in queues)
        queues = [queue for queue in queues if queue]
    return out


def _start_order(item: pytest.Item) -> int:
    if item.get_closest_marker("long"):
        return 0
    if "browser" in getattr(item, "fixturenames", ()):
        return 1
    module = getattr(item, "module", None)
    return 2 if PROCESS_HELPERS.intersection(vars(module) if module else ()) else 3


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as fake:
        yield fake


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram() as fake:
        yield fake


@pytest.fixture
def model_path() -> str:
    """Which model path serves the fake: "direct" (aiohttp) or "litellm". Modules that must
    pass through both override this with a parametrized fixture; MODEL_PATH_UNDER_TEST
    sends the whole suite through one."""
    return os.environ.get("MODEL_PATH_UNDER_TEST", "direct")


@pytest.fixture
def agent_config(fake_llm: FakeLLM, model_path: str) -> AgentConfig:
    if model_path == "litellm":
        # Its one-off import (seconds on a loaded machine) must not eat a reply's timeout.
        import_litellm()
    return AgentConfig(
        model="openai/fake-model",
        api_base=fake_llm.url,
        api_key="sk-test-secret",
        request_timeout=5.0,
        max_retries=2,
        direct_http=model_path == "direct",
    )


class LoopClock:
    """The running event loop's clock, which the test moves forward: the timers due within a
    jump (asyncio.timeout, aiohttp's and httpx's read timeouts) fire at once, instead of after
    the test waited them out in real time."""

    def __init__(self, real: Callable[[], float]) -> None:
        self._real = real
        self._offset = 0.0

    def time(self) -> float:
        return self._real() + self._offset

    def advance(self, seconds: float) -> None:
        self._offset += seconds


@pytest.fixture
async def loop_clock(monkeypatch: pytest.MonkeyPatch) -> LoopClock:
    loop = asyncio.get_running_loop()
    clock = LoopClock(loop.time)
    # The loop reads its clock through `self.time()`: every timer follows the moved one.
    monkeypatch.setattr(loop, "time", clock.time)
    return clock


MakeClient = Callable[..., LLMClient]


@pytest.fixture
async def make_client() -> AsyncIterator[MakeClient]:
    """`make_client(config, **options)`: an LLMClient the test uses, closed when it ends (the
    direct path keeps its connections open until then)."""
    made: list[LLMClient] = []

    def make(config: AgentConfig, **options: Any) -> LLMClient:
        made.append(LLMClient(config, **options))
        return made[-1]

    yield make
    for client in made:
        await client.aclose()


@pytest.fixture
async def harness(tmp_path, agent_config):
    from tests.harness import Harness, make_config

    async with Harness(make_config(tmp_path, agent_config)) as running:
        yield running


@pytest.fixture(scope="session")
def chromium() -> Iterator[Chromium]:
    """One headless Chromium per test process, launched by its first browser test, quit at
    the end; each test gets it reset (tests/dashboard_harness.py `browser`)."""
    from tests.dashboard_harness import Chromium

    browser = Chromium()
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PrivatePostgres]:
    """One private PostgreSQL per test process, started on first use, stopped at the end."""
    server = PrivatePostgres()
    server.start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def database_url(postgres: PrivatePostgres) -> str:
    """A fresh empty database of the private server, for one test."""
    return postgres.create_database()

from __future__ import annotations

import asyncio
import compileall
import gc
import hashlib
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from clawgate.agent.llm import LLMClient
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.kernel.config import AgentConfig
from tests import forked, process
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.postgres import PrivatePostgres

if TYPE_CHECKING:
    from tests.dashboard_harness import Chromium

BYTECODE_CACHE = Path(__file__).resolve().parent.parent / "build" / "pycache"


def pytest_configure(config: pytest.Config) -> None:
    keep_bytecode_out_of_the_tree()
    # `clawgate` children are forked from one that imported it already (tests/forked.py).
    process.FORK = os.environ.get("CLAWGATE_TEST_EXEC") != "1"
    if _starts_workers(config):
        rewrite_test_modules(config)
        if process.FORK:
            # One for all the workers, importing while they start: ~1 s of CPU a worker less.
            config.stash[SHARED_ZYGOTE] = forked.start_shared(process.CLAWGATE)


def pytest_unconfigure(config: pytest.Config) -> None:
    zygote = config.stash.get(SHARED_ZYGOTE, None)
    if zygote is not None:
        zygote.close()


SHARED_ZYGOTE = pytest.StashKey[Any]()


def _starts_workers(config: pytest.Config) -> bool:
    """This process is xdist's controller, about to start workers."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))


def keep_bytecode_out_of_the_tree() -> None:
    """With PYTHONDONTWRITEBYTECODE set, every Python the suite starts (xdist workers, ~250
    `clawgate` children) would compile its modules from source again, and each worker would
    rewrite the asserts of every test module again (~4 s CPU of its collection). Bytecode is
    written instead under build/pycache (PYTHONPYCACHEPREFIX): still none beside the sources.
    Runs in the controller before it starts the workers, which inherit the environment."""
    if not sys.dont_write_bytecode or sys.pycache_prefix:
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(BYTECODE_CACHE)
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(BYTECODE_CACHE)
    link_installed_bytecode()
    compile_our_sources()


def link_installed_bytecode() -> None:
    """The prefix hides the bytecode that pip and the interpreter's installer compiled beside
    the standard library and site-packages, so a new checkout would compile all of it again,
    in every worker at once (~45 s of CPU a run, a fifth of the suite's): it is linked into
    the prefix instead, once (a link each, or a copy across file systems)."""
    own = Path(__file__).resolve().parent.parent  # ours is compiled under the prefix
    entries = [Path(os.path.abspath(p)) for p in dict.fromkeys(sys.path) if p]
    entries = [entry for entry in entries if entry != own and entry.is_dir()]
    key = hashlib.sha256("\n".join(map(str, entries)).encode()).hexdigest()[:16]
    done = BYTECODE_CACHE / f"installed-{sys.implementation.cache_tag}-{key}"
    if done.exists():
        return
    tag = f".{sys.implementation.cache_tag}.pyc"
    for entry in entries:
        for cache in entry.rglob("__pycache__"):
            for compiled in cache.glob(f"*{tag}"):
                source = cache.parent / (compiled.name.removesuffix(tag) + ".py")
                _link(compiled, Path(importlib.util.cache_from_source(str(source))))
    done.parent.mkdir(parents=True, exist_ok=True)
    done.touch()


def rewrite_test_modules(config: pytest.Config) -> None:
    """Each test module's asserts rewritten and cached once, here, before the workers start:
    on a new checkout each of them did it at once for every module (~4 s of CPU a worker).
    This uses pytest's own rewriting (private names of the pinned pytest, the same calls its
    import hook makes); without them, or with bytecode off, the workers rewrite as before."""
    if sys.dont_write_bytecode:
        return
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for source in sorted(Path(__file__).parent.glob("test_*.py")):
            cache = rewrite.get_cache_dir(source)
            pyc = cache / (source.name.removesuffix(".py") + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc) is None and rewrite.try_makedirs(cache):
                source_hash, code = rewrite._rewrite_test(source, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
    except (ImportError, AttributeError, KeyError):
        return


def compile_our_sources() -> None:
    """Once here, not by each worker at the same time. Test modules are left to pytest, which
    compiles them with its asserts rewritten."""
    root = Path(__file__).resolve().parent.parent
    skip = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")
    for folder in OUR_FOLDERS:
        compileall.compile_dir(root / folder, quiet=1, rx=skip)


OUR_FOLDERS = ("kernel", "agent", "channels", "gateway", "tests")


def _link(compiled: Path, target: Path) -> None:
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(compiled, target)
    except FileExistsError:  # another process linked it first
        pass
    except OSError:
        shutil.copy2(compiled, target)


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
    go through litellm, one unit, so that one worker imports litellm instead of each, and
    the browser tests, BROWSER_UNITS units. xdist hands out the units with the most tests
    first. (`--dist loadgroup` would do it by mark, but with pytest 9.2 its groups are lost:
    pytest-xdist issue #1386.)"""
    from xdist.scheduler import LoadScopeScheduling

    browser_units: dict[str, str] = {}  # module -> unit

    class Scheduler(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if _goes_through_litellm(nodeid):
                return "litellm"
            module = nodeid.partition("::")[0]
            if module.endswith("_browser.py"):
                unit = f"browser-{len(browser_units) % BROWSER_UNITS}"
                return browser_units.setdefault(module, unit)
            return nodeid

    return Scheduler(config, log)


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


def pytest_collection_finish(session: pytest.Session) -> None:
    # The cyclic collector's oldest generation walks every object a test process holds, its
    # modules and collected tests among them (the workers' collections took 21.5 s of a run,
    # 16.8 s with this). What is here now lives as long as the process: the collector is
    # told to leave it be.
    gc.freeze()


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

"""The background warm-up after a start leaves the first owner turn nothing to load."""

from __future__ import annotations

import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from clawgate.agent.memory.embeddings import StaticEmbedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.memory.warm import warm_memory
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig
from tests.conftest import FORK_PYTHON


async def test_warm_memory_builds_the_index_and_loads_the_local_embedder(tmp_path: Path) -> None:
    embedder = StaticEmbedder.find()
    if embedder is None:
        pytest.skip("the builtin embedder's package is not installed")
    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "MEMORY.md").write_text(
        "# Memory\n\n- Ann's sister Rita lives in Lisbon.\n", encoding="utf-8"
    )
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", embedder)
    search = MemorySearch(index, MemorySearchConfig(), today=lambda: date(2027, 1, 20))
    try:
        await warm_memory(search)

        status = await index.status()
        assert status.chunks > 0 and status.vectors == status.chunks
        assert status.dirty_files == []
        assert embedder._loaded is not None  # the model the first query embeds with

        recalled = await recall_part(search, MemoryConfig())(Trust.OWNER, "where does Rita live?")
        assert recalled is not None and "Lisbon" in recalled.text
    finally:
        await search.close()


async def test_a_failing_warm_up_is_logged_and_the_search_still_reports_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # The index's database cannot be made under a file: the warm-up must not raise.
    blocker = tmp_path / "data"
    blocker.write_text("not a folder", encoding="utf-8")
    index = MemoryIndex.for_workspace(workspace, blocker, None)
    search = MemorySearch(index, MemorySearchConfig())
    try:
        await warm_memory(search)
        assert "warming the memory index up failed" in caplog.text
        with pytest.raises(OSError):
            await search.search("anything at all")
    finally:
        await search.close()


KEYWORD_ONLY_RUN = """
import asyncio, sys
from pathlib import Path
import clawgate.gateway.app
from clawgate.agent.memory.embeddings import make_embedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig

async def main(root):
    (root / "ws" / "memory").mkdir(parents=True)
    (root / "ws" / "memory" / "MEMORY.md").write_text("- Rita lives in Lisbon.\\n")
    embedder = make_embedder("none", lambda: None)
    index = MemoryIndex.for_workspace(root / "ws", root / "data", embedder)
    search = MemorySearch(index, MemorySearchConfig())
    hits = await search.search("where does Rita live")
    await search.close()
    print(len(hits), "numpy" in sys.modules)

asyncio.run(main(Path(sys.argv[1])))
"""


def test_keyword_only_memory_never_imports_numpy(tmp_path: Path) -> None:
    # numpy is ~13 MB of a gateway's resident memory: with embedding_model = "none" nothing
    # the gateway imports, nor a search, may load it.
    done = subprocess.run(
        [sys.executable, "-c", KEYWORD_ONLY_RUN, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["1", "False"]


# Both litellm checks need a Python that has not imported litellm, and its import is ~6 s of
# CPU: they share one fresh interpreter. The first part's warm-up is given no model, so it
# only imports litellm and makes no call: the second part's call path is still cold.
LITELLM_RUN = """
import asyncio, os, sys, threading
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
from clawgate.agent.llm import LLMClient, litellm_path
from clawgate.kernel.config import AgentConfig
from tests.fakes.llm import FakeLLM, text

importers = []
real_import = litellm_path.import_litellm

def watched_import():
    importers.append(threading.current_thread() is threading.main_thread())
    return real_import()

litellm_path.import_litellm = watched_import

async def during_the_warm_up():
    lib = litellm_path.LitellmLib()
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    running = asyncio.create_task(ticker())
    warming = asyncio.create_task(lib.warm_up())
    await asyncio.sleep(0)
    before = ticks
    first = await lib.load()  # a call's turn, while the warm-up's import runs
    loop_ran = ticks > before + 1
    await warming
    running.cancel()
    print("during:", first is sys.modules["litellm"], importers, loop_ran)

async def first_call_after_the_warm_up():
    async with FakeLLM() as fake:
        config = AgentConfig(
            model="openai/fake-model", api_base=fake.url, api_key="k", direct_http=False
        )
        client = LLMClient(config)
        await client.warm_up()
        warm_requests = len(fake.requests)
        loaded = set(sys.modules)
        fake.script(text("plain"))
        answer = (await client.chat([{"role": "user", "content": "hi"}])).content
        await client.aclose()
        print("after:", answer, warm_requests, sorted(set(sys.modules) - loaded))

asyncio.run(during_the_warm_up())
asyncio.run(first_call_after_the_warm_up())
"""


@pytest.fixture(scope="module")
def litellm_run() -> dict[str, list[str]]:
    """What a Python that has not imported litellm printed running LITELLM_RUN from the
    repository's root (where `tests.fakes` imports), line by line: {"during": words,
    "after": words}. Forked from the suite's zygote (tests/fork_python.py), which has the
    gateway imported but never litellm: ~3 s of CPU less than a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(FORK_PYTHON), "-c", LITELLM_RUN],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    lines = (line.split() for line in done.stdout.splitlines() if line.strip())
    return {words[0].rstrip(":"): words[1:] for words in lines}


def test_a_call_during_the_litellm_warm_up_waits_for_its_import_off_the_loop(
    litellm_run: dict[str, list[str]],
) -> None:
    # A message arriving while the warm-up imports litellm in a thread used to import it
    # on the loop, which then stood still on the import lock: every chat waited.
    assert litellm_run["during"] == ["True", "[False]", "True"]


def test_after_the_litellm_warm_up_its_first_real_call_has_nothing_left_to_import(
    litellm_run: dict[str, list[str]],
) -> None:
    # litellm's first real call imported its service logger and built the SDK's response
    # models (~25 ms of a first reply) until the warm-up made one real call itself, to a
    # canned answer on 127.0.0.1 (agent/llm/canned.py), never to the model's endpoint.
    assert litellm_run["after"] == ["plain", "0", "[]"]

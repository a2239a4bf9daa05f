"""Auto-recall on an unchanged index only reads it (no memory file is read, nothing is
written), and unchanged daily logs are not read again; a changed file is still seen at
once."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from clawgate.agent.memory import index as index_module
from clawgate.agent.memory.embeddings import HashedEmbedder, StaticEmbedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.recent import daily_logs_part
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.memory.store import MemoryStore
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig
from tests.memory_helpers import write_memory_file


async def test_recall_on_an_unchanged_index_reads_no_file_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    write_memory_file(workspace, "MEMORY.md", "# Memory\n\n- Ann's sister Rita lives in Lisbon.\n")
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", HashedEmbedder())
    search = MemorySearch(index, MemorySearchConfig(), today=lambda: date(2027, 1, 20))
    part = recall_part(search, MemoryConfig())
    try:
        first = await part(Trust.OWNER, "where does Rita live?")
        assert first is not None and "Lisbon" in first.text

        hops: list[str] = []
        fetch = index_module.fetch

        async def counted_fetch(db: Any, sql: str, params: Any = ()) -> Any:
            hops.append(sql)
            return await fetch(db, sql, params)

        to_thread = asyncio.to_thread

        async def counted_to_thread(function: Any, /, *args: Any, **kwargs: Any) -> Any:
            hops.append(getattr(function, "__name__", "?"))
            return await to_thread(function, *args, **kwargs)

        monkeypatch.setattr(index_module, "fetch", counted_fetch)
        monkeypatch.setattr(asyncio, "to_thread", counted_to_thread)
        unchanged = index._generation
        again = await part(Trust.OWNER, "where does Rita live now?")
        assert again is not None and again.text == first.text
        assert "read_file" not in hops and "chunk_file" not in hops
        assert index._generation == unchanged  # every write bumps it

        # A file changed in place (same inode) is indexed before the next answer.
        write_memory_file(
            workspace, "MEMORY.md", "# Memory\n\n- Ann's sister Rita moved to Porto.\n"
        )
        moved = await part(Trust.OWNER, "where does Rita live?")
        assert moved is not None and "Porto" in moved.text and "Lisbon" not in moved.text
        assert hops  # that refresh went the usual way

        # Another process (here: a second index on the same database) bumps the generation:
        # the next search notices and reloads its state.
        other = MemoryIndex.for_workspace(workspace, tmp_path / "data", HashedEmbedder())
        try:
            generation = index._generation
            await other.rebuild()
        finally:
            await other.close()
        assert [h.path for h in await search.search("Rita Porto")] == ["memory/MEMORY.md"]
        assert index._generation != generation
    finally:
        await search.close()


async def test_unchanged_daily_logs_are_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    clock = datetime(2027, 1, 20, 9, 0, tzinfo=UTC)
    store = MemoryStore(workspace, clock=lambda: clock)
    write_memory_file(workspace, "2027-01-20.md", "- 08:00 Booked the dentist.\n")
    part = daily_logs_part(store)
    reads: list[str] = []
    to_thread = asyncio.to_thread

    async def counted_to_thread(function: Any, /, *args: Any, **kwargs: Any) -> Any:
        reads.append(getattr(function, "__name__", "?"))
        return await to_thread(function, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted_to_thread)
    first = await part(Trust.OWNER, "hello")
    assert first is not None and "Booked the dentist" in first.text and len(reads) == 1
    again = await part(Trust.OWNER, "hello")
    assert again == first and len(reads) == 1

    # Appended in place, and yesterday's log appearing: both are read before the next turn.
    with (workspace / "memory" / "2027-01-20.md").open("a") as handle:
        handle.write("- 09:00 Paid the rent.\n")
    write_memory_file(workspace, "2027-01-19.md", "- 18:00 Called Rita.\n")
    later = await part(Trust.OWNER, "hello")
    assert later is not None and "Paid the rent" in later.text and "Called Rita" in later.text


def test_a_query_is_encoded_without_the_tokenizers_thread_pool() -> None:
    embedder = StaticEmbedder.find()
    if embedder is None:
        pytest.skip("the packaged static model is not installed")
    tokenizer, _matrix = embedder._load()
    texts = ["where does Rita live?", "Lisbon 上周"]
    batch = embedder.embed_sync([*texts, *texts, *texts, *texts, "one more"])[:2]

    class NoBatch:
        def __getattr__(self, name: str) -> Any:
            if name == "encode_batch":
                raise AssertionError("a query of two texts went through encode_batch")
            return getattr(tokenizer, name)

    embedder._loaded = (NoBatch(), _matrix)
    assert np.array_equal(embedder.embed_sync(texts), batch)


def test_the_float16_table_maps_the_wheel_and_embeds_as_a_float32_copy_did() -> None:
    found = StaticEmbedder.find()
    if found is None:
        pytest.skip("the packaged static model is not installed")
    from safetensors.numpy import load_file

    tokenizer, table = found._load()
    # Kept as the wheel stores it, over the file's pages, not copied into the heap.
    assert table.dtype == np.float16 and not table.flags.writeable and not table.flags.owndata
    texts = ["where does Rita live?", "Lisbon 上周", "", "dentist " * 700, "Ann booked it"]
    mapped = found.embed_sync(texts)
    (weights,) = load_file(str(found._root / found.WEIGHTS)).values()
    copied = StaticEmbedder(found._root)
    copied._loaded = (tokenizer, weights.astype(np.float32))
    assert np.array_equal(mapped, copied.embed_sync(texts))
    assert np.array_equal(table, weights)


async def test_first_searches_at_once_open_the_index_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two chats' first turns after a start recall at once: each opened its own connection,
    # and the second setting WAL mode on the new file failed with "database is locked".
    workspace = tmp_path / "ws"
    write_memory_file(workspace, "MEMORY.md", "# Memory\n\n- Ann's sister Rita lives in Lisbon.\n")
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", HashedEmbedder())
    search = MemorySearch(index, MemorySearchConfig(), today=lambda: date(2027, 1, 20))
    opened: list[Path] = []
    open_db = index_module.open_db

    async def counted_open(db_path: Path, workspace: Path) -> Any:
        opened.append(db_path)
        return await open_db(db_path, workspace)

    monkeypatch.setattr(index_module, "open_db", counted_open)
    try:
        found = await asyncio.gather(*(search.search("where does Rita live?") for _ in range(4)))
        assert all(any("Lisbon" in hit.snippet for hit in hits) for hits in found)
        assert len(opened) == 1
    finally:
        await index.close()

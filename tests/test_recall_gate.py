"""Auto-recall skips the memory search for a message that names nothing to look for."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path

import numpy as np

from clawgate.agent.memory.embeddings import HashedEmbedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig
from tests.memory_helpers import write_memory_file


class CountingEmbedder(HashedEmbedder):
    """The built-in embedder, counting the query texts it is asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.asked.extend(texts)
        return await super().embed(texts)


async def test_small_talk_is_not_embedded_but_a_question_or_a_date_is(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    write_memory_file(workspace, "MEMORY.md", "# Memory\n\n- Ann's sister Rita lives in Lisbon.\n")
    write_memory_file(workspace, "2027-01-19.md", "- 18:00 Called Rita about the flat.\n")
    embedder = CountingEmbedder()
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", embedder)
    search = MemorySearch(index, MemorySearchConfig(), today=lambda: date(2027, 1, 20))
    part = recall_part(search, MemoryConfig())
    try:
        assert (await part(Trust.OWNER, "where does Rita live?")) is not None
        asked = len(embedder.asked)
        assert asked > 0
        for chatter in ("thanks!", "ok good night", "hi, how are you?"):
            assert await part(Trust.OWNER, chatter) is None
        assert len(embedder.asked) == asked
        recalled = await part(Trust.OWNER, "and what about yesterday?")
        assert recalled is not None and "Called Rita" in recalled.text
    finally:
        await search.close()

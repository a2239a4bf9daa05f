"""Memory made ready for the first recall after a start, in the background.

The first search of a run would otherwise bring the index up to date, open its database,
read its vectors, build its word associations (expand.py; ~1 s at 10,000 chunks) and load a
local embedding model (~0.1 s with the builtin one) inside the first owner turn. `warm_memory` does the same work once the gateway runs. A message that
arrives meanwhile waits for no more than it would have done itself: the index refresh is
shared (one lock, one refresh) and the model loads once under its own lock.
"""

from __future__ import annotations

import asyncio
import logging

from clawgate.agent.memory.embeddings import LocalEmbedder
from clawgate.agent.memory.search import MemorySearch

log = logging.getLogger(__name__)


async def warm_memory(search: MemorySearch) -> None:
    """Refresh the index and load a local embedder; a failure is only logged (the first
    search meets and reports it again)."""
    try:
        await search.index.refresh()
        await search.warm_companions()
        await search.index.bm25.warm(search.index.words_state)
        embedder = search.index.embedder
        # A remote embedder would spend a paid call: it has nothing to load.
        if isinstance(embedder, LocalEmbedder):
            await asyncio.to_thread(embedder.embed_sync, ["warm up"])
    except Exception:
        log.exception("warming the memory index up failed")

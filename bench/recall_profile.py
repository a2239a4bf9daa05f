"""Where auto-recall's time goes: cProfile of `--queries` recalls over a synthetic memory.

The memory is bench/turn_overhead.py's notes (`--chunks` chunks, the default embedder,
indexed before timing) and the questions its varied ones (four in five in the notes' words).
Printed: wall and CPU time per recall (under the profiler, so higher than without it), then
the `--top` functions by cumulative time. The profile covers the event loop's thread; the
index's worker thread shows as the loop's wait (`select`/`poll`).

Run: python bench/recall_profile.py [--chunks 100] [--queries 200] [--top 28] [--lines 1]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.memory.embeddings import default_embedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from turn_overhead import questions, write_notes  # the same notes and questions


async def main_async(chunks: int, count: int, top: int, lines: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        write_notes(workspace, chunks, lines)
        index = MemoryIndex.for_workspace(workspace, Path(tmp) / "data", default_embedder())
        search = MemorySearch(index, MemorySearchConfig())
        await index.refresh()
        part = recall_part(search, MemoryConfig())
        asked = questions(count + 5, seed=1)
        for question in asked[:5]:  # the embedder loaded, the database open
            await part(Trust.OWNER, question)
        await index.bm25.warm(index.words_state)  # as the gateway's warm-up reads it
        profile = cProfile.Profile()
        wall, cpu = time.perf_counter(), time.process_time()
        profile.enable()
        for question in asked[5:]:
            await part(Trust.OWNER, question)
        profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        await search.close()
    print(
        f"{chunks} chunks: {wall / count * 1000:.2f} ms wall, {cpu / count * 1000:.2f} ms CPU"
        " a recall (profiled)"
    )
    pstats.Stats(profile).sort_stats("cumulative").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--top", type=int, default=28)
    parser.add_argument("--lines", type=int, default=1, help="lines a chunk (turn_overhead.py)")
    args = parser.parse_args()
    asyncio.run(main_async(args.chunks, args.queries, args.top, args.lines))


if __name__ == "__main__":
    main()

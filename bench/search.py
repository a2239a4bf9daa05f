"""Memory search speed on synthetic corpora of 1k, 10k and 100k chunks (the default embedder).

For each size: full index build time (chunk + FTS + embed), one-file incremental reindex
time (a new day's log; a line appended to a 100-chunk file), and search latency p50/p95
over 200 queries for keyword-only and hybrid search, hybrid without query expansion and
without the reranker (their costs), and the first hybrid search (it builds the word
associations). Every search includes the per-search freshness check (a stat of each memory file).
Prints figures; asserts nothing.

    python bench/search.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.memory.embeddings import default_embedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.rerank import Reranker
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig

CHUNKS_PER_FILE = 100
QUERIES = 200
NAMES = 300


def vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    syllables = [
        "ka",
        "lo",
        "mi",
        "ser",
        "tan",
        "dor",
        "vi",
        "pel",
        "quo",
        "ra",
        "nes",
        "ti",
        "bru",
        "gal",
        "fen",
        "os",
        "ump",
        "lis",
        "bon",
        "cat",
    ]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def sentence(rng: random.Random, vocab: list[str], n: int) -> str:
    # Zipf-like: low indexes are common words, high ones rare.
    return " ".join(
        vocab[min(int(rng.paretovariate(1.1)) * 7 + rng.randint(0, 6), len(vocab) - 1)]
        for _ in range(n)
    )


def write_corpus(root: Path, chunks: int, rng: random.Random, vocab: list[str]) -> None:
    """Sections of Zipf-like words, each about one of NAMES people (a capitalised name, what
    the second hop of a multi-hop question follows)."""
    names = [w.capitalize() for w in vocab[-NAMES:]]
    memory = root / "memory"
    memory.mkdir(parents=True)
    day = date(2020, 1, 1)
    for _ in range(max(1, chunks // CHUNKS_PER_FILE)):
        sections = [
            f"## {n:02d} {sentence(rng, vocab, 2)}\n{rng.choice(names)} {sentence(rng, vocab, 44)}\n"
            for n in range(CHUNKS_PER_FILE)
        ]
        (memory / f"{day.isoformat()}.md").write_text("\n".join(sections))
        day += timedelta(days=1)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def time_searches(search: MemorySearch, queries: list[str]) -> tuple[float, float]:
    await search.search(queries[0])  # warm: loads state, opens the database
    await search.index.bm25.warm(search.index.words_state)  # as the gateway's warm-up does
    took = []
    for query in queries:
        start = time.perf_counter()
        await search.search(query)
        took.append(time.perf_counter() - start)
    return pct(took, 0.5), pct(took, 0.95)


async def run(size: int) -> None:
    rng = random.Random(size)
    vocab = vocabulary(rng)
    root = Path(tempfile.mkdtemp(prefix=f"search-bench-{size}-"))
    try:
        workspace = root / "ws"
        write_corpus(workspace, size, rng, vocab)
        config = MemorySearchConfig()
        hybrid = MemorySearch(
            MemoryIndex.for_workspace(workspace, root / "data", default_embedder()), config
        )
        start = time.perf_counter()
        report = await hybrid.index.refresh()
        build = time.perf_counter() - start
        print(
            f"\n{size:,} chunks ({report.chunks_added:,} indexed from {report.files_changed} files)"
        )
        print(f"  full build:                    {build:8.2f} s")

        log = workspace / "memory" / "2030-01-01.md"
        log.write_text("".join(f"- {h:02d}:00 {sentence(rng, vocab, 12)}\n" for h in range(8, 20)))
        start = time.perf_counter()
        await hybrid.index.refresh()
        print(f"  new daily log reindexed:       {(time.perf_counter() - start) * 1000:8.1f} ms")
        big = sorted((workspace / "memory").glob("*.md"))[0]
        with big.open("a") as handle:
            handle.write(f"- appended {sentence(rng, vocab, 10)}\n")
        start = time.perf_counter()
        await hybrid.index.refresh()
        print(
            f"  line appended to a 100-chunk file: {(time.perf_counter() - start) * 1000:4.1f} ms"
        )

        # Half the queries name someone: those whose best hit misses a word take the
        # second hop (multihop.py), the costliest path.
        names = [w.capitalize() for w in vocab[-NAMES:]]
        queries = [
            " ".join(rng.sample(vocab[:2000], rng.randint(2, 4)) + rng.sample(names, i % 2))
            for i in range(QUERIES)
        ]
        keyword = MemorySearch(MemoryIndex.for_workspace(workspace, root / "data", None), config)
        p50, p95 = await time_searches(keyword, queries)
        print(f"  keyword-only search:  p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        start = time.perf_counter()
        await hybrid.search(queries[1])  # the first builds the word associations (expand.py)
        print(f"  first hybrid search:  {(time.perf_counter() - start) * 1000:8.1f} ms")
        p50, p95 = await time_searches(hybrid, queries)
        print(f"  hybrid search:        p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        plain = MemorySearch(hybrid.index, config, expand=False)
        p50, p95 = await time_searches(plain, queries)
        print(f"  hybrid, no expansion: p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        # The same hybrid search without the second stage (rerank.py), for its cost.
        first = MemorySearch(hybrid.index, config, reranker=Reranker(depth=0), expand=False)
        p50, p95 = await time_searches(first, queries)
        print(f"  hybrid, first stage:  p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")
        await keyword.close()
        await hybrid.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        await run(size)


if __name__ == "__main__":
    asyncio.run(main())

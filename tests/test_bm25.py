"""The words table's BM25 in memory (agent/memory/bm25.py) answers as FTS5's statement does:
the same rows, the same order, the same floats; never for a state of the index it was not
read at; never read for a memory without an embedder."""

from __future__ import annotations

import asyncio
import random
import sqlite3
import threading
from functools import partial
from pathlib import Path

from clawgate.agent.memory.bm25 import Bm25Memory, Bm25Table, Tokenizer
from clawgate.agent.memory.embeddings import HashedEmbedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.query import keyword_query
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig
from tests.memory_helpers import write_memory_file

# Stems that meet (run, runs, running), diacritics FTS5 removes, digits, a word in nearly
# every line, and words no line holds.
WORDS = (
    "maya tom priya run runs running runner café cafe naïve naive dentist dentists 2026 "
    "42 x86 blood type lisbon glasgow concert concerts market kettle tea news book booked "
    "booking clinic northwind über uber straße"
).split()
COMMON = "note"
UNSEEN = ["zeppelin", "quokka"]


def random_memory(workspace: Path, rng: random.Random, files: int) -> None:
    for n in range(files):
        lines = []
        for _ in range(rng.randint(1, 6)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 9))]
            if rng.random() < 0.8:
                words.append(COMMON)
            if rng.random() < 0.2:
                words += [words[0]] * rng.randint(1, 3)  # a word several times in a line
            lines.append("- " + " ".join(words) + ".")
            if rng.random() < 0.1:
                lines.append("- ... --- !!!")  # a line with no token at all
        day = f"2026-{1 + n % 12:02}-{1 + n % 28:02}"
        name = "MEMORY.md" if n == 0 else f"{day}.md"
        write_memory_file(workspace, name, "\n\n".join(lines) + "\n")


def questions(rng: random.Random, count: int) -> list[str]:
    pool = [*WORDS, COMMON, *UNSEEN, "the", "what", "Maya's"]
    return [" ".join(rng.choice(pool) for _ in range(rng.randint(1, 6))) for _ in range(count)]


async def same_as_fts5(index: MemoryIndex, rng: random.Random, count: int) -> int:
    """Every question's rows from memory against the statement's; how many were compared."""
    compared = 0
    for question in questions(rng, count):
        plan = keyword_query(question)
        if not plan.match:
            continue
        limit = rng.choice([1, 5, 24, 60, 500])
        days = rng.choice([None, ("2026-03-01", "2026-06-30"), ("2026-01-05", "2026-01-05")])
        mine = index.bm25.best(index.words_state(), plan.words, limit, days)
        assert mine is not None, question
        theirs = await index.fts("chunks_fts", plan.match, limit, days)
        assert mine == theirs, (question, limit, days)
        # The words' chunk counts (a question's idf) from the table, as the statement counts.
        counted = await index.read(
            partial(index.bm25.doc_freqs, index.words_state(), words=list(plan.words))
        )
        assert counted == await index.read(lambda r, w=list(plan.words): r.doc_freqs(w)), question
        compared += 1
    return compared


async def test_the_table_in_memory_answers_as_the_fts5_statement(tmp_path):
    rng = random.Random(20261207)
    workspace = tmp_path / "ws"
    random_memory(workspace, rng, files=40)
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", HashedEmbedder())
    try:
        await index.refresh()
        await index.bm25.warm(index.words_state)
        assert await same_as_fts5(index, rng, 300) > 250

        # The files change: a table read before is not used, one read again answers alike.
        (workspace / "memory" / "2026-02-02.md").unlink()
        random_memory(workspace, random.Random(7), files=12)
        await index.refresh()
        state = index.words_state()
        assert index.bm25.stale(state)
        assert index.bm25.best(state, ["maya"], 5, None) is None
        await index.bm25.warm(index.words_state)
        assert not index.bm25.stale(index.words_state())
        assert await same_as_fts5(index, rng, 200) > 150
    finally:
        await index.close()


async def test_a_search_has_the_table_read_and_the_next_ones_answer_from_it(tmp_path, monkeypatch):
    workspace = tmp_path / "ws"
    random_memory(workspace, random.Random(3), files=10)
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", HashedEmbedder())
    search = MemorySearch(index, MemorySearchConfig())
    answered: list[object] = []
    best = Bm25Table.best

    def counted(self, *args):
        answered.append(args)
        return best(self, *args)

    monkeypatch.setattr(Bm25Table, "best", counted)
    try:
        first = await search.search("maya dentist")
        await index.bm25.warm(index.words_state)  # joins the read the first search started
        assert not index.bm25.stale(index.words_state())
        assert await search.search("dentist maya") == first  # not a kept result
        assert answered, "the second search asked FTS5"
    finally:
        await search.close()


async def test_a_memory_without_an_embedder_never_reads_the_table(tmp_path):
    workspace = tmp_path / "ws"
    random_memory(workspace, random.Random(5), files=5)
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", None)
    try:
        await index.refresh()
        await index.bm25.warm(index.words_state)
        state = index.words_state()
        assert not index.bm25.stale(state) and not index.bm25.current(state)
        assert index.bm25.best(state, ["maya"], 5, None) is None
    finally:
        await index.close()


def test_a_word_the_tokenizer_cuts_in_two_is_left_to_fts5():
    cut = Tokenizer()
    assert cut.tokens("Running") == ("run",)
    assert cut.tokens("naïve") == ("naiv",)
    assert cut.phrases(["maya", "dentists"]) == ["maya", "dentist"]
    assert cut.phrases(["maya", "e-mail"]) is None  # FTS5 would match a two-word phrase


async def test_the_table_is_read_from_a_data_folder_whose_name_a_uri_would_misread(tmp_path):
    workspace = tmp_path / "ws"
    random_memory(workspace, random.Random(11), files=4)
    data = tmp_path / "data #1 ?x=% 50%"
    index = MemoryIndex.for_workspace(workspace, data, HashedEmbedder())
    try:
        await index.refresh()
        await index.bm25.warm(index.words_state)
        assert index.bm25.current(index.words_state())
        assert await same_as_fts5(index, random.Random(2), 40) > 20
    finally:
        await index.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data #1 ?x=% 50%", "ws"]


async def test_closing_stops_a_read_under_way(tmp_path, monkeypatch, caplog):
    """A one-off command closes its index right after its search: the read that search
    started is stopped, not waited for at the exit, and is no failure to report."""
    started, ended = threading.Event(), threading.Event()
    outcome: list[str] = []

    def endless_read(db_path, opened):
        db = sqlite3.connect(":memory:", check_same_thread=False)
        try:
            opened(db)
            started.set()
            db.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 1000000000)"
                " SELECT count(*) FROM n"
            ).fetchall()
            outcome.append("finished")
        except sqlite3.OperationalError as exc:
            outcome.append(str(exc))
            raise
        finally:
            db.close()
            ended.set()

    monkeypatch.setattr(Bm25Table, "read", staticmethod(endless_read))
    memory = Bm25Memory(tmp_path / "index.sqlite")
    warm = asyncio.create_task(memory.warm(lambda: (1, 1)))
    assert await asyncio.to_thread(started.wait, 60)
    await memory.close()
    await asyncio.gather(warm, return_exceptions=True)
    assert await asyncio.to_thread(ended.wait, 60)
    assert outcome == ["interrupted"]
    assert "could not be read" not in caplog.text
    await memory.warm(lambda: (1, 1))  # closed: no read begins
    assert outcome == ["interrupted"]

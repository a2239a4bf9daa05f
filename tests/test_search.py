"""Memory search: index, keyword and vector sides, decay, MMR, tools, auto-recall, CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.memory.embeddings import HashedEmbedder, LiteLLMEmbedder, make_embedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.index_db import (
    SCHEMA,
    best_matches,
    cjk_text,
    db_path_for,
    delete_db_files,
)
from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.memory.query import keyword_query
from clawgate.agent.memory.recall import RECALL_BUDGET_CHARS, format_recall, recall_part
from clawgate.agent.memory.search import MemorySearch, SearchHit
from clawgate.agent.tools.base import ToolContext
from clawgate.agent.tools.memory_tools import memory_tools
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig, ToolsConfig
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import text, tool_call
from tests.harness import Harness, make_config

TODAY = date(2026, 12, 15)
MEMORY = (
    "# Memory\n\n## People\n- Ann's sister Rita lives in Lisbon.\n\n## Cat\n- The cat is Miso.\n"
)


class CountingEmbedder(HashedEmbedder):
    def __init__(self, dim: int = 256) -> None:
        super().__init__(dim)
        self.embedded: list[str] = []

    async def embed(self, texts):
        self.embedded.extend(texts)
        return await super().embed(texts)


def write(workspace: Path, name: str, body: str) -> None:
    path = workspace / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    # A later write within the same clock tick must still look changed.
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def make_search(tmp_path: Path, embedder=None, **config) -> MemorySearch:
    workspace = tmp_path / "ws"
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", embedder)
    return MemorySearch(index, MemorySearchConfig(**config), today=lambda: TODAY)


@pytest.fixture
async def corpus(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", MEMORY)
    write(
        ws,
        "HISTORY.md",
        "[2026-08-10 10:00] (cli:x) In Lisbon we decided to come back in spring for the baby "
        "shower and to skip Sintra.\n\n"
        "[2026-11-20 09:00] (cli:x) 我们决定每月定投三百欧到指数基金。\n\n"
        "[2026-12-01 09:00] (cli:x) Miso换了猫粮，改成三文鱼味的。\n\n",
    )
    write(ws, "2026-12-10.md", "- 10:00 Paid the electricity bill.\n- 11:00 Bought oat milk.\n")
    write(ws, "2026-12-11.md", "- 09:00 Booked the dentist for a cleaning.\n")
    search = make_search(tmp_path, CountingEmbedder())
    yield search
    await search.close()


def paths(hits: list[SearchHit]) -> list[str]:
    return [f"{h.path}:{h.start_line}" for h in hits]


# Index ------------------------------------------------------------------------------


async def test_database_lives_under_data_dir_index_one_per_workspace(tmp_path):
    a = db_path_for(tmp_path / "ws1", tmp_path / "data")
    b = db_path_for(tmp_path / "ws2", tmp_path / "data")
    assert a.parent == tmp_path / "data" / "index" and a != b


async def test_incremental_reindex_touches_only_the_edited_file(tmp_path, corpus):
    index = corpus.index
    first = await index.refresh()
    assert first.files_changed == 4 and first.chunks_added == 7
    embedder = index.embedder
    embedder.embedded.clear()
    db = await index._conn()
    before = await db.fetch("SELECT id, path, hash FROM chunks ORDER BY id")

    assert (await index.refresh()).files_changed == 0  # nothing changed: stats only
    write(
        tmp_path / "ws",
        "2026-12-11.md",
        "- 09:00 Booked the dentist for a cleaning.\n- 18:00 Ran 5 km.\n",
    )
    report = await index.refresh()
    after = await db.fetch("SELECT id, path, hash FROM chunks ORDER BY id")

    assert report.files_changed == 1 and report.chunks_added == 1 and report.chunks_removed == 1
    unchanged = [r for r in before if r[1] != "memory/2026-12-11.md"]
    assert [r for r in after if r[1] != "memory/2026-12-11.md"] == unchanged
    assert embedder.embedded == ["- 09:00 Booked the dentist for a cleaning.\n- 18:00 Ran 5 km."]
    assert len(index.vectors) == len(after)


async def test_append_only_log_keeps_unchanged_chunks_and_removed_file_leaves(tmp_path, corpus):
    await corpus.index.refresh()
    (tmp_path / "ws" / "memory" / "2026-12-10.md").unlink()
    report = await corpus.index.refresh()
    assert report.files_removed == 1 and report.chunks_removed == 1
    assert all(h.path != "memory/2026-12-10.md" for h in await corpus.search("electricity bill"))


async def test_a_search_sees_a_file_edited_since_the_last_search(tmp_path, corpus):
    """The freshness check shares its hop with the word counts: an edit between two
    searches (the same words asked again, their counts already cached) is still found."""
    assert all("sailboat" not in h.snippet for h in await corpus.search("the sailboat mooring"))
    write(tmp_path / "ws", "2026-12-12.md", "- 10:00 Paid the sailboat mooring fee.\n")
    hits = await corpus.search("the sailboat mooring")
    assert hits and hits[0].path == "memory/2026-12-12.md", hits
    (tmp_path / "ws" / "memory" / "2026-12-12.md").unlink()
    assert all(h.path != "memory/2026-12-12.md" for h in await corpus.search("sailboat mooring"))


async def test_deleted_index_is_rebuilt_with_identical_results(tmp_path, corpus):
    queries = ["Lisbon decision", "猫粮", "dentist cleaning", "Rita", "指数基金"]
    first = [await corpus.search(q) for q in queries]
    db_path = corpus.index.db_path
    await corpus.close()
    delete_db_files(db_path)
    again = make_search(tmp_path, HashedEmbedder())
    try:
        assert [await again.search(q) for q in queries] == first
    finally:
        await again.close()


async def test_rebuild_and_model_change_reembed_without_rechunking(tmp_path, corpus):
    await corpus.index.refresh()
    db = await corpus.index._conn()
    chunks = await db.fetch("SELECT id, hash FROM chunks ORDER BY id")
    await corpus.close()

    switched = make_search(tmp_path, CountingEmbedder(dim=128))
    try:
        seen: list[tuple[str, int, int]] = []
        report = await switched.index.refresh(lambda *p: seen.append(p))
        assert report.files_changed == 0 and report.embedded == len(chunks)
        assert seen[-1] == ("embeddings", len(chunks), len(chunks))
        db = await switched.index._conn()
        assert await db.fetch("SELECT id, hash FROM chunks ORDER BY id") == chunks
        models = await db.fetch("SELECT DISTINCT model FROM embeddings ORDER BY model")
        assert [m[0] for m in models] == ["builtin-v1-128", "builtin-v1-256"]
        assert (await switched.search("dentist"))[0].path == "memory/2026-12-11.md"
        rebuilt = await switched.index.rebuild()
        assert rebuilt.chunks_added == len(chunks) and rebuilt.embedded == 0  # cache hit
    finally:
        await switched.close()


async def test_keyword_only_without_an_embedder(tmp_path, corpus):
    plain = make_search(tmp_path / "other", None)
    write(tmp_path / "other" / "ws", "2026-12-11.md", "- Booked the dentist.\n")
    try:
        hits = await plain.search("dentist")
        assert paths(hits) == ["memory/2026-12-11.md:1"]
        assert plain.weights == (0.0, 1.0)
    finally:
        await plain.close()


# Keyword side -----------------------------------------------------------------------


def _fts_db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    db.execute(
        "INSERT INTO chunks(id, path, start_line, end_line, date, hash, text, cjk) "
        "VALUES (1, 'memory/a.md', 1, 1, NULL, 'h', 'NEAR the \"quoted\" cat 猫粮 里斯本', '猫粮\n里斯本')"
    )
    return db


_FTS = _fts_db()
_NASTY = st.sampled_from(
    [
        '"',
        "'",
        "*",
        "^",
        "(",
        ")",
        "{",
        "}",
        ":",
        "-",
        "+",
        "NEAR",
        "AND",
        "OR",
        "NOT",
        "near(",
        "😀",
        "🐈‍⬛",
        "猫",
        "里斯本",
        "\x00",
        "\\",
        " ",
        "col:",
        "NEAR/2",
        "a*b",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_NASTY, st.text(max_size=12)), max_size=12).map("".join))
def test_any_user_text_is_a_valid_fts_query(query):
    plan = keyword_query(query)
    for table, match in (("chunks_fts", plan.match), ("chunks_tri", plan.trigram)):
        if match:
            _FTS.execute(
                f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY rank",
                (match,),
            ).fetchall()


def test_the_best_matches_statement_orders_as_fts5_rank_ties_and_all():
    # best_matches sorts by the bm25 column (SQLite keeps only the LIMIT's best) where FTS5's
    # ORDER BY rank sorts every match: the same rows, the same order, ties included (many
    # chunks here share a text, so a score, and the limit falls inside runs of ties).
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    texts = [
        "Ann's boat leaves at nine",
        "the boat to Lisbon",
        "Ann has a cat, Miso",
        "cat food 猫粮 and a boat",
        "nine cats and nine boats",
        "去里斯本的船 the boat",
    ]
    tables = set()
    for n in range(1, 301):
        text = texts[n % len(texts)] + (" again" * (n % 3))
        db.execute(
            "INSERT INTO chunks(id, path, start_line, end_line, date, hash, text, cjk) "
            "VALUES (?, 'memory/a.md', ?, ?, NULL, ?, ?, ?)",
            (n, n, n, f"h{n}", text, cjk_text(text)),
        )
    for query in ["boat", "cat OR boat", "nine boat cat again", "Miso", "Lisbon", "里斯本的船"]:
        plan = keyword_query(query)
        for table, match in (("chunks_fts", plan.match), ("chunks_tri", plan.trigram)):
            if not match:
                continue
            tables.add(table)
            for limit in (1, 7, 60, 500):
                ranked = db.execute(
                    f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? "
                    "ORDER BY rank LIMIT ?",
                    (match, limit),
                ).fetchall()
                assert ranked, (query, table)
                assert db.execute(best_matches(table), (match, limit)).fetchall() == ranked
    assert tables == {"chunks_fts", "chunks_tri"}


async def test_operators_and_quotes_search_literally(corpus):
    for query in ['"unbalanced', "NEAR(dentist", "dentist*", "dentist OR", "(((", "🦷 dentist!"]:
        hits = await corpus.search(query)
        if "dentist" in query:
            assert hits[0].path == "memory/2026-12-11.md", query


async def test_chinese_queries_long_two_and_one_character(corpus):
    assert paths(await corpus.search("指数基金", max_results=1)) == ["memory/HISTORY.md:3"]
    assert paths(await corpus.search("猫粮", max_results=1)) == ["memory/HISTORY.md:5"]
    assert paths(await corpus.search("我想知道定投的事", max_results=1)) == ["memory/HISTORY.md:3"]
    single = keyword_query("猫")
    assert single.short_cjk == ("猫",) and single.trigram is None
    assert "memory/HISTORY.md:5" in paths(await corpus.search("猫"))


# Ranking ----------------------------------------------------------------------------


async def test_recency_breaks_ties_only_and_spares_memory_md(tmp_path):
    ws = tmp_path / "ws"
    line = "- Renewed the passport at the citizen shop.\n"
    write(ws, "2026-12-14.md", line)
    write(ws, "2026-06-01.md", line)
    write(ws, "MEMORY.md", line)
    search = make_search(tmp_path, HashedEmbedder())
    try:
        hits = await search.search("renewed passport")
        # Equal evidence: MEMORY.md (never decays), then the newer copy, then the older.
        assert [h.path for h in hits] == [
            "memory/MEMORY.md",
            "memory/2026-12-14.md",
            "memory/2026-06-01.md",
        ]
        # Recency orders; it does not lower the score of the older copy.
        assert hits[2].score == pytest.approx(hits[0].score)
        search._today = lambda: date(2027, 6, 1)
        later = await search.search("renewed passport")
        assert later[0].path == "memory/MEMORY.md"
        assert later[0].score == pytest.approx(hits[0].score)
    finally:
        await search.close()


async def test_old_clear_match_beats_recent_loose_chatter(tmp_path):
    ws = tmp_path / "ws"
    write(
        ws,
        "HISTORY.md",
        "[2026-08-01 10:00] (cli:x) Lisbon trip: we decided to take the "
        "night train and stay in Alfama.\n\n",
    )
    for day in range(1, 10):
        write(ws, f"2026-12-0{day}.md", f"- Rita called from Lisbon, day {day}, about work.\n")
    search = make_search(tmp_path, HashedEmbedder())
    try:
        hits = await search.search("what did we decide about the Lisbon trip")
        assert hits[0].path == "memory/HISTORY.md"
    finally:
        await search.close()


async def test_mmr_keeps_near_duplicates_from_filling_the_top(tmp_path):
    ws = tmp_path / "ws"
    for n in range(5):
        write(ws, f"2026-12-0{n + 1}.md", f"- Miso the cat ate salmon food again today {n}.\n")
    write(ws, "MEMORY.md", "- Miso the cat is allergic to chicken food.\n")
    search = make_search(tmp_path, HashedEmbedder(), max_results=3)
    try:
        hits = await search.search("Miso cat food")
        assert len(hits) == 3
        assert "memory/MEMORY.md" in [h.path for h in hits]
    finally:
        await search.close()


def test_merging_stops_only_when_no_later_pick_can_change_the_results():
    """Issue #28: `_merge` takes MMR's picks one at a time and stops once k results stand
    and no candidate left touches one; the results are those of merging every pick."""
    import random

    from clawgate.agent.memory.fusion import Candidate, mmr
    from clawgate.agent.memory.index_db import ChunkRow
    from clawgate.agent.memory.search import _merge

    def merge_all(chosen, rows, k):  # every pick merged, as before the early stop
        merged = []
        for cand in chosen:
            row = rows[cand.id]
            for i, (head, start, end, parts) in enumerate(merged):
                touching = row.start_line <= end + 2 and start <= row.end_line + 2
                if parts[0].path == row.path and parts[0].date == row.date and touching:
                    parts.append(row)
                    merged[i] = (head, min(start, row.start_line), max(end, row.end_line), parts)
                    break
            else:
                if len(merged) < k:
                    merged.append((cand, row.start_line, row.end_line, [row]))
        return [
            (head.id, start, end, sorted(r.id for r in parts)) for head, start, end, parts in merged
        ]

    rng = random.Random(28)
    words = "miso cat salmon food vet tuesday bill garden".split()
    late_joins = 0
    for _ in range(600):
        rows, ranked = {}, []
        for i in range(rng.randint(1, 25)):
            start = rng.randint(1, 40)
            path = rng.choice(("memory/2026-12-01.md", "memory/2026-12-02.md", "MEMORY.md"))
            date = None if path == "MEMORY.md" else path[7:17]
            text = " ".join(rng.choices(words, k=4))
            rows[i] = ChunkRow(i, path, start, start + rng.randint(0, 3), date, text)
            cand = Candidate(id=i, key=rng.random(), relevance=rng.random(), score=rng.random())
            cand.tokens = frozenset(text.split())
            ranked.append(cand)
        k = rng.randint(1, 4)
        everything = list(mmr(ranked, 0.7))
        expected = merge_all(everything, rows, k)
        hits = _merge(mmr(ranked, 0.7), ranked, rows, ("miso",), k)
        got = [(h.start_line, h.end_line, h.path) for h in hits]
        want = sorted(
            ((s, e, rows[head].path, ranked[head].score) for head, s, e, _ in expected),
            key=lambda x: -x[3],
        )
        assert got == [w[:3] for w in want]
        full_at = next(
            (
                n
                for n in range(len(everything))
                if len(merge_all(everything[: n + 1], rows, k)) == k
            ),
            None,
        )
        if full_at is not None and expected != merge_all(everything[: full_at + 1], rows, k):
            late_joins += 1  # a pick after the k-th result still joined one
    assert late_joins > 20


async def test_results_are_listed_by_the_score_they_show(tmp_path):
    """Issue #35: MMR pushes a near-duplicate down, but the list must still read by score."""
    ws = tmp_path / "ws"
    write(ws, "2026-12-01.md", "- Miso the cat ate salmon food again today.\n")
    write(ws, "2026-12-02.md", "- Miso the cat ate salmon food again today.\n")
    write(ws, "MEMORY.md", "- Miso the cat is allergic to chicken.\n")
    search = make_search(tmp_path, HashedEmbedder(), max_results=3, mmr_lambda=0.5)
    try:
        scores = [h.score for h in await search.search("Miso cat salmon food")]
        assert len(scores) == 3
        assert scores == sorted(scores, reverse=True)
    finally:
        await search.close()


# Embedders --------------------------------------------------------------------------


async def test_litellm_embedder_against_the_fake_endpoint(
    tmp_path, fake_llm, agent_config, make_client
):
    # The one-off import is not part of the timed attempts: under load it outlasted all three.
    import_litellm()
    llm = make_client(agent_config)
    embedder = make_embedder("openai/text-embedding-3-small", lambda: llm)
    assert isinstance(embedder, LiteLLMEmbedder) and embedder.semantic
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", MEMORY)
    write(ws, "2026-12-11.md", "- booked the dentist for a cleaning\n")
    search = make_search(tmp_path, embedder)
    try:
        assert search.weights == pytest.approx((0.7, 0.3))
        hits = await search.search("dentist cleaning")
        assert hits[0].path == "memory/2026-12-11.md"
        assert fake_llm.embedding_requests  # reached through api_base on 127.0.0.1
        assert {r["model"] for r in fake_llm.embedding_requests} == {"text-embedding-3-small"}
        # The query itself went to the remote model (between the search's two visits).
        assert fake_llm.embedding_requests[-1]["input"][0] == "dentist cleaning"
        assert len(search.index.vectors) == 3
    finally:
        await search.close()


def test_builtin_embedder_matches_word_forms_and_chinese_bigrams():
    e = HashedEmbedder()
    v = e.embed_sync(
        ["booking the flights", "we booked a flight", "feed the cat", "订了机票", "机票订好了"]
    )
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.3
    assert v[3] @ v[4] > 0.3
    assert make_embedder("none", lambda: None) is None  # type: ignore[arg-type,return-value]


# Tools and auto-recall -------------------------------------------------------------


def _ctx(workspace: Path, trust: Trust) -> ToolContext:
    disk = DiskWriter()
    return ToolContext(
        workspace, trust, "test:1", ToolsConfig(), (), disk, MemoryLock(workspace, disk)
    )


async def test_memory_tools_owner_only_and_confined_to_memory_files(tmp_path, corpus):
    ws = (tmp_path / "ws").resolve()
    (ws / "USER.md").write_text("secret owner facts\n")
    (ws / "memory" / ".versions").mkdir()
    (ws / "memory" / ".versions" / "MEMORY.old.md").write_text("old\n")
    registry = ToolRegistry(memory_tools(corpus))
    for trust in (Trust.GROUP, Trust.ALLOWED):
        assert registry.names(trust, ToolsConfig()) == []
        result = await registry.execute("memory_search", '{"query": "Rita"}', _ctx(ws, trust))
        assert result.startswith("Error: unknown tool")
    owner = _ctx(ws, Trust.OWNER)
    found = await registry.execute("memory_search", '{"query": "dentist", "max_results": 2}', owner)
    assert found.startswith("1. memory/2026-12-11.md:1-1 (score ")
    got = await registry.execute(
        "memory_get", '{"path": "memory/MEMORY.md", "from_line": 3, "lines": 2}', owner
    )
    assert (
        got == "memory/MEMORY.md lines 3-4 of 7:\n## People\n- Ann's sister Rita lives in Lisbon."
    )
    assert "Rita" in await registry.execute("memory_get", '{"path": "MEMORY.md"}', owner)
    for bad in (
        "../USER.md",
        "memory/../USER.md",
        "memory/.versions/MEMORY.old.md",
        str(ws / "USER.md"),
        "sessions/test_1.jsonl",
        "/etc/passwd",
    ):
        result = await registry.execute("memory_get", json.dumps({"path": bad}), owner)
        assert result.startswith("Error: ") and "not a memory file" in result, bad


async def test_recall_part_budget_switch_and_trust(corpus):
    part = recall_part(corpus, MemoryConfig())
    recalled = await part(Trust.OWNER, "dentist cleaning")
    assert recalled is not None
    assert recalled.text.splitlines()[1].startswith("- [memory/2026-12-11.md:1-1] ")
    assert await part(Trust.GROUP, "dentist cleaning") is None
    assert await part(Trust.ALLOWED, "dentist cleaning") is None
    assert (
        await recall_part(corpus, MemoryConfig(auto_recall=False))(Trust.OWNER, "dentist") is None
    )
    hits = [SearchHit(f"memory/{n}.md", 1, 2, 0.9, "x" * 900) for n in range(3)]
    block = format_recall(hits)
    assert len(block) <= RECALL_BUDGET_CHARS and block.count("\n- [") + 1 == 3


@pytest.mark.parametrize("trust", [Trust.GROUP, Trust.ALLOWED])
async def test_shared_sessions_get_no_memory_tools_and_no_recall(
    tmp_path, fake_llm, agent_config, trust
):
    config = make_config(tmp_path, agent_config)
    write(config.workspace, "2026-12-11.md", "- Booked the dentist, secret appointment.\n")
    fake_llm.script(text("ok"), text("ok"))
    async with Harness(config) as harness:
        await harness.ask("when is the dentist appointment", trust=trust)
        shared = fake_llm.requests[-1]
        await harness.ask("when is the dentist appointment", chat_id="2")
        owner = fake_llm.requests[-1]
    shared_tools = {t["function"]["name"] for t in shared.get("tools") or []}
    owner_tools = {t["function"]["name"] for t in owner.get("tools") or []}
    assert not shared_tools & {"memory_search", "memory_get"}
    assert {"memory_search", "memory_get"} <= owner_tools
    shared_prompt = shared["messages"][0]["content"]
    owner_prompt = owner["messages"][0]["content"]
    assert "recalled memory" not in shared_prompt and "secret appointment" not in shared_prompt
    assert "## recalled memory" in owner_prompt
    assert "- [memory/2026-12-11.md:1-1] - Booked the dentist" in owner_prompt


async def test_model_searches_memory_through_the_tool(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config, memory=MemoryConfig(auto_recall=False))
    write(config.workspace, "HISTORY.md", "[2026-08-01 10:00] (cli:x) Lisbon: skip Sintra.\n\n")
    fake_llm.script(tool_call("memory_search", query="Sintra"), text("You skipped Sintra."))
    async with Harness(config) as harness:
        assert (await harness.ask("Sintra?")).text == "You skipped Sintra."
    assert "## recalled memory" not in fake_llm.requests[0]["messages"][0]["content"]
    result = fake_llm.requests[1]["messages"][-1]["content"]
    assert result.startswith("1. memory/HISTORY.md:1-1 (score ")


# CLI --------------------------------------------------------------------------------


def _cli_env(tmp_path: Path, embedding_model: str = "builtin") -> dict[str, str]:
    ws = tmp_path / "ws"
    config = tmp_path / "config.toml"
    config.write_text(
        f'workspace = "{ws}"\ndata_dir = "{tmp_path / "data"}"\n'
        f'[memory]\nembedding_model = "{embedding_model}"\n'
    )
    return {"CLAWGATE_CONFIG": str(config)}


def test_cli_search_index_status(tmp_path, monkeypatch):
    from clawgate.gateway.cli import app

    write(tmp_path / "ws", "2026-11-02.md", "- Booked the dentist for a cleaning.\n")
    write(tmp_path / "ws", "MEMORY.md", MEMORY)
    for key, value in _cli_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    runner = CliRunner()
    result = runner.invoke(app, ["memory", "index"])
    assert result.exit_code == 0, result.output
    assert "2 files indexed" in result.output
    result = runner.invoke(app, ["memory", "search", "dentist", "-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)
    assert len(hits) == 1 and set(hits[0]) == {"path", "start_line", "end_line", "score", "snippet"}
    assert hits[0]["path"] == "memory/2026-11-02.md" and hits[0]["start_line"] == 1
    assert "dentist" in runner.invoke(app, ["memory", "search", "dentist"]).output
    write(tmp_path / "ws", "2026-11-03.md", "- new\n")
    status = runner.invoke(app, ["memory", "status"]).output
    assert "files:            2" in status and "chunks:           3" in status
    assert "dirty files:      1 (memory/2026-11-03.md)" in status
    assert "embedding model:  builtin" in status
    assert runner.invoke(app, ["memory", "index", "--rebuild"]).exit_code == 0


def test_cli_search_and_status_do_not_import_litellm(tmp_path):
    write(tmp_path / "ws", "MEMORY.md", MEMORY)
    code = (
        "import sys\nfrom clawgate.gateway.cli import app\n"
        "for args in (['memory', 'search', 'Rita', '--json'], ['memory', 'status']):\n"
        "    try:\n        app(args)\n    except SystemExit as e:\n        assert not e.code, e\n"
        "print('LITELLM', 'litellm' in sys.modules)\n"
    )
    env = {**os.environ, **_cli_env(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "LITELLM False" in run.stdout and "Rita" in run.stdout

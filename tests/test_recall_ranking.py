"""Issue 17: dates in questions, calibrated fusion, the packaged embedder offline, auto-recall
on a day-one workspace, the batch interface, no heading-only chunk."""

from __future__ import annotations

import io
import json
import os
import random
import socket
import sqlite3
import subprocess
import sys
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from clawgate.agent.memory import fusion
from clawgate.agent.memory.batch import run_batch
from clawgate.agent.memory.chunker import chunk_file
from clawgate.agent.memory.dates import find_dates, parse_bound, query_range
from clawgate.agent.memory.embeddings import HashedEmbedder, StaticEmbedder, default_embedder
from clawgate.agent.memory.fusion import Candidate
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.recall import recall_part
from clawgate.agent.memory.rerank import Reranker
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.memory.vectors import VectorMatrix
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig, MemorySearchConfig

TODAY = date(2027, 1, 20)  # a Wednesday


def write(workspace: Path, name: str, body: str) -> None:
    path = workspace / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def make_search(tmp_path: Path, embedder=None, today: date = TODAY) -> MemorySearch:
    index = MemoryIndex.for_workspace(tmp_path / "ws", tmp_path / "data", embedder)
    return MemorySearch(index, MemorySearchConfig(), today=lambda: today)


# Dates --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "start", "end"),
    [
        ("What did James do on March 16?", "2026-03-16", "2026-03-16"),
        ("what happened in October 2023", "2023-10-01", "2023-10-31"),
        ("what did we eat last week", "2027-01-11", "2027-01-17"),
        ("who called yesterday", "2027-01-19", "2027-01-19"),
        ("上周王芳做了什么菜", "2027-01-11", "2027-01-17"),
        ("李伟3月16日买了什么", "2026-03-16", "2026-03-16"),
        ("去年十月买了什么", "2026-10-01", "2026-10-31"),
        ("in October", "2026-10-01", "2026-10-31"),
        ("on 16 March 2025", "2025-03-16", "2025-03-16"),
        ("2026-08-03 notes", "2026-08-03", "2026-08-03"),
        ("3 days ago", "2027-01-17", "2027-01-17"),
        ("昨天", "2027-01-19", "2027-01-19"),
        ("last Monday", "2027-01-18", "2027-01-18"),
        ("2025年10月", "2025-10-01", "2025-10-31"),
    ],
)
def test_dates_in_questions(text, start, end):
    found = query_range(text, TODAY)
    assert found is not None, text
    assert (found.start.isoformat(), found.end.isoformat()) == (start, end)


def test_dates_follow_the_injected_today_and_ignore_words_that_are_not_dates():
    # Asked on a Monday, "last week" is the Monday to Sunday before it.
    found = query_range("last week", date(2027, 1, 18))
    assert found is not None and (found.start, found.end) == (date(2027, 1, 11), date(2027, 1, 17))
    # "March 16" asked before March 16 is last year's.
    found = query_range("on March 16", date(2027, 3, 1))
    assert found is not None and found.start == date(2026, 3, 16)
    assert find_dates("may I ask you to march on", TODAY) == []
    assert find_dates("we need 2 eggs", TODAY) == []
    assert parse_bound("last week", TODAY, end=True) == date(2027, 1, 17)
    with pytest.raises(ValueError):
        parse_bound("whenever", TODAY, end=False)


def test_timezone_decides_what_yesterday_is(tmp_path):
    # 23:30 UTC on Jan 19 is already Jan 20 in Shanghai.
    index = MemoryIndex.for_workspace(tmp_path / "ws", tmp_path / "data", None)
    search = MemorySearch(index, MemorySearchConfig(), timezone="Asia/Shanghai")
    assert (
        search.today()
        == __import__("datetime")
        .datetime.now(__import__("zoneinfo").ZoneInfo("Asia/Shanghai"))
        .date()
    )


async def test_a_date_in_the_question_finds_that_days_log(tmp_path):
    ws = tmp_path / "ws"
    for day, dish in (("2026-03-09", "risotto"), ("2026-03-16", "paella"), ("2027-01-15", "stew")):
        write(ws, f"{day}.md", f"- 19:00 James cooked {dish} for dinner.\n")
    search = make_search(tmp_path, HashedEmbedder())
    try:
        hits = await search.search("What did James cook on March 16?")
        assert hits[0].path == "memory/2026-03-16.md"
        hits = await search.search(
            "what did James cook", since=date(2026, 3, 1), until=date(2026, 3, 10)
        )
        assert [h.path for h in hits] == ["memory/2026-03-09.md"]
    finally:
        await search.close()


# Fusion -------------------------------------------------------------------------------


def _ranked(cands: list[Candidate], weights=(0.7, 0.3, 0.0), recency_weight=0.05) -> list[int]:
    fusion.weigh(cands, weights)
    return [c.id for c in fusion.order(cands, weights, recency_weight)]


def test_better_keyword_and_vector_evidence_is_never_ranked_below():
    for old_recency, new_recency in ((0.0, 1.0), (1.0, 0.0)):
        better = Candidate(1, t=0.61, v=0.51, recency=old_recency)
        worse = Candidate(2, t=0.60, v=0.50, recency=new_recency)
        assert _ranked([worse, better]) == [1, 2]
        assert _ranked([better, worse], recency_weight=1.0) == [1, 2]


def test_no_chunk_passes_one_with_better_evidence_whatever_the_ages():
    """The fusion invariant over many random near-tied candidate sets: wherever a chunk's
    keyword and vector evidence are both at least another's (one strictly), it ranks
    above it, whatever their recency."""
    rng = random.Random(17)
    weights = (0.7, 0.3, 0.0)
    for _ in range(300):
        cands = [
            Candidate(
                i,
                t=round(rng.uniform(0.5, 0.6), 2),
                v=round(rng.uniform(0.4, 0.5), 2),
                recency=rng.random(),
            )
            for i in range(8)
        ]
        ranked = [c.id for c in fusion.order(_weighed(cands, weights), weights, 0.05)]
        for a in cands:
            for b in cands:
                if fusion.dominates(a, b, weights):
                    assert ranked.index(a.id) < ranked.index(b.id)


def _weighed(cands: list[Candidate], weights) -> list[Candidate]:
    fusion.weigh(cands, weights)
    return cands


def test_recency_breaks_near_ties_only():
    # Neither dominates and they are within RECENCY_WEIGHT: the newer goes first.
    old = Candidate(1, t=0.80, v=0.40, recency=0.01)
    new = Candidate(2, t=0.78, v=0.42, recency=1.0)
    assert _ranked([old, new]) == [2, 1]
    # Clearly different relevance: recency changes nothing.
    old = Candidate(1, t=0.90, v=0.10, recency=0.0)
    new = Candidate(2, t=0.30, v=0.50, recency=1.0)
    assert _ranked([new, old]) == [1, 2]
    # A near-tie is judged on the query's own scale: for a weakly matching query, 0.04
    # apart is 13% apart, no tie.
    old = Candidate(1, t=0.30, v=0.30, recency=0.0)
    new = Candidate(2, t=0.25, v=0.32, recency=1.0)
    assert _ranked([new, old]) == [1, 2]


def test_scales_are_per_query():
    assert fusion.normalise_keyword({1: 12.0, 2: 3.0}) == {1: 1.0, 2: 0.25}
    assert fusion.normalise_keyword({1: 0.0}) == {}
    scaled = fusion.normalise_vector({1: 0.9, 2: 0.5, 3: 0.1}, mean=0.1)
    assert scaled[1] == pytest.approx(1.0) and scaled[3] == 0.0
    # A best cosine barely above the mean is not stretched to 1.
    assert fusion.normalise_vector({1: 0.12}, mean=0.1)[1] < 0.2


async def test_old_clearly_relevant_chunk_beats_new_weak_ones(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "2026-02-01.md", "- Maya's dentist is Dr Okafor at the Riverside practice.\n")
    for day in range(10, 20):
        write(ws, f"2027-01-{day}.md", f"- Maya went to the market, day {day}.\n")
    search = make_search(tmp_path, HashedEmbedder())
    try:
        assert (await search.search("Who is Maya's dentist?"))[0].path == "memory/2026-02-01.md"
    finally:
        await search.close()


async def test_a_relevant_chunk_is_not_dropped_for_a_neighbour_of_the_same_file(tmp_path):
    ws = tmp_path / "ws"
    body = "## Morning\n- Lisbon flights booked with TAP.\n\n## Evening\n- Lisbon hotel booked in Alfama.\n"
    write(ws, "2026-12-01.md", body)
    search = make_search(tmp_path, HashedEmbedder())
    try:
        hits = await search.search("Lisbon booked")
        texts = " ".join(h.snippet for h in hits)
        assert "TAP" in texts and "Alfama" in texts
        # Adjacent chunks of one file come back merged into one result.
        assert len(hits) == 1 and (hits[0].start_line, hits[0].end_line) == (1, 5)
    finally:
        await search.close()


async def test_a_paraphrase_is_found_past_the_facts_that_only_share_the_name(tmp_path):
    """Only the name is shared: the words memory never uses carry the query's meaning."""
    ws = tmp_path / "ws"
    facts = ["blood type is B negative", "sister lives in Valencia", "is allergic to shellfish"]
    write(ws, "MEMORY.md", "".join(f"- Tom's {f}.\n" for f in facts))
    write(ws, "2026-06-27.md", "- Tom volunteers at the food bank on Saturdays.\n")
    for day in range(10, 20):
        write(ws, f"2027-01-{day}.md", f"- Tom planned the week ahead, day {day}.\n")
    search = make_search(tmp_path, default_embedder())
    try:
        hits = await search.search("Does Tom do charity work?")
        assert hits[0].path == "memory/2026-06-27.md"
    finally:
        await search.close()


# The packaged embedder ----------------------------------------------------------------


def test_packaged_embedder_loads_with_the_network_unreachable(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network is unreachable (test)")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    embedder = StaticEmbedder.find()
    assert embedder is not None, "the wordllama wheel is a dependency"
    vectors = embedder.embed_sync(["a patriotic person", "serving the country", "a toaster"])
    assert vectors.shape == (3, 256)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    assert isinstance(default_embedder(), StaticEmbedder)


def test_agents_of_one_gateway_share_the_packaged_embedder(tmp_path):
    # Each agent loading its own copy of the 16 MB model grew the gateway ~55 MB an agent.
    from clawgate.agent.memory.embeddings import make_embedder

    def no_llm():
        raise AssertionError("the builtin embedder needs no model client")

    first, second = make_embedder("builtin", no_llm), make_embedder("", no_llm)
    assert first is second is default_embedder()


# Auto-recall --------------------------------------------------------------------------


async def test_auto_recall_fires_on_day_one_and_stays_silent_on_small_talk(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- Ann's sister Rita lives in Lisbon.\n")
    write(ws, "2027-01-20.md", "- 09:00 Booked the dentist for a cleaning on Friday.\n")
    search = make_search(tmp_path, default_embedder())
    part = recall_part(search, MemoryConfig())
    try:
        recalled = await part(Trust.OWNER, "when is my dentist appointment?")
        assert recalled is not None and "Booked the dentist" in recalled.text
        recalled = await part(Trust.OWNER, "where does Rita live again?")
        assert recalled is not None and "Lisbon" in recalled.text
        for chatter in ("hi, how are you?", "thanks!", "ok good night", "你好", "lol"):
            assert await part(Trust.OWNER, chatter) is None, chatter
    finally:
        await search.close()


# Batch --------------------------------------------------------------------------------


async def test_batch_answers_each_line_in_order(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "2026-11-02.md", "- Booked the dentist for a cleaning.\n")
    write(ws, "2026-12-02.md", "- Bought oat milk.\n")
    search = make_search(tmp_path, HashedEmbedder())
    lines = [
        json.dumps({"q": "dentist", "k": 1}),
        "",
        json.dumps({"q": "dentist", "since": "2026-12-01"}),
        "not json",
        json.dumps({"q": "milk", "k": 0}),
    ]
    out = io.StringIO()
    try:
        errors = await run_batch(search, lines, out)
    finally:
        await search.close()
    results = [json.loads(line) for line in out.getvalue().splitlines()]
    assert errors == 2 and len(results) == 4
    assert results[0][0]["path"] == "memory/2026-11-02.md"
    assert set(results[0][0]) == {"path", "start_line", "end_line", "score", "snippet"}
    assert results[1] == []
    assert "error" in results[2] and "error" in results[3]


def test_batch_cli_round_trip(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "2026-11-02.md", "- Booked the dentist for a cleaning.\n")
    write(ws, "MEMORY.md", "- Ann's sister Rita lives in Lisbon.\n")
    config = tmp_path / "config.toml"
    config.write_text(f'workspace = "{ws}"\ndata_dir = "{tmp_path / "data"}"\n')
    requests = "\n".join(
        json.dumps(r) for r in ({"q": "dentist", "k": 1}, {"q": "where does Rita live", "k": 2})
    )
    run = subprocess.run(
        [sys.executable, "-m", "clawgate.gateway", "memory", "search", "--batch", "-"],
        input=requests,
        env={**os.environ, "CLAWGATE_CONFIG": str(config)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    first, second = (json.loads(line) for line in run.stdout.splitlines())
    assert first[0]["path"] == "memory/2026-11-02.md" and len(first) == 1
    assert second[0]["path"] == "memory/MEMORY.md"


# Chunks -------------------------------------------------------------------------------


def test_no_chunk_is_only_a_heading():
    long_block = "\n".join("word " * 60 for _ in range(30))
    text = f"# Title\n\n## Section\n\n{long_block}\n\n## Empty\n\n## Last\nText.\n"
    chunks = chunk_file("memory/MEMORY.md", text)
    for chunk in chunks:
        assert any(not line.startswith("#") for line in chunk.text.splitlines() if line.strip())
    assert chunks[0].text.startswith("# Title\n\n## Section\n\nword")


# Index internals that search speed relies on ------------------------------------------


def test_vector_mean_follows_adds_replacements_and_removals():
    rng = np.random.default_rng(1)
    matrix = VectorMatrix()
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    matrix.add(list(range(6)), vectors)
    matrix.remove([1, 4])
    matrix.add([2, 7], vectors[:2] * 2)
    live = {0: vectors[0], 3: vectors[3], 5: vectors[5], 2: vectors[0] * 2, 7: vectors[1] * 2}
    query = rng.normal(size=8).astype(np.float32)
    expected = np.mean([v @ query for v in live.values()])
    assert matrix.mean(query) == pytest.approx(expected, rel=1e-5)


async def test_document_frequencies_follow_the_files(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "2026-01-01.md", "- Lisbon trip.\n")
    search = make_search(tmp_path)
    try:
        await search.index.refresh()
        assert await search.index.doc_freqs(["lisbon", "porto"]) == (1, {"lisbon": 1, "porto": 0})
        write(ws, "2026-01-02.md", "- Porto and Lisbon.\n")
        await search.index.refresh()
        assert await search.index.doc_freqs(["lisbon", "porto"]) == (2, {"lisbon": 2, "porto": 1})
    finally:
        await search.close()


async def test_chunks_of_an_older_chunker_are_cut_again_keeping_their_vectors(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "- Ann's sister Rita lives in Lisbon.\n- Ann's cat is Miso.\n")
    search = make_search(tmp_path, HashedEmbedder())
    await search.index.refresh()
    db_path = search.index.db_path
    await search.close()
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'chunker'")
        db.execute("DELETE FROM chunks WHERE start_line = 2")  # as if cut otherwise before
    again = make_search(tmp_path, HashedEmbedder())
    try:
        report = await again.index.refresh()
        # Both chunks cut again; both vectors come from the cache.
        assert report.chunks_added == 2 and report.embedded == 0
        hits = await again.search("Miso")
        assert hits and hits[0].start_line == 2
    finally:
        await again.close()


async def test_a_chunk_a_keyword_list_stopped_before_counts_as_holding_the_words(tmp_path):
    """More chunks hold the question's name alike than a keyword list keeps: the answer, a
    word longer so last of them by BM25, comes by meaning. It holds the name as well as the
    chunks the list kept, so its keyword evidence is theirs, not half of it: which of many
    equals a limit happened to keep is no evidence."""
    ws = tmp_path / "ws"
    answer = "Maya started a new job at Lumen Labs today."
    write(ws, "2026-03-02.md", f"- {answer}\n")
    for n in range(80):
        day = date.fromordinal(date(2026, 6, 1).toordinal() + n)
        write(ws, f"{day.isoformat()}.md", f"- Maya planned the week ahead, day {n}.\n")
    seen: dict[str, float] = {}  # each candidate's keyword evidence, by its text

    class Watching(Reranker):
        def order(self, cands, rows, weights, recency_weight=0.0, first=None):
            seen.update((rows[c.id].text.strip("- \n"), c.t) for c in cands)
            return super().order(cands, rows, weights, recency_weight, first)

    index = MemoryIndex.for_workspace(ws, tmp_path / "data", default_embedder())
    search = MemorySearch(index, MemorySearchConfig(), today=lambda: TODAY, reranker=Watching())
    try:
        await search.search("Where does Maya work now?")
    finally:
        await search.close()
    fillers = [v for text, v in seen.items() if text != answer]
    assert answer in seen and len(fillers) >= 10
    # The same keyword evidence as the best filler: the wide list's last value is its first's.
    assert seen[answer] == pytest.approx(max(fillers))


def test_a_list_that_stopped_gives_its_last_value_to_the_chunks_holding_words_it_left_out():
    raw = {"chunks_fts": {1: 8.0, 2: 4.0}, "chunks_tri": {5: 3.0}, "cjk": {3: 0.4}}
    cut = {"chunks_fts": 4.0, "cjk": 0.4}  # the trigram list did not stop: 6 matched nothing
    found = fusion.keyword_evidence(raw, cut=cut, holding=[2, 3, 4, 6])
    assert found == {1: 1.0, 2: 0.5, 3: 0.5, 4: 0.5, 5: 1.0, 6: 0.5}
    # 7 holds no word of the question: no list could have held it.
    assert 7 not in fusion.keyword_evidence(raw, cut=cut, holding=[4])
    # Only a side's first few count: a chunk past them gets the value they stopped at.
    only = {"chunks_fts": {1}, "chunks_tri": {5}, "cjk": {3}}
    narrow = fusion.keyword_evidence(raw, only, cut={"chunks_fts": 8.0}, holding=[2])
    assert narrow == {1: 1.0, 2: 1.0, 3: 0.4, 5: 1.0}
    assert fusion.keyword_evidence(raw, only) == {1: 1.0, 3: 0.4, 5: 1.0}

"""Issue 17: questions that name their subject only through another fact (the second hop),
and the stemmer that lets "live" in a question meet "lives" in memory."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from clawgate.agent.memory import multihop
from clawgate.agent.memory.embeddings import HashedEmbedder
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.multihop import Text, best_pair
from clawgate.agent.memory.search import MemorySearch, terms
from clawgate.agent.memory.tokens import stem
from clawgate.kernel.config import MemorySearchConfig

TODAY = date(2027, 1, 20)
PEOPLE = [
    ("Maya", "Pepper", "beagle", "brother", "Glasgow", "Lumen Labs"),
    ("Tom", "Biscuit", "tabby cat", "brother", "Valencia", "Harbor Freight"),
    ("Priya", "Kiwi", "parrot", "brother", "Leeds", "Northwind Clinic"),
    ("Jonas", "Blitz", "greyhound", "aunt", "Hamburg", "Copperleaf Studio"),
]


def write(workspace: Path, name: str, body: str) -> None:
    path = workspace / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def people(workspace: Path) -> None:
    """Each person's relative, pet and job, and everyday lines, each in a day's log (one
    chunk each), so that no name is in most chunks."""
    for day, (n, pet, kind, rel, city, employer) in enumerate(PEOPLE, 1):
        # Maya's relative is the oldest news: recency alone would rank the others first.
        write(workspace, f"2025-0{day}-01.md", f"- {n}'s {rel} lives in {city}.\n")
        write(
            workspace,
            f"2026-0{day}-10.md",
            f"- {n} adopted a {kind} named {pet} from the shelter.\n",
        )
        write(workspace, f"2026-0{day}-20.md", f"- {n} started a new job at {employer}.\n")
        write(workspace, f"2026-1{day - 1}-05.md", f"- {n} watched a film and went to bed early.\n")
        write(workspace, f"2026-1{day - 1}-15.md", f"- {n} planned the week ahead.\n")


def make_search(tmp_path: Path, embedder=None) -> MemorySearch:
    index = MemoryIndex.for_workspace(tmp_path / "ws", tmp_path / "data", embedder)
    return MemorySearch(index, MemorySearchConfig(), today=lambda: TODAY)


@pytest.mark.parametrize("embedder", [None, HashedEmbedder()], ids=["keyword", "hashed"])
async def test_a_two_hop_question_is_answered_through_the_bridging_name(tmp_path, embedder):
    # Three people's brothers live somewhere: only Pepper's adoption names whose.
    people(tmp_path / "ws")
    search = make_search(tmp_path, embedder)
    try:
        hits = await search.search("Which city does the brother of Pepper's owner live in?")
        assert "Glasgow" in hits[0].snippet and "Valencia" not in hits[0].snippet
        # The bridge comes with it: the fact that says who Pepper's owner is.
        assert "Pepper" in hits[1].snippet
        hits = await search.search("Where does the aunt of the Copperleaf Studio hire live?")
        assert "Hamburg" in hits[0].snippet
    finally:
        await search.close()


async def test_the_bridge_is_found_when_the_lead_holds_the_same_fact_of_other_people(tmp_path):
    """Each person's blood type is a fact of MEMORY.md, and the reranker's first places go
    to those facts: they hold the question's rarest words but not its employer. The chunk
    naming the employer leads the first stage's order, and the hop starts from there."""
    ws = tmp_path / "ws"
    types = ["B negative", "A negative", "AB positive", "O negative", "A positive", "O positive"]
    names = ["Tom", "Elena", "Jonas", "Sam", "Maya", "Priya"]
    hobbies = ["chess", "tea", "jazz", "golf", "yoga", "maps"]
    write(
        ws,
        "MEMORY.md",
        "".join(
            f"- {n}'s blood type is {t}.\n- {n} likes {h}.\n- {n} was born in {1980 + i}.\n"
            for i, (n, t, h) in enumerate(zip(names, types, hobbies, strict=True))
        ),
    )
    write(ws, "2026-11-16.md", "- Priya started a new job at Northwind Clinic.\n")
    for day in range(1, 7):
        write(
            ws, f"2026-10-0{day}.md", "- Priya had a long day at Northwind Clinic and felt tired.\n"
        )
    search = make_search(tmp_path, HashedEmbedder())
    try:
        hits = await search.search("What blood type does the Northwind Clinic employee have?")
        # Together the two hold the whole question; each alone holds half of it.
        pair = {hits[0].snippet, hits[1].snippet}
        assert pair == {
            "- Priya started a new job at Northwind Clinic.",
            "- Priya's blood type is O positive.",
        }
    finally:
        await search.close()


async def test_a_chinese_two_hop_question_is_answered_through_the_bridging_name(tmp_path):
    ws = tmp_path / "ws"
    for month, name, city in ((6, "李伟", "成都"), (7, "张强", "西安"), (8, "王芳", "青岛")):
        write(ws, f"2026-0{month}-01.md", f"- {name}的姐姐住在{city}。\n")
    write(ws, "2026-03-01.md", "- 李伟养了一只柯基，叫豆豆。\n")
    write(ws, "2026-04-01.md", "- 王芳养了一只橘猫，叫年糕。\n")
    for day, name in enumerate(["王芳", "张强", "李伟", "王芳"], 10):
        write(ws, f"2026-05-{day}.md", f"- {name}看了一部电影，早早睡了。\n")
    search = make_search(tmp_path)
    try:
        hits = await search.search("养豆豆的人，姐姐住在哪个城市？")
        assert "成都" in hits[0].snippet
    finally:
        await search.close()


def test_live_and_lives_are_one_word():
    assert stem("lives") == stem("live")
    assert stem("boxes") == "box" and stem("dishes") == "dish"
    assert terms("Where does her brother live?") <= terms("Her brother lives in Glasgow.")


def _text(i: int, text: str) -> Text:
    return Text(i, terms(text), multihop.link_terms(text))


def test_two_partial_answers_about_the_named_subject_are_not_a_chain():
    # Both lines hold the question's name: neither reaches the other through it.
    weights = {t: 1.0 for t in terms("What is the name of Maya's pet beagle?")}
    first = [_text(1, "Maya walked the beagle in the park.")]
    second = [_text(2, "Maya's pet rabbit is named Nube.")]
    idf = {t: 3.0 for t in ("walk", "park", "rabbit", "nube")}
    assert best_pair(first, second, weights, idf, single=0.5, evidence={}) is None


def test_a_link_in_most_chunks_links_nothing():
    # The name is the question's rarest word: the line holding it is the bridge.
    weights = {"city": 2.0, "brother": 2.0, "pepper": 5.0, "live": 2.0}
    first = [_text(1, "(telegram:1) Maya adopted a beagle named Pepper.")]
    second = [_text(2, "(telegram:1) Tom's brother lives in Valencia.")]
    idf = {"telegram": 0.02, "maya": 3.0, "adopt": 3.0, "beagle": 3.0, "nam": 3.0}
    assert best_pair(first, second, weights, idf, single=0.5, evidence={}) is None
    # The same two through a rare name are a chain, and the line the name leads to answers.
    second = [_text(2, "(telegram:1) Maya's brother lives in Glasgow.")]
    pair = best_pair(first, second, weights, idf, single=0.5, evidence={})
    assert pair is not None and (pair.answer, pair.bridge) == (2, 1)
    assert pair.link == pytest.approx(3.0) and pair.link >= multihop.MIN_LINK_IDF


async def test_no_second_search_when_the_best_hit_covers_the_question(tmp_path):
    people(tmp_path / "ws")
    search = make_search(tmp_path)
    asked: list[tuple[str, str]] = []
    original = search._keyword_ids

    async def spy(missing, links, limit, window):
        asked.append((missing, links))
        return await original(missing, links, limit, window)

    search._keyword_ids = spy  # type: ignore[method-assign]
    try:
        hits = await search.search("Where does Maya's brother live?")
        assert "Glasgow" in hits[0].snippet and asked == []
        await search.search("Which city does the brother of Pepper's owner live in?")
        assert asked and "maya" in asked[0][1]
    finally:
        await search.close()


async def test_one_entry_holding_the_question_beats_words_scattered_over_a_days_log(tmp_path):
    ws = tmp_path / "ws"
    write(
        ws,
        "2026-01-29.md",
        "- 20:35 Maya changed mobile provider to Vodafone on a 20 GB plan after a long call"
        " about the contract, the roaming fees and the old handset.\n",
    )
    # Newer, shorter, and holding every word of the question - in two people's entries.
    write(
        ws,
        "2026-06-19.md",
        "- 11:35 Maya asked for a quick dinner idea.\n- 15:05 Ravi changed mobile provider.\n",
    )
    for day in range(10, 16):
        write(ws, f"2026-11-{day}.md", f"- Tom planned the week ahead, day {day}.\n")
    search = make_search(tmp_path)
    try:
        hits = await search.search("Which mobile provider is Maya with?")
        assert hits[0].path == "memory/2026-01-29.md"
    finally:
        await search.close()

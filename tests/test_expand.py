"""Query expansion from the memory's own vocabulary (agent/memory/expand.py): which words
go with which, how much each counts, and the answer it lifts out of small talk that holds
the question's words as well as the answer does."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from clawgate.agent.memory.expand import (
    EXPAND_TIE,
    MAX_CHUNKS,
    Associations,
    Companions,
    tie_breaks,
)
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.index_db import ChunkRow
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig

TODAY = date(2027, 6, 30)
OTHERS = "Tom Priya Jonas Elena Sam".split()
PRACTICES = "Harbour Westgate Riverside Central Parkview".split()
ANSWER = "Maya: I switched dentists, it's Dr Haddad at the Elm Street practice now."


def _texts() -> list[str]:
    said = [
        f"{n}: I switched dentists, it's Dr Okafor at the {p} practice now."
        for n, p in zip(OTHERS, PRACTICES, strict=True)
    ]
    chatter = [f"{n}: the weather was grey and wet again." for n in OTHERS] * 4
    return (
        said
        + ["Maya: I need to call the dentist about a bill.", "Maya: 10:05 07 2027"] * 4
        + chatter
    )


def test_words_that_share_lines_are_associates_and_speakers_and_numbers_are_not():
    table = Associations.build(_texts())
    found = table.expand({"dentist": 1.0})
    assert {"switch", "practice", "dr", "okafor"} <= set(found)
    assert "maya" not in found  # who said it, not what was said
    assert not any(w.isdigit() for w in table.df)
    # "bill" shares four lines with "dentist", "okafor" five: both go with it, and
    # strengths are shares of the most a word can have with "dentist".
    assert 0 < found["bill"] <= 1 and 0 < found["okafor"] <= 1
    assert table.expand({"tuesday": 1.0}) == {}


def test_a_light_query_word_brings_lighter_associates():
    table = Associations.build(_texts())
    heavy = table.weights({"dentist": 4.0, "bill": 1.0})
    light = table.weights({"dentist": 1.0, "bill": 4.0})
    assert heavy["practice"] > light["practice"]


def test_tie_breaks_are_bounded_and_follow_the_associates():
    weights = {"practice": 2.0, "switch": 1.0}
    texts = {1: ANSWER, 2: "Maya: call the dentist\nMaya: a bill", 3: ""}
    rows = {c: ChunkRow(c, "memory/x.md", 1, 2, None, text) for c, text in texts.items()}
    ties = tie_breaks(weights, rows)
    assert ties[1] == EXPAND_TIE
    assert ties[2] == ties[3] == 0.0
    assert tie_breaks({}, rows) == {}


async def test_no_table_for_an_empty_or_too_large_memory():
    companions = Companions()

    async def texts() -> list[str]:
        return _texts()

    assert await companions.get(0, texts) is None
    assert await companions.get(MAX_CHUNKS + 1, texts) is None
    table = await companions.get(12, texts)
    assert table is not None and table.lines == len(_texts()) - 4  # lines without a word
    await companions.close()


def _workspace(root: Path) -> Path:
    """Forty days of small talk, Maya's about her dentist, others' dentists on five of them,
    and her answer said once, on a day as long as the others."""
    memory = root / "memory"
    memory.mkdir(parents=True)
    for n in range(40):
        day = TODAY - timedelta(days=n + 1)
        lines = [f"# {day.isoformat()}", "", "## 10:05 telegram:1000 (private)"]
        lines += ["Maya: I need to call the dentist about a bill.", "Maya: long day, tired."]
        lines += [f"{n}: the weather was grey and wet again." for n in OTHERS]
        if n < 5:
            lines.append(
                f"{OTHERS[n]}: I switched dentists, it's Dr Okafor at the {PRACTICES[n]} practice now."
            )
        lines.append(ANSWER if n == 23 else "Maya: the dentist wants me back in six months.")
        (memory / f"{day.isoformat()}.md").write_text("\n".join(lines) + "\n")
    return root


async def _first(search: MemorySearch, question: str) -> str:
    """The lines of the first hit."""
    hits = await search.search(question, max_results=5)
    lines = (search.index.workspace / hits[0].path).read_text().splitlines()
    return "\n".join(lines[hits[0].start_line - 1 : hits[0].end_line])


async def test_the_answer_is_lifted_out_of_small_talk_that_holds_the_question_as_well(tmp_path):
    workspace = _workspace(tmp_path / "ws")
    config = MemorySearchConfig()
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", None)
    expanded = MemorySearch(index, config, today=lambda: TODAY)
    plain = MemorySearch(index, config, today=lambda: TODAY, expand=False)
    try:
        assert "Dr Haddad" in await _first(expanded, "Who is Maya's dentist now?")
        assert "Dr Haddad" not in await _first(plain, "Who is Maya's dentist now?")
        # A word the memory never uses: a paraphrase, left to the vector side as before.
        question = "Does Maya see an orthodontist?"
        assert await expanded.search(question) == await plain.search(question)
        # A date in the question: the day is the evidence.
        day = TODAY - timedelta(days=24)
        question = f"What did Maya say about the dentist on {day:%B} {day.day}?"
        assert await expanded.search(question) == await plain.search(question)
    finally:
        await expanded.close()

"""A summary that starts with its own timestamp is stamped once, and its note named by topic."""

from __future__ import annotations

import re

import pytest

from clawgate.agent.memory.answer import validate
from tests.fakes.llm import text, tool_call


@pytest.mark.parametrize(
    "entry",
    [
        "[2026-05-01 09:30] Talked about tea.",
        "[2026-05-01 09:30] (cli:default) Talked about tea.",
        "2026-05-01 09:30: Talked about tea.",
        "2026-05-01T09:30Z - Talked about tea.",
        "[2026-05-01] Talked about tea.",
        "  Talked about tea.",
    ],
)
def test_leading_stamp_is_dropped(entry: str) -> None:
    assert validate({"history_entry": entry}, "", owner=True) == ("Talked about tea.", None)


def test_a_date_inside_the_entry_stays() -> None:
    entry = "Booked the dentist for 2026-05-02 10:00."
    assert validate({"history_entry": entry}, "", owner=True)[0] == entry


async def test_new_after_a_stamped_summary_stamps_once(harness, fake_llm) -> None:
    fake_llm.script(text("Sounds fun."))
    await harness.ask("let us plan a trip")
    fake_llm.script(tool_call("save_memory", history_entry="[2026-05-01 09:30] Planned a trip."))
    await harness.ask("/new")
    assert await harness.runtime.consolidator.drain(10)
    memory = harness.workspace / "memory"
    history = (memory / "HISTORY.md").read_text()
    assert re.search(r"\] \(test:1\) Planned a trip\.", history)
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d", history)) == 1
    daily = [p for p in memory.glob("????-??-??.md")]
    assert daily and "09:30" not in daily[0].read_text()
    notes = sorted(p.name for p in memory.glob("????-??-??-*.md"))
    assert len(notes) == 1 and notes[0].endswith("-planned-a-trip.md"), notes

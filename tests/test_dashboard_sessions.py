"""The sessions pages through aiohttp's test client over the real app and a running
in-process gateway: the list (channel, trust, messages, last activity), a transcript
(messages, tool calls, delivery status, consolidated ranges shaded), the archive, and path
confinement."""

from __future__ import annotations

import re

import pytest

from clawgate.agent.session import Consolidation
from clawgate.kernel.bus import Trust
from tests.dashboard_harness import DashboardClient, dashboard
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.memory_helpers import save

__all__ = ["dashboard"]


async def test_every_session_is_listed_with_channel_trust_count_and_activity(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hello, Ann."), text("Hi all."))
    await dashboard.harness.ask("hi")
    await dashboard.harness.channel.say("hi group", chat_id="-5", trust=Trust.GROUP, sender="Bo")
    await dashboard.harness.channel.next_reply("-5")
    page = await dashboard.text("/sessions")
    rows = re.findall(r"<tr><td><a href=\"([^\"]+)\">([^<]+)</a></td>(.*?)</tr>", page, re.S)
    found = {key: (href, cells) for href, key, cells in rows}
    assert set(found) == {"test:1", "test:-5"}
    href, cells = found["test:1"]
    assert href == "/sessions/view?key=test%3A1"
    cell = dict(re.findall(r'<td[^>]*data-label="([^"]+)">([^<]*)</td>', cells))
    assert cell["Channel"] == "test" and cell["Trust"] == "owner" and cell["Messages"] == "2"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", cell["Last activity"])
    assert 'data-label="Trust">group</td>' in found["test:-5"][1]


async def test_a_transcript_shows_tool_calls_deliveries_and_consolidated_ranges(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    (dashboard.workspace / "notes.md").write_text("milk <eggs>\n", encoding="utf-8")
    fake_llm.script(tool_call("read_file", path="notes.md"), text("You need milk."))
    reply = await dashboard.harness.ask("what do I need?")
    assert reply.text == "You need milk."
    fake_llm.script(text("Bye."))
    await dashboard.harness.ask("bye")
    sessions = dashboard.services.sessions
    session = await sessions.get("test:1")
    # As a consolidation would: the first exchange is now covered by memory.
    sessions.append(session, Consolidation(from_seq=1, to_seq=4, mode="llm"))
    page = await dashboard.text("/sessions/view?key=test%3A1")
    items = re.findall(r'<li class="([^"]+)" id="seq-(\d+)">(.*?)</li>', page, re.S)
    classes = {int(seq): kind for kind, seq, _ in items}
    assert classes == {
        1: "user consolidated",
        2: "assistant consolidated",
        3: "tool consolidated",
        4: "assistant consolidated",
        5: "user",
        6: "assistant",
    }
    bodies = {int(seq): body for _, seq, body in items}
    assert "tool call <code>read_file</code>" in bodies[2] and "notes.md" in bodies[2]
    assert "milk &lt;eggs&gt;" in bodies[3]
    assert '<span class="badge sent"' in bodies[4] and '<span class="badge sent"' in bodies[6]
    assert "consolidation" in page  # the other records, folded


async def test_the_archive_lists_what_new_set_aside_and_shows_it(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Noted: the boat leaves at nine."))
    await dashboard.harness.ask("the boat leaves at nine")
    fake_llm.script(save("The boat leaves at nine."))  # the archive's consolidation
    await dashboard.harness.ask("/new")
    page = await dashboard.text("/sessions/archive")
    names = re.findall(r'href="/sessions/archive/([^"]+)"', page)
    assert len(names) == 1 and names[0].startswith("test_1.")
    transcript = await dashboard.text(f"/sessions/archive/{names[0]}")
    assert "Archived transcript" in transcript
    assert "the boat leaves at nine" in transcript


@pytest.mark.parametrize(
    "path",
    [
        "/sessions/view?key=../../config",
        "/sessions/view?key=",
        "/sessions/view?key=test:404",
        "/sessions/archive/..%2Ftest_1.jsonl",
        "/sessions/archive/..%2F..%2Fmemory%2FMEMORY.md",
        "/sessions/archive/nothing.jsonl",
        "/sessions/archive/%2Fetc%2Fpasswd",
    ],
)
async def test_transcript_paths_stay_inside_the_sessions_folders(
    dashboard: DashboardClient, fake_llm: FakeLLM, path: str
) -> None:
    fake_llm.script(text("Hello."))
    await dashboard.harness.ask("hi")
    response = await dashboard.get(path)
    assert response.status == 404, path

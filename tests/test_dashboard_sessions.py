"""The sessions pages through aiohttp's test client over the real app and a running
in-process gateway: the list (names, trust, unread and active markers, last activity), a
transcript (Markdown, speakers, tool calls as cards with their results, delivery status,
consolidated ranges shaded), the archive, and path confinement."""

from __future__ import annotations

import asyncio
import re

import pytest

from clawgate.agent.session import Consolidation
from clawgate.kernel.bus import Trust
from tests.dashboard_harness import DashboardClient, dashboard
from tests.fakes.llm import FakeLLM, gate, text, tool_call
from tests.memory_helpers import save

__all__ = ["dashboard"]


def rows(page: str) -> dict[str, tuple[str, str, str]]:
    """Each row of the sessions table by key: (link, name, the rest of the row)."""
    found = re.findall(r'<tr[^>]*><td><a href="([^"]+)">([^<]+)</a>(.*?)</tr>', page, re.S)
    keyed = {}
    for href, name, rest in found:
        key = re.search(r"<code>([^<]+)</code>", rest)
        assert key, rest
        keyed[key.group(1)] = (href, name, rest)
    return keyed


async def test_every_session_is_listed_by_name_with_trust_markers_and_activity(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hello, Ann."), text("Hi all."))
    await dashboard.harness.ask("hi")
    await dashboard.harness.channel.say("hi group", chat_id="-5", trust=Trust.GROUP, sender="Bo")
    await dashboard.harness.channel.next_reply("-5")
    found = rows(await dashboard.text("/sessions"))
    assert set(found) == {"test:1", "test:-5"}
    href, name, rest = found["test:1"]
    assert href == "/sessions/view?key=test%3A1" and name == "test user 1"
    cell = dict(re.findall(r'<td[^>]*data-label="([^"]+)">([^<]*)</td>', rest))
    assert cell["Trust"] == "owner" and cell["Messages"] == "2"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", cell["Last activity"])
    assert found["test:-5"][1] == "test group -5"
    assert 'data-label="Trust">group</td>' in found["test:-5"][2]
    assert "?" not in "".join(cells for _, _, cells in found.values())
    # Both are unread until their transcript is opened; nothing is replying now.
    assert all('class="badge unread"' in cells for _, _, cells in found.values())
    assert "replying" not in await dashboard.text("/sessions")

    group = await dashboard.text("/sessions/view?key=test%3A-5")
    assert '<span class="speaker">Bo</span>' in group and "<pre>hi group</pre>" in group
    found = rows(await dashboard.text("/sessions"))
    assert 'class="badge unread"' not in found["test:-5"][2]
    assert 'class="badge unread"' in found["test:1"][2]


async def test_a_session_running_a_turn_is_marked_active(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(gate(release, text("Done.")))
    await dashboard.harness.channel.say("slow one")
    await fake_llm.wait_for_requests(1)  # the message is stored; the turn waits on the model
    assert dashboard.services.dispatcher is not None
    assert dashboard.services.dispatcher.busy("test:1")
    assert 'class="badge active">replying' in await dashboard.text("/sessions")
    release.set()
    await dashboard.harness.channel.next_reply("1")


async def test_a_transcript_renders_markdown_cards_deliveries_and_consolidated_ranges(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    (dashboard.workspace / "notes.md").write_text("milk <eggs>\n", encoding="utf-8")
    fake_llm.script(tool_call("read_file", path="notes.md"), text("You need **milk**."))
    reply = await dashboard.harness.ask("what do I need?")
    assert reply.text == "You need **milk**."
    fake_llm.script(text("Bye."))
    await dashboard.harness.ask("bye")
    sessions = dashboard.services.sessions
    session = await sessions.get("test:1")
    # As a consolidation would: the first exchange is now covered by memory.
    sessions.append(session, Consolidation(from_seq=1, to_seq=4, mode="llm"))
    page = await dashboard.text("/sessions/view?key=test%3A1")
    assert "<title>test user 1 · clawgate</title>" in page
    items = re.findall(r'<li class="([^"]+)" id="seq-(\d+)">(.*?)</li>', page, re.S)
    classes = {int(seq): kind for kind, seq, _ in items}
    # The tool result (#3) is inside its call's card, not an entry of its own.
    assert classes == {
        1: "user consolidated",
        2: "assistant consolidated",
        4: "assistant consolidated",
        5: "user",
        6: "assistant",
    }
    bodies = {int(seq): body for _, seq, body in items}
    card = re.search(r'<details class="card tool-card">(.*?)</details>', bodies[2], re.S)
    assert card and "tool call <code>read_file</code>" in card.group(1)
    assert "notes.md" in card.group(1) and "milk &lt;eggs&gt;" in card.group(1)
    assert "You need <strong>milk</strong>." in bodies[4]
    assert re.search(r'<time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d</time>', bodies[1])
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
    assert "archived transcript" in transcript
    assert "the boat leaves at nine" in transcript
    # The live session links to what /new set aside.
    live = await dashboard.text("/sessions/view?key=test%3A1")
    assert "1 earlier conversation" in live and f'href="/sessions/archive/{names[0]}"' in live


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

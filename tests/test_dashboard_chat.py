"""The dashboard's chat through aiohttp's test client: the web channel on a running
in-process gateway, the fake model streaming over loopback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientResponse

from clawgate.agent.progress import ProgressWatchers
from clawgate.agent.session import Delivery
from clawgate.gateway.dashboard.web_channel import STREAM_BACKLOG, WebChannel
from clawgate.kernel.bus import MessageBus, OutboundMessage, Trust
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.secrets import Redactor
from tests.dashboard_harness import DashboardClient, chat, dashboard_client
from tests.fakes.llm import FakeLLM, gate, pause, text, tool_call
from tests.harness import make_config
from tests.memory_helpers import save

__all__ = ["chat"]


class Events:
    """One open event stream of a conversation, read event by event."""

    def __init__(self, response: ClientResponse) -> None:
        self.response = response
        self.seen: list[dict[str, Any]] = []

    async def next(self, timeout: float = 10) -> dict[str, Any]:
        async with asyncio.timeout(timeout):
            while True:
                line = await self.response.content.readline()
                if not line:
                    raise AssertionError(f"the event stream ended; seen {self.seen}")
                if line.startswith(b"data: "):
                    event: dict[str, Any] = json.loads(line[6:])
                    self.seen.append(event)
                    return event

    async def until(self, kind: str, timeout: float = 10) -> dict[str, Any]:
        """Read up to and including the next event of `kind`."""
        while True:
            event = await self.next(timeout)
            if event["type"] == kind:
                return event


async def open_events(client: DashboardClient, name: str = "owner") -> Events:
    response = await client.get(f"/chat/{name}/events")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert await response.content.readline() == b"retry: 2000\n"
    channel = client.harness.gateway.manager.channels["web"]
    assert isinstance(channel, WebChannel) and channel.watching(name) >= 1
    return Events(response)


async def say(client: DashboardClient, text: str, name: str = "owner") -> str:
    response = await client.post_json(f"/chat/{name}/send", {"text": text})
    assert response.status == 202, await response.text()
    return str((await response.json())["id"])


@pytest.mark.parametrize("model_path", ["direct", "litellm"])
async def test_the_reply_streams_then_arrives_whole_and_is_recorded(
    chat: DashboardClient, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text("Hello from the model, streamed."), after=2))
    events = await open_events(chat)
    message_id = await say(chat, "hi there")

    assert await events.next() == {"type": "user", "id": message_id, "text": "hi there"}
    first = await events.next()
    assert first == {"type": "delta", "text": "Hello ", "restart": False, "for": message_id}
    release.set()
    reply = await events.until("reply")
    deltas = [e["text"] for e in events.seen if e["type"] == "delta"]
    assert len(deltas) == 5 and "".join(deltas) == "Hello from the model, streamed."
    assert events.seen[-2]["type"] == "turn_ended"
    assert reply["text"] == "Hello from the model, streamed."
    assert reply["reply_to"] == message_id and not reply["is_error"]

    session = await chat.services.sessions.get("web:owner")
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.state.trust is Trust.OWNER
    assert [d.status for d in session.records_of(Delivery)] == ["sent"]


async def test_a_tool_call_shows_as_a_card_with_its_result(
    chat: DashboardClient, fake_llm: FakeLLM
) -> None:
    (chat.workspace / "notes.md").write_text("buy oat milk\n")
    fake_llm.script(tool_call("read_file", _id="call_r", path="notes.md"), text("Oat milk."))
    events = await open_events(chat)
    await say(chat, "what is on my list?")

    started = await events.until("tool_started")
    assert (started["call_id"], started["name"]) == ("call_r", "read_file")
    assert json.loads(started["arguments"]) == {"path": "notes.md"}
    finished = await events.until("tool_finished")
    assert finished["call_id"] == "call_r" and "buy oat milk" in finished["result"]
    assert (await events.until("reply"))["text"] == "Oat milk."

    page = await chat.text("/chat")
    assert "<details>" in page and "<code>read_file</code>" in page
    assert "buy oat milk" in page and "Oat milk." in page
    body = await (await chat.get("/chat/owner/transcript")).json()
    tool = next(item for item in body["items"] if item["kind"] == "tool")
    assert tool["name"] == "read_file" and "buy oat milk" in tool["result"]


async def test_stop_cancels_the_running_turn(chat: DashboardClient, fake_llm: FakeLLM) -> None:
    never = asyncio.Event()
    fake_llm.script(gate(never, text("too late")), text("Back again."))
    events = await open_events(chat)
    await say(chat, "think for a long time")
    await fake_llm.wait_for_requests(1)
    stop_id = await say(chat, "/stop")

    # The cancelled turn ends (and is recorded as stopped) before the /stop is answered.
    await events.until("turn_ended")
    stopped = await events.until("reply")
    assert stopped == {
        "type": "reply",
        "text": "Stopped.",
        "html": "<p>Stopped.</p>\n",
        "is_error": False,
        "reply_to": stop_id,
        "seq": None,
        "files": [],
    }
    await say(chat, "are you there?")
    assert (await events.until("reply"))["text"] == "Back again."
    assert "too late" not in await chat.text("/chat")


async def test_new_starts_an_empty_session_and_archives_the_old(
    chat: DashboardClient, fake_llm: FakeLLM
) -> None:
    # The second reply answers the archived transcript's consolidation.
    fake_llm.script(text("First answer."), save("The owner asked a first question."))
    events = await open_events(chat)
    await say(chat, "first question")
    await events.until("reply")
    await say(chat, "/new")
    assert (await events.until("reply"))["text"] == "New session started."

    body = await (await chat.get("/chat/owner/transcript")).json()
    assert body["items"] == []
    assert "First answer." not in await chat.text("/chat")
    archived = list((chat.workspace / "sessions" / "archive").glob("web_owner.*.jsonl"))
    assert len(archived) == 1 and "First answer." in archived[0].read_text()


async def test_slash_commands_are_listed_and_answered(chat: DashboardClient) -> None:
    page = await chat.text("/chat")
    for command in ("/new", "/stop", "/model", "/status", "/compact", "/context", "/help"):
        assert f'data-command="{command}"' in page
    assert '<script src="/static/chat.js" defer></script>' in page
    events = await open_events(chat)
    await say(chat, "/status")
    status = (await events.until("reply"))["text"]
    assert "web:owner" in status and "owner" in status


async def test_the_transcript_is_shown_on_load_escaped(
    chat: DashboardClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Noted: <b>bold</b> & more."))
    events = await open_events(chat)
    await say(chat, "<script>alert(1)</script>")
    await events.until("reply")
    page = await chat.text("/chat/owner")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)</script>" not in page
    assert "Noted: &lt;b&gt;bold&lt;/b&gt; &amp; more." in page


async def test_named_conversations_are_separate_sessions(
    chat: DashboardClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Work answer."))
    events = await open_events(chat, "work")
    await say(chat, "a work question", name="work")
    assert (await events.until("reply"))["text"] == "Work answer."
    assert (await chat.services.sessions.get("web:work")).messages
    assert not (await chat.services.sessions.get("web:owner")).messages

    opened = await chat.get("/chat?c=work", allow_redirects=False)
    assert opened.status == 303 and opened.headers["Location"] == "/chat/work"
    page = await chat.text("/chat")
    assert '<option value="work">' in page and '<option value="owner">' in page
    assert (await chat.get("/chat/no%20spaces")).status == 404
    assert (await chat.post_json("/chat/a.b/send", {"text": "x"})).status == 404


async def test_a_form_post_works_without_script(chat: DashboardClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(text("Answered a form."))
    response = await chat.post_form("/chat/owner/send", {"text": "from a plain form"})
    assert response.status == 303 and response.headers["Location"] == "/chat/owner"
    await fake_llm.wait_for_requests(1)
    await chat.harness.gateway.default.dispatcher.wait_idle(10)
    page = await chat.text("/chat/owner")
    assert "from a plain form" in page


async def test_bad_sends_are_refused(chat: DashboardClient) -> None:
    assert (await chat.post_json("/chat/owner/send", {"text": "  "})).status == 400
    assert (await chat.post_json("/chat/owner/send", {"nope": 1})).status == 400
    assert (await chat.post_json("/chat/owner/send", ["text"])).status == 400


async def test_without_login_or_token_nothing_is_sent(
    chat: DashboardClient, fake_llm: FakeLLM
) -> None:
    anonymous = await chat.anonymous()
    try:
        page = await anonymous.get("/chat", allow_redirects=False, headers={"Accept": "text/html"})
        assert page.status == 303 and page.headers["Location"] == "/login"
        stream = await anonymous.get("/chat/owner/events", headers={"Accept": "text/event-stream"})
        assert stream.status == 401
        posted = await anonymous.post("/chat/owner/send", json={"text": "hi"})
        assert posted.status in (401, 403)
        transcript = await anonymous.get(
            "/chat/owner/transcript", headers={"Accept": "application/json"}
        )
        assert transcript.status == 401
    finally:
        await anonymous.close()

    no_token = await chat.client.post("/chat/owner/send", json={"text": "hi"})
    assert no_token.status == 403
    wrong = await chat.client.post(
        "/chat/owner/send", json={"text": "hi"}, headers={"X-CSRF-Token": "forged"}
    )
    assert wrong.status == 403
    cross = await chat.post_json(
        "/chat/owner/send", {"text": "hi"}, headers={"Origin": "http://evil.example"}
    )
    assert cross.status == 403
    form = await chat.post_form("/chat/owner/send", {"text": "hi"}, csrf=False)
    assert form.status == 403
    assert fake_llm.requests == []
    assert not (await chat.services.sessions.get("web:owner")).messages


async def test_a_page_without_the_web_channel_says_so(
    tmp_path: Path, agent_config: AgentConfig
) -> None:
    async with dashboard_client(make_config(tmp_path, agent_config)) as client:
        assert "The web chat is not running" in await client.text("/chat")
        assert (await client.post_json("/chat/owner/send", {"text": "hi"})).status == 503


async def test_a_tab_that_stops_reading_is_dropped_not_waited_for() -> None:
    channel = WebChannel(MessageBus(), [ProgressWatchers(Redactor())], "main")
    await channel.start()
    async with channel.events("owner") as slow, channel.events("owner") as fast:
        for i in range(STREAM_BACKLOG + 1):
            await channel.send(OutboundMessage(channel="web", chat_id="owner", text=f"r{i}"))
            while not fast.empty():
                assert (event := fast.get_nowait()) is not None and event["text"] == f"r{i}"
        assert channel.watching("owner") == 1
        drained = [slow.get_nowait() for _ in range(slow.qsize())]
        assert drained[-1] is None and len(drained) == STREAM_BACKLOG
    assert channel.watching("owner") == 0
    await channel.stop()


async def test_the_event_streams_end_when_the_channel_stops(chat: DashboardClient) -> None:
    events = await open_events(chat)
    await chat.harness.gateway.manager.channels["web"].stop()
    # read() returns at the end of the body: the stream closed, with no event in it.
    assert (await events.response.content.read()).strip() == b""
    refused = await chat.post_json("/chat/owner/send", {"text": "hi"})
    assert refused.status == 503

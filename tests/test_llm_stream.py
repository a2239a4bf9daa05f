"""Streamed completions through both model paths, against the fake over loopback."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from clawgate.agent.llm import LLMClient, LLMResponse, TextDelta, ToolCall
from clawgate.agent.llm.direct import parse_chunk, whole_chunk
from clawgate.agent.llm.stream import StreamAssembler
from clawgate.agent.progress import (
    MAX_SHOWN_CHARS,
    Progress,
    ToolFinished,
    ToolStarted,
    TurnEnded,
)
from clawgate.kernel.bus import InboundMessage, Trust
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
from tests.conftest import LoopClock, MakeClient
from tests.fakes.llm import (
    FakeLLM,
    call,
    cut,
    error,
    hang,
    pause,
    text,
    tool_call,
    tool_calls,
)
from tests.harness import Harness

USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture(params=["direct", "litellm"])
def model_path(request: pytest.FixtureRequest) -> str:
    """Every test here runs through both model paths (see tests/conftest.py)."""
    return str(request.param)


class Sleepless:
    async def __call__(self, seconds: float) -> None:
        pass


@pytest.fixture
def client(agent_config: AgentConfig, make_client: MakeClient) -> LLMClient:
    return make_client(agent_config, sleep=Sleepless())


class Deltas:
    """Records what a listener receives; `arrived` is set by the first delta."""

    def __init__(self) -> None:
        self.received: list[TextDelta] = []
        self.arrived = asyncio.Event()

    async def __call__(self, delta: TextDelta) -> None:
        self.received.append(delta)
        self.arrived.set()

    @property
    def text(self) -> str:
        return "".join(d.text for d in self.received)


async def test_text_arrives_in_pieces_and_the_response_is_unchanged(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("one two three four"), text("one two three four"))
    deltas = Deltas()
    streamed = await client.chat(USER, on_delta=deltas)
    plain = await client.chat(USER)

    assert [d.text for d in deltas.received] == ["one ", "two ", "three ", "four"]
    assert not any(d.restart for d in deltas.received)
    assert streamed.content == plain.content == "one two three four"
    assert streamed.finish_reason == plain.finish_reason == "stop"
    assert streamed.usage == plain.usage and streamed.usage["completion_tokens"] == 4
    first, second = fake_llm.requests
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert "stream" not in second


async def test_tool_calls_are_assembled_across_chunks(client: LLMClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(
        tool_calls(
            call("read_file", "call_a", path="notes/todo.md"),
            call("exec", "call_b", command="ls -la"),
            content="Looking.",
        )
    )
    deltas = Deltas()
    response = await client.chat(USER, tools=[], on_delta=deltas)

    assert response.content == deltas.text == "Looking."
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall("call_a", "read_file", json.dumps({"path": "notes/todo.md"})),
        ToolCall("call_b", "exec", json.dumps({"command": "ls -la"})),
    ]
    assert response.usage["total_tokens"] > 0


async def test_an_event_line_longer_than_a_read_buffer_arrives_whole(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    # Each half of these arguments is one SSE line of ~600 KB, past what aiohttp's readline
    # takes (twice its read buffer: 512 KiB by default).
    content = "x" * 1_200_000
    fake_llm.script(tool_calls(call("write_file", "call_w", path="big.txt", content=content)))
    response = await client.chat(USER, tools=[], on_delta=Deltas())

    assert response.tool_calls == [
        ToolCall("call_w", "write_file", json.dumps({"path": "big.txt", "content": content}))
    ]


async def test_a_tool_call_without_text_sends_no_delta(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(tool_call("list_dir", _id="call_l", path="."))
    deltas = Deltas()
    response = await client.chat(USER, on_delta=deltas)
    assert deltas.received == []
    assert response.content is None
    assert response.tool_calls == [ToolCall("call_l", "list_dir", '{"path": "."}')]


async def test_partial_text_is_visible_before_the_answer_ends(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text("first second third"), after=2))
    deltas = Deltas()
    reply = asyncio.create_task(client.chat(USER, on_delta=deltas))
    await asyncio.wait_for(deltas.arrived.wait(), 5)
    assert deltas.text == "first " and not reply.done()
    release.set()
    assert (await reply).content == "first second third"
    assert deltas.text == "first second third"


async def test_an_error_before_any_text_is_retried_as_without_streaming(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(error(503), error(429, retry_after=0), text("fine now"))
    deltas = Deltas()
    response = await client.chat(USER, on_delta=deltas)
    assert response.content == "fine now"
    assert [d.restart for d in deltas.received] == [False, False]
    assert len(fake_llm.requests) == 3


async def test_a_stream_cut_mid_answer_is_retried_and_the_listener_told_to_start_over(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(cut(text("alpha beta gamma delta epsilon zeta")), text("whole answer"))
    deltas = Deltas()
    response = await client.chat(USER, on_delta=deltas)

    assert response.content == "whole answer"
    assert len(fake_llm.requests) == 2
    restarts = [i for i, d in enumerate(deltas.received) if d.restart]
    # Some of the cut answer arrived first; the retry's first delta says to drop it.
    assert len(restarts) == 1 and restarts[0] > 0
    assert "".join(d.text for d in deltas.received[restarts[0] :]) == "whole answer"


async def test_a_stream_that_goes_quiet_times_out_and_falls_back(
    fake_llm: FakeLLM, agent_config: AgentConfig, make_client: MakeClient, loop_clock: LoopClock
) -> None:
    config = agent_config.model_copy(
        update={"max_retries": 0, "fallback_models": ["openai/fallback-model"]}
    )
    client = make_client(config, sleep=Sleepless())
    fake_llm.script(hang(), text("from the fallback"))
    reply = asyncio.create_task(client.chat(USER, on_delta=Deltas()))
    await fake_llm.wait_for_requests(1)
    # The first model has gone quiet for the whole request_timeout: move the clock past it
    # rather than wait; the fallback then answers within a request_timeout of its own.
    loop_clock.advance(config.request_timeout)
    response = await asyncio.wait_for(reply, config.request_timeout * 2)
    assert response.content == "from the fallback"
    assert [r["model"] for r in fake_llm.requests] == ["fake-model", "fallback-model"]


async def test_failures_are_classified_the_same_as_without_streaming(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(error(400, "bad things"))
    with pytest.raises(ModelUnavailable) as streamed:
        await client.chat(USER, on_delta=Deltas())
    fake_llm.script(error(400, "bad things"))
    with pytest.raises(ModelUnavailable) as plain:
        await client.chat(USER)
    assert str(streamed.value) == str(plain.value)
    assert type(streamed.value) is type(plain.value)


# --- through the loop: progress events for the channels that watch ---


class Watcher:
    def __init__(self) -> None:
        self.events: list[tuple[str, Progress]] = []
        self.ended = asyncio.Event()

    async def __call__(self, message: InboundMessage, event: Progress) -> None:
        self.events.append((message.chat_id, event))
        if isinstance(event, TurnEnded):
            self.ended.set()


async def test_a_watched_channel_sees_text_tools_and_the_end_of_each_turn(
    harness: Harness, fake_llm: FakeLLM
) -> None:
    watcher = Watcher()
    harness.runtime.loop.progress.watch("test", watcher)
    fake_llm.script(
        tool_call("write_file", _id="call_w", path="note.md", content="key sk-test-secret"),
        text("Saved it for you."),
    )
    reply = await harness.ask("note my key")
    await asyncio.wait_for(watcher.ended.wait(), 5)

    assert reply.text == "Saved it for you."
    kinds = [type(event).__name__ for _, event in watcher.events]
    assert kinds == ["ToolStarted", "ToolFinished", *["TextDelta"] * 4, "TurnEnded"]
    started, finished = (event for _, event in watcher.events[:2])
    assert isinstance(started, ToolStarted) and isinstance(finished, ToolFinished)
    assert (started.call_id, started.name) == ("call_w", "write_file")
    assert "sk-test-secret" not in started.arguments and "[REDACTED]" in started.arguments
    assert finished.call_id == "call_w" and finished.result.startswith("Wrote")
    deltas = [event.text for _, event in watcher.events if isinstance(event, TextDelta)]
    assert "".join(deltas) == reply.text
    assert {chat for chat, _ in watcher.events} == {"1"}
    assert all(request.get("stream") for request in fake_llm.requests)


async def test_long_tool_results_are_cut_for_the_watcher(
    harness: Harness, fake_llm: FakeLLM
) -> None:
    (harness.workspace / "big.txt").write_text("x" * (MAX_SHOWN_CHARS * 3))
    watcher = Watcher()
    harness.runtime.loop.progress.watch("test", watcher)
    fake_llm.script(tool_call("read_file", path="big.txt"), text("Big."))
    await harness.ask("read big")
    await asyncio.wait_for(watcher.ended.wait(), 5)
    finished = next(e for _, e in watcher.events if isinstance(e, ToolFinished))
    assert len(finished.result) == MAX_SHOWN_CHARS and finished.result.endswith("…")


async def test_other_channels_are_not_streamed(harness: Harness, fake_llm: FakeLLM) -> None:
    watcher = Watcher()
    harness.runtime.loop.progress.watch("web", watcher)
    fake_llm.script(text("plain reply"))
    assert (await harness.ask("hello")).text == "plain reply"
    assert watcher.events == []
    assert "stream" not in fake_llm.requests[0]
    harness.runtime.loop.progress.unwatch("web", watcher)
    assert harness.runtime.loop.progress.for_turn(_message("web")) is None


async def test_a_failing_watcher_does_not_fail_the_turn(
    harness: Harness, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(message: InboundMessage, event: Progress) -> None:
        raise RuntimeError("browser went away")

    harness.runtime.loop.progress.watch("test", broken)
    fake_llm.script(text("still answered"))
    assert (await harness.ask("hello")).text == "still answered"
    assert len([r for r in caplog.records if "progress observer failed" in r.message]) == 1


def _message(channel: str) -> InboundMessage:
    return InboundMessage(
        channel=channel,
        chat_id="owner",
        message_id="m1",
        sender_id="owner",
        sender_name="owner",
        text="hi",
        trust=Trust.OWNER,
    )


async def test_an_error_event_mid_stream_is_retried(client: LLMClient, fake_llm: FakeLLM) -> None:
    broken = cut(text("alpha beta gamma delta epsilon zeta"), error(500, "overloaded"))
    fake_llm.script(broken, text("second try"))
    deltas = Deltas()
    response = await client.chat(USER, on_delta=deltas)
    assert response.content == "second try"
    assert len(fake_llm.requests) == 2
    assert [d.text for d in deltas.received if d.restart] == ["second "]


def test_the_assembler_takes_what_providers_vary_in() -> None:
    assembler = StreamAssembler()
    name = {"name": "exec", "arguments": '{"command": '}
    chunks: list[dict[str, Any]] = [
        # No index on the first call's first piece, and no choice index: choice 0, call 0.
        {"choices": [{"delta": {"tool_calls": [{"id": "c1", "function": name}]}}]},
        # The name again: kept once, not doubled.
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "exec"}}]}}]},
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]}}
            ]
        },
        # Arguments sent whole, as an object.
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 1,
                                "id": "c2",
                                "function": {"name": "read_file", "arguments": {"path": "a.md"}},
                            }
                        ]
                    }
                }
            ]
        },
        {"choices": [{"index": 1, "delta": {"content": "another choice"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    for chunk in chunks:
        assert assembler.add(parse_chunk(chunk)) == ""
    response = assembler.response("m")
    assert response.content is None
    assert response.tool_calls == [
        ToolCall("c1", "exec", '{"command": "ls"}'),
        ToolCall("c2", "read_file", '{"path": "a.md"}'),
    ]


def test_a_whole_completion_reads_as_one_chunk() -> None:
    completion = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Reading.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "read_file", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    assembler = StreamAssembler()
    assert assembler.add(whole_chunk(completion)) == "Reading."
    assert assembler.response("m") == LLMResponse(
        content="Reading.",
        tool_calls=[ToolCall("c1", "read_file", "{}")],
        finish_reason="tool_calls",
        usage=completion["usage"],
        model="m",
    )

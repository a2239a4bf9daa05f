"""Streamed completions through both model paths, against the fake over loopback."""

from __future__ import annotations

import asyncio
import json

import pytest

from clawgate.agent.llm import LLMClient, TextDelta, ToolCall
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
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

USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture(params=["direct", "litellm"])
def model_path(request: pytest.FixtureRequest) -> str:
    """Every test here runs through both model paths (see tests/conftest.py)."""
    return str(request.param)


class Sleepless:
    async def __call__(self, seconds: float) -> None:
        pass


@pytest.fixture
def client(agent_config: AgentConfig) -> LLMClient:
    return LLMClient(agent_config, sleep=Sleepless())


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
    fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    config = agent_config.model_copy(
        update={
            "request_timeout": 0.5,
            "max_retries": 0,
            "fallback_models": ["openai/fallback-model"],
        }
    )
    client = LLMClient(config, sleep=Sleepless())
    fake_llm.script(hang(), text("from the fallback"))
    try:
        response = await client.chat(USER, on_delta=Deltas())
    finally:
        await client.aclose()
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

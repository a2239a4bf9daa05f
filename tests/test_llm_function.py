"""FunctionModel: the model protocol served by a Python function, with no server at all.

The same retries, fallbacks and failure messages apply as on the real paths, since they
wrap the protocol rather than a path; and the agent loop runs through it unchanged.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from clawgate.agent.llm import (
    FunctionFailure,
    FunctionModel,
    LLMClient,
    LLMResponse,
    ModelMisconfigured,
    ModelRequest,
    TextDelta,
    ToolCall,
)
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
from tests.harness import Harness, make_config

USER = [{"role": "user", "content": "hello there"}]
NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def config(**overrides: object) -> AgentConfig:
    return AgentConfig(model="scripted", request_timeout=5.0, max_retries=2).model_copy(
        update=overrides
    )


async def test_the_function_gets_the_request_and_its_answer_is_the_response() -> None:
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return f"you said {request.messages[-1]['content']}"

    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    client = LLMClient(config(), models=[FunctionModel(answer, name="scripted")])
    response = await client.chat(USER, tools=tools, max_tokens=50)

    assert response == LLMResponse("you said hello there", [], "stop", NO_USAGE, "scripted")
    assert seen[0].messages == USER and seen[0].tools == tools and seen[0].max_tokens == 50
    assert not client.litellm_loaded


async def test_a_failing_function_model_falls_back_to_the_next() -> None:
    calls: list[str] = []

    def overloaded(request: ModelRequest) -> str:
        calls.append("primary")
        raise FunctionFailure(503, "overloaded")

    async def backup(request: ModelRequest) -> LLMResponse:
        calls.append("backup")
        return LLMResponse(None, [ToolCall("c1", "list_dir", "{}")], "tool_calls", NO_USAGE, "")

    sleep = RecordingSleep()
    client = LLMClient(
        config(fallback_models=["backup"]),
        sleep=sleep,
        models=[FunctionModel(overloaded, name="scripted"), FunctionModel(backup, name="backup")],
    )
    response = await client.chat(USER)

    assert response.model == "backup" and response.tool_calls == [ToolCall("c1", "list_dir", "{}")]
    assert calls == ["primary"] * 3 + ["backup"]
    assert sleep.delays == [1.0, 2.0]


async def test_function_failures_are_classified_like_a_providers() -> None:
    def refused(request: ModelRequest) -> str:
        raise FunctionFailure(401, "Incorrect API key provided")

    sleep = RecordingSleep()
    client = LLMClient(config(), sleep=sleep, models=[FunctionModel(refused, name="scripted")])
    with pytest.raises(ModelMisconfigured, match="rejected the API key for scripted"):
        await client.chat(USER)
    assert sleep.delays == []

    def rate_limited(request: ModelRequest) -> str:
        raise FunctionFailure(429, retry_after=7)

    client = LLMClient(config(), sleep=sleep, models=[FunctionModel(rate_limited, name="scripted")])
    with pytest.raises(ModelUnavailable, match="after 3 attempts: rate limited"):
        await client.chat(USER)
    assert sleep.delays == [7.0, 7.0]


async def test_a_bug_in_the_function_is_raised_as_itself() -> None:
    def broken(request: ModelRequest) -> str:
        raise KeyError("oops")

    client = LLMClient(config(), models=[FunctionModel(broken, name="scripted")])
    with pytest.raises(KeyError):
        await client.chat(USER)


async def test_a_streamed_call_gets_the_answer_in_pieces() -> None:
    received: list[TextDelta] = []

    async def listener(delta: TextDelta) -> None:
        received.append(delta)

    client = LLMClient(config(), models=[FunctionModel(lambda r: "one two three", name="scripted")])
    response = await client.chat(USER, on_delta=listener)
    assert [d.text for d in received] == ["one ", "two ", "three"]
    assert response.content == "one two three" and response.finish_reason == "stop"


async def test_the_agent_loop_runs_through_a_function_model(tmp_path: Path) -> None:
    def agent(request: ModelRequest) -> LLMResponse | str:
        last = request.messages[-1]
        if last["role"] == "tool":
            return "Saved."
        arguments = json.dumps({"path": "todo.md", "content": "- milk"})
        call = ToolCall("call_w", "write_file", arguments)
        return LLMResponse(None, [call], "tool_calls", NO_USAGE, "")

    settings = make_config(tmp_path, config())
    llm = LLMClient(settings.agent, models=[FunctionModel(agent, name="scripted")])
    async with Harness(settings, llm=llm) as harness:
        reply = await asyncio.wait_for(harness.ask("note: milk"), 10)
        assert reply.text == "Saved."
        assert (harness.workspace / "todo.md").read_text() == "- milk"

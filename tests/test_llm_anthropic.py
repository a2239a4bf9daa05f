"""Anthropic's Messages API on the direct path: the same conversation sends the same request
content as through litellm (which served `anthropic/` before), answers read the same, and
the stable prefix is marked for Anthropic's prompt cache."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clawgate.agent.llm import LLMClient, LLMResponse
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.llm.routing import endpoint
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ContextOverflow
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.llm import call, error, text, tool_calls
from tests.llm_conversation import CONVERSATION, TOOLS

MODEL = "anthropic/claude-3-5-haiku-20241022"


@pytest.fixture
async def anthropic() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as fake:
        fake.cache_read, fake.cache_write = 5, 3
        yield fake


def _config(fake: FakeAnthropic, direct: bool) -> AgentConfig:
    return AgentConfig(
        model=MODEL, api_base=fake.url, api_key="sk-ant-test", max_retries=0, direct_http=direct
    )


def _content(body: dict[str, Any]) -> dict[str, Any]:
    """A request's content: what the model reads, without the cache marks (a hint about the
    prefix, not content) and litellm's tool `type` label."""
    body = copy.deepcopy(body)
    for block in [*body.get("system", []), *(b for m in body["messages"] for b in m["content"])]:
        block.pop("cache_control", None)
    for tool in body.get("tools", []):
        tool.pop("type", None)
    return body


async def _run(
    fake: FakeAnthropic, direct: bool, **options: Any
) -> tuple[list[LLMResponse], list[str]]:
    fake.script(tool_calls(call("list_dir", path="x"), content="Looking."), text("Sunny all day."))
    client = LLMClient(_config(fake, direct))
    deltas: list[str] = []

    async def on_delta(delta: Any) -> None:
        deltas.append(delta.text)

    try:
        answers = [
            await client.chat(CONVERSATION, tools=TOOLS, **options),
            await client.chat(CONVERSATION, tools=TOOLS, on_delta=on_delta, **options),
        ]
    finally:
        await client.aclose()
    return answers, deltas


@pytest.mark.parametrize(
    "options", [{}, {"tool_choice": {"type": "function", "function": {"name": "now"}}}]
)
async def test_the_direct_path_sends_what_litellm_sends_and_reads_the_same_answers(
    anthropic: FakeAnthropic, options: dict[str, Any]
) -> None:
    import_litellm()
    through_litellm, litellm_deltas = await _run(anthropic, False, **options)
    direct, direct_deltas = await _run(anthropic, True, **options)

    by_litellm, by_direct = anthropic.requests[:2], anthropic.requests[2:]
    assert [_content(b) for b in by_direct] == [_content(b) for b in by_litellm]
    assert by_direct[1]["stream"] is True and "stream" not in by_direct[0]
    assert [(r.content, r.tool_calls, r.finish_reason, r.usage) for r in direct] == [
        (r.content, r.tool_calls, r.finish_reason, r.usage) for r in through_litellm
    ]
    assert direct[0].tool_calls[0].name == "list_dir" and direct[1].content == "Sunny all day."
    assert direct[1].usage["cached_tokens"] == 5
    assert direct_deltas == litellm_deltas
    for headers in anthropic.headers[2:]:
        assert headers["x-api-key"] == "sk-ant-test"
        assert headers["anthropic-version"] == "2023-06-01"


async def test_the_system_prompt_and_the_history_before_the_newest_turn_are_cached(
    anthropic: FakeAnthropic,
) -> None:
    await _run(anthropic, True)

    body = anthropic.requests[0]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [
        (n, block["type"])
        for n, message in enumerate(body["messages"])
        for block in message["content"]
        if "cache_control" in block
    ]
    # The last block of the turn before the user's newest message, and nothing after it.
    assert marked == [(len(body["messages"]) - 2, "text")]
    assert body["messages"][-1]["content"] == [
        {"type": "text", "text": CONVERSATION[-1]["content"]}
    ]


async def test_a_prompt_over_the_window_is_a_context_failure_on_both_paths(
    anthropic: FakeAnthropic,
) -> None:
    import_litellm()
    for direct in (False, True):
        anthropic.script(error(400, "prompt is too long: 210000 tokens > 200000 maximum"))
        client = LLMClient(_config(anthropic, direct))
        try:
            with pytest.raises(ContextOverflow):
                await client.chat(CONVERSATION)
        finally:
            await client.aclose()


def test_anthropic_models_go_direct_to_the_messages_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_BASE", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    target = endpoint(MODEL, None, "k")
    assert target is not None and target.api == "anthropic"
    assert target.url == "https://api.anthropic.com/v1/messages"
    assert target.model == "claude-3-5-haiku-20241022"
    assert endpoint(MODEL, "http://127.0.0.1:9/v1", "k").url == "http://127.0.0.1:9/v1/messages"  # type: ignore[union-attr]
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert endpoint(MODEL, None, None).missing_key  # type: ignore[union-attr]

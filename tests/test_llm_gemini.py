"""Gemini's API on the direct path: the same conversation sends the same request content as
through litellm (which served `gemini/` before), and answers read the same."""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from clawgate.agent.llm import LLMClient, LLMResponse
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.llm.routing import endpoint
from clawgate.kernel.config import AgentConfig
from tests.fakes.gemini import FakeGemini
from tests.fakes.llm import call, text, tool_calls
from tests.llm_conversation import CONVERSATION, TOOLS

MODEL = "gemini/gemini-2.0-flash"


@pytest.fixture
async def gemini() -> AsyncIterator[FakeGemini]:
    async with FakeGemini() as fake:
        fake.cached_tokens = 4
        yield fake


def _snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {re.sub(r"(?<!^)([A-Z])", r"_\1", k).lower(): _snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake(v) for v in value]
    return value


def _content(body: dict[str, Any]) -> dict[str, Any]:
    """A request's content in one spelling: the API takes camelCase and snake_case keys alike,
    and litellm sends this model's system prompt as the first user turn's leading parts,
    where the direct path uses the API's systemInstruction."""
    body = _snake(copy.deepcopy(body))
    system = body.pop("system_instruction", None)
    if system is not None:
        body["contents"][0]["parts"][:0] = system["parts"]
    return body


async def _run(
    fake: FakeGemini, direct: bool, **options: Any
) -> tuple[list[LLMResponse], list[str]]:
    fake.script(tool_calls(call("list_dir", path="x"), content="Looking."), text("Sunny all day."))
    client = LLMClient(
        AgentConfig(
            model=MODEL,
            api_base=f"{fake.url}/v1beta",
            api_key="gm-test",
            max_retries=0,
            direct_http=direct,
        )
    )
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
    gemini: FakeGemini, options: dict[str, Any]
) -> None:
    import_litellm()
    through_litellm, litellm_deltas = await _run(gemini, False, **options)
    direct, direct_deltas = await _run(gemini, True, **options)

    assert [_content(b) for b in gemini.requests[2:]] == [_content(b) for b in gemini.requests[:2]]
    assert gemini.paths[2:] == gemini.paths[:2]
    assert gemini.paths[3].endswith(":streamGenerateContent")
    assert gemini.queries[3] == {"alt": "sse"}
    assert gemini.requests[2]["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    # Tool call ids are made up on both sides (Gemini sends none): compare the rest.
    assert [
        (r.content, [(c.name, c.arguments) for c in r.tool_calls], r.finish_reason, r.usage)
        for r in direct
    ] == [
        (r.content, [(c.name, c.arguments) for c in r.tool_calls], r.finish_reason, r.usage)
        for r in through_litellm
    ]
    assert direct[0].tool_calls[0].name == "list_dir" and direct[1].content == "Sunny all day."
    assert direct[1].usage["cached_tokens"] == 4
    assert direct_deltas == litellm_deltas
    assert all(h["x-goog-api-key"] == "gm-test" for h in gemini.headers)


def test_gemini_models_go_direct_to_generate_content(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_BASE", raising=False)
    target = endpoint(MODEL, None, "k")
    assert target is not None and target.api == "gemini"
    assert target.url == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.0-flash"
    )
    assert target.headers["x-goog-api-key"] == "k"

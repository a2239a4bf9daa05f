"""LLMClient and the fake provider, both exercised through the real litellm over loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.llm import (
    ContextOverflow,
    LLMClient,
    LLMResponse,
    ModelMisconfigured,
    ToolCall,
    failure_reply,
)
from clawgate.agent.llm import direct as direct_module
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.llm.routing import endpoint
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.errors import ModelUnavailable
from tests.conftest import MakeClient
from tests.fakes.llm import (
    FakeLLM,
    call,
    context_overflow,
    delay,
    embed_text,
    error,
    gate,
    hang,
    raw_tool_call,
    text,
    tool_call,
    tool_calls,
)

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-secret"
USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture(params=["direct", "litellm"])
def model_path(request: pytest.FixtureRequest) -> str:
    """Every test here runs through both model paths (see tests/conftest.py)."""
    return str(request.param)


class RecordingSleep:
    """Stands in for asyncio.sleep so backoff is instant and its delays can be asserted."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def client(agent_config: AgentConfig, sleep: RecordingSleep, make_client: MakeClient) -> LLMClient:
    return make_client(agent_config, sleep=sleep)


def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


# --- the fake itself, driven by litellm directly ---


async def test_fake_answers_litellm_and_records_the_request(fake_llm: FakeLLM) -> None:
    fake_llm.script(text("scripted answer"))
    messages = [{"role": "system", "content": "be brief"}, *USER]
    response = await _litellm().acompletion(
        model="openai/fake-model", messages=messages, api_base=fake_llm.url, api_key=KEY
    )
    assert response.choices[0].message.content == "scripted answer"
    assert response.usage.total_tokens == response.usage.prompt_tokens + 2
    assert await fake_llm.wait_for_requests(1) == fake_llm.requests
    assert fake_llm.requests[0]["model"] == "fake-model"
    assert fake_llm.last_system_prompt() == "be brief"
    assert fake_llm.last_messages() == messages
    assert fake_llm.unscripted == 0 and fake_llm.pending == 0


@pytest.mark.filterwarnings("ignore:Item .* is using the `ReadOnly` qualifier:UserWarning")
async def test_fake_streams_text_and_tool_calls(fake_llm: FakeLLM) -> None:
    litellm = _litellm()
    fake_llm.script(text("one two three"), tool_call("search", _id="call_s", query="milk"))
    common = {"model": "openai/fake-model", "api_base": fake_llm.url, "api_key": KEY}

    stream = await litellm.acompletion(messages=USER, stream=True, **common)
    parts = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    assert "".join(parts) == "one two three"
    assert len([p for p in parts if p]) == 3

    stream = await litellm.acompletion(messages=USER, stream=True, **common)
    chunks = [chunk async for chunk in stream]
    message = litellm.stream_chunk_builder(chunks, messages=USER).choices[0].message
    assert message.tool_calls[0].id == "call_s"
    assert message.tool_calls[0].function.name == "search"
    assert json.loads(message.tool_calls[0].function.arguments) == {"query": "milk"}
    assert all(r["stream"] for r in fake_llm.requests)


async def test_fake_counts_unscripted_requests_and_uses_handler(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    assert (await client.chat(USER)).content == "(fake: no scripted reply)"
    assert fake_llm.unscripted == 1

    fake_llm.handler = lambda body: text(f"echo {body['messages'][-1]['content']}")
    assert (await client.chat(USER)).content == "echo hello there"

    async def async_handler(body: dict[str, Any]) -> Any:
        return text(str(len(body["messages"])))

    fake_llm.handler = async_handler
    assert (await client.chat(USER)).content == "1"
    assert fake_llm.unscripted == 1


async def test_fake_gate_and_delay_hold_the_reply(client: LLMClient, fake_llm: FakeLLM) -> None:
    release = asyncio.Event()
    fake_llm.script(gate(release, text("released")), delay(0.05, text("late")))
    task = asyncio.create_task(client.chat(USER))
    await fake_llm.wait_for_requests(1)
    assert not task.done()
    release.set()
    assert (await task).content == "released"
    assert (await client.chat(USER)).content == "late"


async def test_fake_wait_for_requests_times_out(fake_llm: FakeLLM) -> None:
    with pytest.raises(TimeoutError):
        await fake_llm.wait_for_requests(1, timeout=0.05)


# --- LLMClient: answers ---


async def test_plain_reply(client: LLMClient, fake_llm: FakeLLM, agent_config: AgentConfig) -> None:
    fake_llm.script(text("Hi! How can I help?"))
    response = await client.chat(USER)
    assert response == LLMResponse(
        content="Hi! How can I help?",
        tool_calls=[],
        finish_reason="stop",
        usage={"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7},
        model="openai/fake-model",
    )
    sent = fake_llm.requests[0]
    assert "temperature" not in sent  # unset: the model's own default
    assert sent["max_tokens"] == agent_config.max_tokens
    assert "tools" not in sent


async def test_one_tool_call(client: LLMClient, fake_llm: FakeLLM) -> None:
    tools = [{"type": "function", "function": {"name": "write_file", "parameters": {}}}]
    fake_llm.script(tool_call("write_file", _id="call_1", path="todo.md", content="- milk"))
    response = await client.chat(USER, tools=tools, tool_choice="auto", max_tokens=100)
    assert response.finish_reason == "tool_calls"
    assert response.tool_calls == [
        ToolCall("call_1", "write_file", json.dumps({"path": "todo.md", "content": "- milk"}))
    ]
    sent = fake_llm.requests[0]
    assert sent["tools"] == tools and sent["tool_choice"] == "auto" and sent["max_tokens"] == 100


async def test_several_tool_calls_in_one_response(client: LLMClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(tool_calls(call("read_file", path="a.md"), call("read_file", path="b.md")))
    response = await client.chat(USER)
    assert [c.name for c in response.tool_calls] == ["read_file", "read_file"]
    assert [json.loads(c.arguments) for c in response.tool_calls] == [
        {"path": "a.md"},
        {"path": "b.md"},
    ]
    assert len({c.id for c in response.tool_calls}) == 2


async def test_malformed_arguments_are_kept_raw(client: LLMClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(raw_tool_call("exec", '{"cmd": "ls", oops'))
    response = await client.chat(USER)
    assert response.tool_calls[0].name == "exec"
    assert response.tool_calls[0].arguments == '{"cmd": "ls", oops'


async def test_empty_content_is_returned_as_is(client: LLMClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(text("", finish_reason="length"))
    response = await client.chat(USER)
    assert response.content in ("", None)
    assert response.tool_calls == [] and response.finish_reason == "length"


# --- LLMClient: retries and failures ---


async def test_rate_limit_then_success_honours_retry_after(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    fake_llm.script(error(429, "slow down", retry_after=3), text("ok"))
    assert (await client.chat(USER)).content == "ok"
    assert len(fake_llm.requests) == 2
    assert sleep.delays == [3.0]


async def test_retry_after_is_capped(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    fake_llm.script(error(429, retry_after=3600), error(429), text("ok"))
    assert (await client.chat(USER)).content == "ok"
    assert sleep.delays == [30.0, 2.0]


async def test_server_errors_back_off_exponentially(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    fake_llm.script(error(500), error(503), text("ok"))
    assert (await client.chat(USER)).content == "ok"
    assert len(fake_llm.requests) == 3
    assert sleep.delays == [1.0, 2.0]


async def test_persistent_server_error_gives_up_after_max_retries(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    fake_llm.handler = lambda body: error(500, "overloaded")
    with pytest.raises(ModelUnavailable) as caught:
        await client.chat(USER)
    assert len(fake_llm.requests) == 3
    assert sleep.delays == [1.0, 2.0]
    assert str(caught.value) == (
        "The model openai/fake-model did not answer after 3 attempts: server error (HTTP 500)"
    )


async def test_hang_is_bounded_by_request_timeout(
    make_client: MakeClient, agent_config: AgentConfig, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    config = agent_config.model_copy(update={"request_timeout": 0.5, "max_retries": 1})
    fake_llm.script(hang(), hang())
    _litellm()  # the one-off import cost is not part of any attempt
    started = time.monotonic()
    with pytest.raises(ModelUnavailable, match="after 2 attempts: timed out"):
        await make_client(config, sleep=sleep).chat(USER)
    assert time.monotonic() - started < 2.5
    assert len(fake_llm.requests) == 2


async def test_auth_error_is_not_retried(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    fake_llm.script(error(401, "Incorrect API key provided"))
    with pytest.raises(ModelUnavailable, match="rejected the API key") as caught:
        await client.chat(USER)
    assert not isinstance(caught.value, ContextOverflow)
    assert len(fake_llm.requests) == 1 and sleep.delays == []


async def test_bad_request_is_not_retried(client: LLMClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(error(400, "Invalid 'messages[0].role'"))
    with pytest.raises(ModelUnavailable) as caught:
        await client.chat(USER)
    assert not isinstance(caught.value, ContextOverflow)
    assert "Invalid 'messages[0].role'" in str(caught.value)
    assert len(fake_llm.requests) == 1


async def test_context_overflow_is_not_retried(
    make_client: MakeClient, agent_config: AgentConfig, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    config = agent_config.model_copy(update={"fallback_models": ["openai/backup-model"]})
    fake_llm.script(context_overflow())
    with pytest.raises(ContextOverflow, match="too long for the context window"):
        await make_client(config, sleep=sleep).chat(USER)
    assert len(fake_llm.requests) == 1 and sleep.delays == []


async def test_fallback_model_answers_after_primary_fails(
    make_client: MakeClient, agent_config: AgentConfig, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    config = agent_config.model_copy(update={"fallback_models": ["openai/backup-model"]})
    fake_llm.script(error(500), error(500), error(500), text("from backup"))
    response = await make_client(config, sleep=sleep).chat(USER)
    assert response.content == "from backup"
    assert response.model == "openai/backup-model"
    assert [r["model"] for r in fake_llm.requests] == ["fake-model"] * 3 + ["backup-model"]


async def test_unknown_model_skips_to_fallback_and_all_failures_are_summarised(
    make_client: MakeClient, agent_config: AgentConfig, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    config = agent_config.model_copy(
        update={"fallback_models": ["openai/backup-model"], "max_retries": 1}
    )
    fake_llm.script(error(404, "model not found"), error(503), error(503))
    with pytest.raises(ModelUnavailable) as caught:
        await make_client(config, sleep=sleep).chat(USER)
    message = str(caught.value)
    assert message.startswith("No model answered: openai/fake-model: not found")
    assert "openai/backup-model: server error (HTTP 503) after 2 attempts" in message
    assert "\n" not in message
    assert len(fake_llm.requests) == 3


async def test_wrong_api_base_is_tried_twice_and_named(
    make_client: MakeClient, agent_config: AgentConfig, sleep: RecordingSleep
) -> None:
    async with FakeLLM() as gone:
        url = gone.url
    config = agent_config.model_copy(update={"api_base": url})  # max_retries=2
    with pytest.raises(ModelMisconfigured) as caught:
        await make_client(config, sleep=sleep).chat(USER)
    assert str(caught.value) == (
        f"Could not connect to agent.api_base {url} (connection refused); check agent.api_base."
    )
    assert sleep.delays == [1.0]  # two attempts, not three
    assert failure_reply(caught.value).endswith(
        "check agent.api_base. Your message was not answered: send it again once that is fixed."
    )


KEY_FIX = "agent.api_key in the config or the CLAWGATE_AGENT__API_KEY environment variable."


async def test_missing_api_key_names_the_setting_and_sends_nothing(
    make_client: MakeClient,
    agent_config: AgentConfig,
    fake_llm: FakeLLM,
    sleep: RecordingSleep,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = agent_config.model_copy(update={"api_key": None})
    with pytest.raises(ModelMisconfigured) as caught:
        await make_client(config, sleep=sleep).chat(USER)
    assert str(caught.value) == f"No API key is set for openai/fake-model: set {KEY_FIX}"
    assert fake_llm.requests == [] and sleep.delays == []
    reply = failure_reply(caught.value)
    assert "in a moment" not in reply and reply.endswith(
        ". Your message was not answered: send it again once that is fixed."
    )
    assert ".." not in reply


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            error(401, "Incorrect API key provided"),
            f"The model provider rejected the API key for openai/fake-model: check {KEY_FIX}",
        ),
        (
            error(403, "Project does not have access to model"),
            "The model provider refused access to openai/fake-model: check that the key in "
            "agent.api_key (CLAWGATE_AGENT__API_KEY) may use it, or choose another agent.model.",
        ),
        (
            error(404, "The model `fake-model` does not exist"),
            "The model provider does not know the model openai/fake-model: check agent.model.",
        ),
        (
            error(400, "model not found: fake-model"),
            "The model provider does not know the model openai/fake-model: check agent.model.",
        ),
    ],
    ids=["401", "403", "404", "400-model"],
)
async def test_setting_errors_are_named_and_not_retried(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep, reply: Any, expected: str
) -> None:
    fake_llm.handler = lambda body: reply
    with pytest.raises(ModelMisconfigured) as caught:
        await client.chat(USER)
    assert str(caught.value) == expected
    assert len(fake_llm.requests) == 1 and sleep.delays == []
    assert "try again" not in failure_reply(caught.value)


async def test_model_without_provider_names_agent_model(
    make_client: MakeClient, agent_config: AgentConfig, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    config = agent_config.model_copy(update={"model": "no-such-model-xyz"})
    with pytest.raises(ModelMisconfigured, match=r"set agent\.model with a provider prefix"):
        await make_client(config, sleep=sleep).chat(USER)
    assert fake_llm.requests == [] and sleep.delays == []


async def test_context_overflow_names_the_fix(client: LLMClient, fake_llm: FakeLLM) -> None:
    fake_llm.script(context_overflow())
    with pytest.raises(ContextOverflow) as caught:
        await client.chat(USER)
    assert str(caught.value).endswith("set agent.context_window_tokens to the model's real window.")
    assert len(fake_llm.requests) == 1


async def test_only_transient_errors_say_try_again(
    client: LLMClient, fake_llm: FakeLLM, sleep: RecordingSleep
) -> None:
    fake_llm.handler = lambda body: error(503, "overloaded")
    with pytest.raises(ModelUnavailable) as caught:
        await client.chat(USER)
    assert not isinstance(caught.value, ModelMisconfigured)
    assert len(fake_llm.requests) == 3
    assert failure_reply(caught.value) == (
        "Sorry, I couldn't reach the model: The model openai/fake-model did not answer after "
        "3 attempts: server error (HTTP 503). Your message was not answered: send it again in "
        "a moment."
    )


async def test_a_model_litellm_knows_is_taken_without_a_call(fake_llm: FakeLLM) -> None:
    # No api_base: the provider is litellm's own, and its model list is on this machine.
    client = LLMClient(AgentConfig(model="openai/gpt-4o-mini", api_key="sk-test-secret"))
    assert await client.check_model("gpt-4o-mini") is None
    assert fake_llm.requests == []


async def test_a_model_name_the_endpoint_does_not_serve_is_one_line(
    client: LLMClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(error(404, f"model nope not found for key {KEY.upper()}"))
    refused = await client.check_model("openai/nope")
    assert refused == "The model provider does not know the model openai/nope."
    fake_llm.script(text("p"))
    assert await client.check_model("openai/other") is None
    assert [(r["model"], r["max_tokens"]) for r in fake_llm.requests] == [("nope", 1), ("other", 1)]


async def test_api_key_never_appears_in_errors_or_logs(
    client: LLMClient, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="clawgate.agent.llm")
    fake_llm.script(
        error(401, f"Incorrect API key provided: {KEY}"),
        # The key straddles the point where long provider messages are cut.
        error(400, "x" * 195 + f" {KEY} rejected"),
    )
    fake_llm.handler = lambda body: error(500, f"upstream broke for {KEY}")
    for _ in range(3):
        with pytest.raises(ModelUnavailable) as caught:
            await client.chat(USER)
        assert KEY not in str(caught.value)
        # What a channel would log: the whole printed traceback, chained exceptions included.
        assert KEY not in "".join(traceback.format_exception(caught.value))
    assert KEY not in caplog.text
    assert "Bearer" not in caplog.text


# --- embeddings ---


async def test_embed_hits_the_embeddings_endpoint(client: LLMClient, fake_llm: FakeLLM) -> None:
    vectors = await client.embed(["buy milk", "walk the dog"], model="openai/embed-small")
    assert vectors == [
        pytest.approx(embed_text("buy milk")),
        pytest.approx(embed_text("walk the dog")),
    ]
    assert len(vectors[0]) == 64
    assert fake_llm.embedding_requests[0]["model"] == "embed-small"
    assert fake_llm.embedding_requests[0]["input"] == ["buy milk", "walk the dog"]
    assert fake_llm.requests == []
    assert await client.embed([], model="openai/embed-small") == []


# --- import cost ---


def test_importing_the_client_does_not_import_litellm() -> None:
    code = "import agent.llm, sys; assert 'litellm' not in sys.modules, 'litellm imported'"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


# --- litellm's logging ---


@pytest.mark.parametrize("model_path", ["litellm"])
async def test_a_registered_litellm_callback_still_sees_each_call(
    client: LLMClient, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = import_litellm()
    from litellm.integrations.custom_logger import CustomLogger

    logged = asyncio.Event()

    class Recorder(CustomLogger):
        async def async_log_success_event(self, *args: Any, **kwargs: Any) -> None:
            logged.set()

    for name in ("success_callback", "_async_success_callback", "_async_failure_callback"):
        monkeypatch.setattr(litellm, name, [])
    monkeypatch.setattr(litellm, "callbacks", [Recorder()])
    fake_llm.script(text("Hi"))
    assert (await client.chat(USER)).content == "Hi"
    await asyncio.wait_for(logged.wait(), timeout=10)


# --- which path serves a call ---


async def test_the_configured_path_serves_the_call(
    client: LLMClient, fake_llm: FakeLLM, model_path: str
) -> None:
    fake_llm.script(text("Hi"))
    assert (await client.chat(USER)).content == "Hi"
    # The direct path never loads litellm; turned off, litellm serves the same call.
    assert client.litellm_loaded is (model_path == "litellm")


async def test_both_paths_send_the_same_request(
    make_client: MakeClient, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    for direct in (True, False):
        config = agent_config.model_copy(update={"direct_http": direct})
        fake_llm.script(text("ok"))
        await make_client(config).chat(USER, tools=tools, tool_choice="auto", max_tokens=50)
    assert fake_llm.requests[0] == fake_llm.requests[1]


@pytest.mark.parametrize(
    ("model", "api_base", "url", "sent"),
    [
        ("openai/gpt-4o-mini", None, "https://api.openai.com/v1/chat/completions", "gpt-4o-mini"),
        (
            "openai/qwen",
            "http://127.0.0.1:8000/v1/",
            "http://127.0.0.1:8000/v1/chat/completions",
            "qwen",
        ),
        (
            "openrouter/meta/llama-3",
            None,
            "https://openrouter.ai/api/v1/chat/completions",
            "meta/llama-3",
        ),
        ("ollama_chat/llama3", None, "http://localhost:11434/v1/chat/completions", "llama3"),
        (
            "hosted_vllm/m",
            "http://127.0.0.1:8000/v1",
            "http://127.0.0.1:8000/v1/chat/completions",
            "m",
        ),
        # What litellm rewrites, serves natively, or cannot place stays on litellm.
        ("openai/o3-mini", None, None, None),
        ("openai/gpt-5", None, None, None),
        ("mistral/mistral-small-latest", None, None, None),
        ("hosted_vllm/m", None, None, None),
        ("gpt-4o-mini", None, None, None),
    ],
)
def test_direct_endpoint_is_chosen_by_provider_prefix(
    model: str,
    api_base: str | None,
    url: str | None,
    sent: str | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OLLAMA_API_BASE", "HOSTED_VLLM_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    target = endpoint(model, api_base, KEY)
    assert (target and target.url, target and target.model) == (url, sent)
    if target is not None:
        assert target.headers["Authorization"] == f"Bearer {KEY}"


async def test_a_plain_http_endpoint_never_reads_a_tls_trust_store(
    fake_llm: FakeLLM, make_client: MakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Reading the CA bundle is ~20 ms of a first call: an http:// endpoint must not pay it,
    # neither in the warm-up nor in the call.
    def refuse() -> None:
        raise AssertionError("a TLS context was built for an http endpoint")

    monkeypatch.setattr(direct_module, "tls_context", refuse)
    config = AgentConfig(model="openai/fake-model", api_base=fake_llm.url, api_key="k")
    client = make_client(config)
    fake_llm.script(text("plain"))
    await client.warm_up()
    assert (await client.chat(USER)).content == "plain"


def test_deepseek_images_go_through_litellm() -> None:
    target = endpoint("deepseek/deepseek-chat", None, KEY)
    assert target is not None and target.takes(USER)
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    assert not target.takes([{"role": "user", "content": image}])


async def test_warm_up_loads_only_what_the_models_need(
    agent_config: AgentConfig, model_path: str, fake_llm: FakeLLM
) -> None:
    client = LLMClient(agent_config)
    await client.warm_up()
    assert client.ready
    assert fake_llm.requests == []  # litellm's first call is warmed with a mocked one
    # litellm's import (seconds, ~190 MB, and a thread a stop must wait for) only if needed.
    assert client.litellm_loaded is (model_path == "litellm")

    other = agent_config.model_copy(update={"fallback_models": ["mistral/mistral-small-latest"]})
    client = LLMClient(other)
    await client.warm_up()
    assert client.ready and client.litellm_loaded

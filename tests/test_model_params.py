"""Model parameters a model may refuse (issue 35, item 1): a temperature is sent only when
the owner set one, and a provider refusing a parameter is a setting to change, named, not
an outage to wait out. Both model paths, against the loopback fake (and litellm's own
refusal, which it raises before any request leaves)."""

from __future__ import annotations

import pytest

from clawgate.agent.llm import LLMClient, ModelMisconfigured, failure_reply
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.kernel.config import AgentConfig
from tests.fakes.llm import FakeLLM, fixed_temperature, text

USER = [{"role": "user", "content": "hello"}]


@pytest.fixture(params=["direct", "litellm"])
def model_path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_no_temperature_is_sent_unless_the_owner_set_one(
    agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hi."), text("Hi again."))
    client = LLMClient(agent_config)
    try:
        await client.chat(USER)
        owner_set = LLMClient(agent_config.model_copy(update={"temperature": 0.2}))
        try:
            await owner_set.chat(USER)
        finally:
            await owner_set.aclose()
    finally:
        await client.aclose()
    assert "temperature" not in fake_llm.requests[0]
    assert fake_llm.requests[1]["temperature"] == 0.2


async def test_a_refused_temperature_names_the_setting(
    agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = fixed_temperature("fake-model", lambda body: text("Hi."))
    client = LLMClient(agent_config.model_copy(update={"temperature": 0.7}))
    try:
        with pytest.raises(ModelMisconfigured) as caught:
            await client.chat(USER)
    finally:
        await client.aclose()
    assert len(fake_llm.requests) == 1, "a refused parameter is not retried"
    reply = failure_reply(caught.value)
    assert "agent.temperature" in reply
    assert "try again in a moment" not in reply


async def test_a_refused_temperature_falls_back_to_the_next_model(
    agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = fixed_temperature("fake-model", lambda body: text("From the fallback."))
    config = agent_config.model_copy(
        update={"temperature": 0.7, "fallback_models": ["openai/other-model"]}
    )
    client = LLMClient(config)
    try:
        response = await client.chat(USER)
    finally:
        await client.aclose()
    assert response.content == "From the fallback."


async def test_current_openai_models_answer_with_the_default_settings(
    agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    # litellm serves these (it rewrites their parameters) and refuses a temperature other
    # than 1 itself, before any request leaves; unset, they answer.
    import_litellm()
    fake_llm.handler = fixed_temperature("gpt-5", lambda body: text("Hi."))
    for name in ("openai/gpt-5", "openai/o3-mini"):
        client = LLMClient(agent_config.model_copy(update={"model": name}))
        try:
            assert (await client.chat(USER)).content == "Hi."
        finally:
            await client.aclose()
    owner_set = LLMClient(
        agent_config.model_copy(update={"model": "openai/o3-mini", "temperature": 0.7})
    )
    try:
        with pytest.raises(ModelMisconfigured) as caught:
            await owner_set.chat(USER)
        refused = await owner_set.check_model("openai/gpt-5")  # what /model asks
    finally:
        await owner_set.aclose()
    assert "agent.temperature" in str(caught.value)
    assert refused is not None and "agent.temperature" in refused


async def test_a_key_variable_named_and_unset_is_named_in_the_failure(
    agent_config: AgentConfig, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # agent.api_key_env names a variable this environment lacks: the owner chose that place
    # for the key, so the message sends them there, not to agent.api_key.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient(
        agent_config.model_copy(update={"api_key": None, "api_key_env": "MY_UNSET_KEY"})
    )
    try:
        with pytest.raises(ModelMisconfigured) as caught:
            await client.chat(USER)
    finally:
        await client.aclose()
    assert "MY_UNSET_KEY" in str(caught.value)
    assert "CLAWGATE_AGENT__API_KEY" not in str(caught.value)
    assert fake_llm.requests == []

"""A message re-delivered after /new (the process died before the platform saw it
acknowledged) is recognised: neither answered nor stored a second time."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from clawgate.kernel.config import AgentConfig
from tests.fakes.llm import FakeLLM, Reply, text
from tests.harness import Harness, make_config
from tests.memory_helpers import is_consolidation, save

KEY = "test:1"


def echo(body: dict[str, Any]) -> Reply:
    if is_consolidation(body):  # the archive /new starts
        return save("Ann listed groceries.")
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text(f"re: {users[-1]['content']}")


def user_lines(harness: Harness) -> list[dict[str, Any]]:
    path = harness.runtime.sessions.path_for(KEY)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("role") == "user"]


async def test_a_message_replayed_after_new_is_not_answered_again(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    config = make_config(tmp_path, agent_config)
    async with Harness(config) as harness:
        await harness.channel.say(message_id="X", text="remember the milk")
        assert (await harness.channel.next_reply()).text == "re: remember the milk"
        await harness.channel.say(message_id="N", text="/new")
        await harness.channel.next_reply()

        # The same process sees the copy: nothing is sent, nothing stored.
        await harness.channel.say(message_id="X", text="remember the milk")
        await harness.channel.say(message_id="Y", text="and eggs")
        assert (await harness.channel.next_reply()).text == "re: and eggs"
        assert [m["content"] for m in user_lines(harness)] == ["and eggs"]
        await harness.gateway.default.dispatcher.wait_idle(10)

    # A restart (the copy comes back when Telegram never got the acknowledgement): the fresh
    # transcript, loaded from disk, still knows X.
    async with Harness(config) as harness:
        await harness.channel.say(message_id="X", text="remember the milk")
        await harness.channel.say(message_id="Z", text="and bread")
        assert (await harness.channel.next_reply()).text == "re: and bread"
        assert [m["content"] for m in user_lines(harness)] == ["and eggs", "and bread"]
        await harness.gateway.default.dispatcher.wait_idle(10)
        await asyncio.sleep(0)
        assert harness.channel.sent["1"].empty()

"""Exec approvals in the dashboard: the card in the web chat (with its buttons), the
pending list, an answer from the page, and the decision shown afterwards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import ClientResponse

from clawgate.gateway.dashboard.approvals import pending_approvals
from clawgate.kernel.config import AgentConfig, ToolsConfig
from tests.dashboard_harness import dashboard_client, web_channel
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.harness import make_config, wait_until

TIMEOUT = 20.0


async def next_of(stream: ClientResponse, kind: str) -> dict[str, Any]:
    async with asyncio.timeout(TIMEOUT):
        while True:
            line = await stream.content.readline()
            assert line, "the event stream ended"
            if line.startswith(b"data: "):
                event: dict[str, Any] = json.loads(line[6:])
                if event["type"] == kind:
                    return event


async def test_the_owner_answers_a_card_from_the_dashboard(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, agent_config, tools=ToolsConfig(exec_approval="risky"))
    fake_llm.script(tool_call("exec", command="touch from-web.txt"), text("Made it."))
    async with dashboard_client(config, extra_channels=web_channel) as client:
        stream = await client.get("/chat/owner/events")
        sent = await client.post_json("/chat/owner/send", {"text": "make the file"})
        assert sent.status == 202
        card = await next_of(stream, "reply")
        assert "touch from-web.txt" in card["text"]
        assert [c["label"] for c in card["choices"]] == [
            "Allow once",
            "Allow for this session",
            "Deny",
        ]
        await wait_until(lambda: bool(pending_approvals(client.services)), timeout=TIMEOUT)
        page = await client.text("/approvals")
        assert "touch from-web.txt" in page and "Allow for this session" in page
        # The header's badge counts the card and leads to it.
        assert 'id="pending-badge" href="/approvals"' in page and "1 waiting" in page
        # A page that reloads its transcript gets the card again, last, with the same buttons.
        reloaded = await (await client.get("/chat/owner/transcript")).json()
        assert reloaded["items"][-1] == {
            "kind": "approval",
            "text": card["text"],
            "choices": card["choices"],
        }

        refused = await client.post_json("/approvals/answer", {"choice": "rm -rf"})
        assert refused.status == 400
        answered = await client.post_json("/approvals/answer", {"choice": card["choices"][0]["id"]})
        assert (await answered.json())["result"] == "Allow once: touch from-web.txt"
        reply = await next_of(stream, "reply")
        assert reply["text"] == "Made it."
        stream.close()
        assert pending_approvals(client.services) == []
        after = await client.text("/approvals")
        done = await (await client.get("/chat/owner/transcript")).json()
    assert (config.workspace / "from-web.txt").exists()
    assert "Nothing is waiting for you." in after
    assert 'id="pending-badge"' not in after
    assert "once" in after and "dashboard" in after
    assert all(item["kind"] != "approval" for item in done["items"])

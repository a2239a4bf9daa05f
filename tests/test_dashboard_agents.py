"""The dashboard of a gateway with several agents: the header's switcher scopes every page
(memory, sessions, the chat) to the chosen agent, the default agent first."""

from __future__ import annotations

import contextlib
from pathlib import Path

from clawgate.agent.memory.store import MemoryStore
from clawgate.channels.pairing import PairingStore
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.kernel.config import AgentConfig, AgentSpec
from tests.dashboard_harness import DashboardClient, dashboard, dashboard_client, web_channel
from tests.fakes.llm import FakeLLM, text
from tests.harness import make_config, wait_until

__all__ = ["dashboard"]


def two_agents(
    tmp_path: Path, agent_config: AgentConfig
) -> contextlib.AbstractAsyncContextManager[DashboardClient]:
    config = make_config(tmp_path, agent_config, agents={"work": AgentSpec()})
    return dashboard_client(config, extra_channels=web_channel)


async def switch(client: DashboardClient, agent: str, back: str) -> None:
    response = await client.post_form("/agent", {"agent": agent, "next": back})
    assert response.status == 303 and response.headers["Location"] == back


async def test_the_switcher_scopes_memory_sessions_and_the_chat(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    async with two_agents(tmp_path, agent_config) as client:
        work = client.harness.runtimes[1]
        MemoryStore(client.workspace).replace_memory("- main remembers tea\n")
        MemoryStore(work.config.workspace).replace_memory("- work remembers the deadline\n")

        page = await client.text("/memory")
        assert '<option value="main" selected>main</option><option value="work">' in page
        assert "main remembers tea" in page and "deadline" not in page

        await switch(client, "work", "/memory")
        page = await client.text("/memory")
        assert '<option value="work" selected>work</option>' in page
        assert "work remembers the deadline" in page and "tea" not in page

        fake_llm.script(text("Work here."))
        sent = await client.post_json("/chat/owner/send", {"text": "who answers?"})
        assert sent.status == 202
        transcript = work.sessions.path_for("web:owner")
        await wait_until(lambda: transcript.exists() and "Work here." in transcript.read_text())
        assert not client.harness.runtime.sessions.path_for("web:owner").exists()
        assert "web:owner" in await client.text("/sessions")

        await switch(client, "main", "/sessions")
        assert "web:owner" not in await client.text("/sessions")


async def test_an_unknown_agent_is_refused_and_a_foreign_next_goes_to_the_chat(
    tmp_path: Path, agent_config: AgentConfig
) -> None:
    async with two_agents(tmp_path, agent_config) as client:
        refused = await client.post_form("/agent", {"agent": "ghost", "next": "/memory"})
        assert refused.status == 400 and "no agent named 'ghost'" in await refused.text()
        response = await client.post_form("/agent", {"agent": "work", "next": "//evil.example/"})
        assert response.headers["Location"] == "/chat"


async def test_the_header_counts_pairing_requests(dashboard: DashboardClient) -> None:
    assert "pending-badge" not in await dashboard.text("/chat")
    pairing = PairingStore(dashboard.config.pairing_file)
    pairing.request("telegram", "4242", "ann")
    page = await dashboard.text("/chat")
    assert 'id="pending-badge"' in page and "1 waiting" in page


async def test_the_badge_also_counts_what_the_approvals_hook_reports(
    dashboard: DashboardClient,
) -> None:
    waiting = [2]
    services = DashboardServices.build(
        dashboard.services.runtime, dashboard.services.bus, pending_approvals=lambda: waiting[0]
    )
    assert services.pending_count() == 2
    PairingStore(dashboard.config.pairing_file).request("telegram", "4242", "ann")
    assert services.pending_count() == 3

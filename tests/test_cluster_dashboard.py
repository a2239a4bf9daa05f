"""The dashboard of a cluster: two real `clawgate gateway` workers on the private PostgreSQL,
one dashboard port. The worker that holds the default agent serves the dashboard, and its
health page shows the whole cluster as `clawgate cluster status` does: every worker, every
lease with its holder and generation, each bot named by its account, the backlog. When that
worker is killed the dashboard comes back with the agent on the other worker (a login is the
serving process's: one logs in again)."""

from __future__ import annotations

import signal
from pathlib import Path

import aiohttp
import pytest

from clawgate.gateway.dashboard.auth import issue_login_code, read_token, site_host
from tests.cluster_helpers import GATEWAY_LEASE, MAIN_USER, Leases, echo, eventually, worker
from tests.dashboard_harness import free_port, localhost_session
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

START_TIMEOUT = 90.0


def _config(home: Path, url: str, telegram: FakeTelegram, llm: FakeLLM, port: int) -> Path:
    llm.handler = echo
    return write_config(
        home,
        agent=fake_model(llm, request_timeout=30),
        telegram=fake_telegram(telegram, (MAIN_USER,)),
        extra="\n".join(
            [
                "[limits]",
                "messages_per_minute = 0",
                "[cluster]",
                f'database_url = "{url}"',
                'worker_name = "unset"',
                f"lease_seconds = {GATEWAY_LEASE}",
                "[dashboard]",
                'host = "127.0.0.1"',
                f"port = {port}",
            ]
        ),
    )


async def _health(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(f"{base}health") as response:
        body = await response.text()
        assert response.status == 200, body[:2000]
        return body


@pytest.mark.long
async def test_the_default_agents_worker_serves_the_dashboard_and_its_health_shows_the_cluster(
    tmp_path: Path, database_url: str, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    port = free_port()
    config = _config(tmp_path, database_url, telegram, fake_llm, port)
    leases = await Leases.open(database_url)
    workers: dict[str, ClawgateProcess] = {n: worker(tmp_path, config, n) for n in ("w1", "w2")}

    async def serving(names: set[str]) -> str | None:
        """The worker of `names` that holds the agent and says its dashboard listens."""
        holder = (await leases.holders("agent")).get("agent:main")
        if holder not in names:
            return None
        logged = any("dashboard listening on" in line for line in workers[holder].stderr_lines)
        return holder if logged else None

    try:
        for process in workers.values():
            await process.start()

        async def both_seen_and_served() -> bool:
            rows = await leases.pool.fetch("SELECT name FROM workers")
            return {r["name"] for r in rows} >= {"w1", "w2"} and bool(await serving({"w1", "w2"}))

        await eventually(both_seen_and_served, START_TIMEOUT)
        holder = await serving({"w1", "w2"})
        assert holder is not None
        other = next(name for name in workers if name != holder)

        token = read_token(tmp_path / "data")
        assert token
        base = f"http://{site_host(token)}:{port}/"
        async with localhost_session(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
            code = issue_login_code(tmp_path / "data")
            async with session.get(f"{base}login?code={code}") as response:
                assert response.status == 200
            page = await _health(session, base)
            assert 'id="cluster-workers"' in page and 'id="cluster-leases"' in page
            assert "<td>w1</td>" in page and "<td>w2</td>" in page
            assert "agent:main</td>" in page
            assert "(telegram)</td>" in page  # the bot, named by its account in the config
            assert f"<td>{holder}</td>" in page

            # The agent's message still goes through the tables and is answered.
            telegram.user_says(MAIN_USER, "hello")
            reply = await telegram.next_message(MAIN_USER, timeout=60)
            assert reply["text"] == "re: hello"

            # Its worker dies: the other takes the agent, and the dashboard with it.
            workers[holder].send_signal(signal.SIGKILL)
            assert await workers[holder].wait(25) == -signal.SIGKILL

            async def moved() -> bool:
                return await serving({other}) == other

            await eventually(moved, GATEWAY_LEASE + START_TIMEOUT)
            # Logins are the serving process's: one logs in again (a fresh code, as ever).
            async with session.get(f"{base}health", allow_redirects=False) as response:
                assert response.status in (302, 303, 401)
            code = issue_login_code(tmp_path / "data")
            async with session.get(f"{base}login?code={code}") as response:
                assert response.status == 200
            page = await _health(session, base)
            assert f"<td>{other}</td>" in page
    finally:
        for process in workers.values():
            await process.close()
        await leases.close()

"""Dashboard sessions are the server's (#33 item 2): logout, token rotation and the idle timeout
revoke a session wherever its cookie went, and end its open event streams; failed logins are
logged and slowed. Through aiohttp's test client over the real app and services, and once
through a real gateway process and the real `clawgate dashboard --rotate`."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from clawgate.gateway.app import dashboard_services
from clawgate.gateway.dashboard.auth import (
    COOKIE_NAME,
    CSRF_FIELD,
    Auth,
    ensure_token,
    issue_login_code,
    rotate_token,
)
from clawgate.gateway.dashboard.browser_sessions import LoginThrottle
from clawgate.gateway.dashboard.server import build_app
from clawgate.kernel.config import AgentConfig, DashboardConfig, load_config
from tests.dashboard_harness import (
    CSRF_META,
    DashboardClient,
    DashboardGateway,
    chat,
    clawgate_output,
    dashboard,
    localhost_session,
    site_client,
    web_channel,
)
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.harness import Harness, make_config

__all__ = ["chat", "dashboard"]

MINUTE = 60.0
JSON = {"Accept": "application/json"}


async def replay(client: DashboardClient, cookie: str, path: str = "/memory") -> int:
    """The status a request carrying `cookie` gets from another client (an attacker who
    saved it), for a page and for a script asking JSON."""
    other = await client.anonymous()
    try:
        headers = {"Cookie": f"{COOKIE_NAME}={cookie}"}
        page = await other.get(path, headers=headers, allow_redirects=False)
        data = await other.get(path, headers={**headers, **JSON}, allow_redirects=False)
        return page.status if page.status == 200 else data.status
    finally:
        await other.close()


async def stream_ended(response: aiohttp.ClientResponse, timeout: float = 10) -> bool:
    """Reads the event stream to its end; True if it ended within `timeout`."""
    try:
        async with asyncio.timeout(timeout):
            while await response.content.readline():
                pass
    except TimeoutError:
        return False
    return True


async def open_stream(client: TestClient[Any, Any] | DashboardClient) -> aiohttp.ClientResponse:
    response = await client.get("/chat/owner/events", headers={"Accept": "text/event-stream"})
    assert response.status == 200
    assert await response.content.readline() == b"retry: 2000\n"
    return response


async def test_a_cookie_replayed_after_logout_is_refused(dashboard: DashboardClient) -> None:
    cookie = dashboard.cookie
    assert cookie and await replay(dashboard, cookie) == 200
    logout = await dashboard.post_form("/logout")
    assert logout.status == 303
    assert await replay(dashboard, cookie) == 401
    other = await dashboard.anonymous()
    try:
        page = await other.get(
            "/memory", headers={"Cookie": f"{COOKIE_NAME}={cookie}"}, allow_redirects=False
        )
        assert page.status == 303 and page.headers["Location"] == "/login"
    finally:
        await other.close()


async def test_logging_out_ends_only_that_session(dashboard: DashboardClient) -> None:
    first = dashboard.cookie
    assert first
    second = await dashboard.anonymous()
    try:
        code = issue_login_code(dashboard.config.data_dir)
        assert (await second.get(f"/login?code={code}", allow_redirects=False)).status == 200
        assert (await dashboard.post_form("/logout")).status == 303
        assert (await second.get("/memory", allow_redirects=False)).status == 200
        assert await replay(dashboard, first) == 401
    finally:
        await second.close()


async def test_an_open_event_stream_ends_on_logout(chat: DashboardClient) -> None:
    stream = await open_stream(chat)
    assert (await chat.post_form("/logout")).status == 303
    assert await stream_ended(stream)
    assert chat.harness.gateway.manager.channels["web"].watching("owner") == 0


async def test_an_open_event_stream_ends_when_the_token_is_rotated(chat: DashboardClient) -> None:
    cookie = chat.cookie
    assert cookie
    stream = await open_stream(chat)
    # Another process (the CLI) replaces the file; no request reaches the server after it.
    rotate_token(chat.config.data_dir)
    assert await stream_ended(stream)
    assert await replay(chat, cookie) == 401


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_an_idle_session_is_revoked_and_its_stream_ends(
    tmp_path: Path, agent_config: AgentConfig
) -> None:
    config = make_config(tmp_path, agent_config)
    clock = Clock()
    async with Harness(config, extra_channels=web_channel) as harness:
        services = dashboard_services(harness.gateway)
        idle = services.config.dashboard.session_idle_minutes * MINUTE
        assert idle == 720 * MINUTE
        auth = Auth(config.data_dir, clock=clock, idle_seconds=idle)
        app = build_app(dataclasses.replace(services, auth=auth))
        ensure_token(config.data_dir)
        async with site_client(app, config.data_dir) as client:
            code = issue_login_code(config.data_dir)
            assert (await client.get(f"/login?code={code}", allow_redirects=False)).status == 200
            # Each use restarts the idle time.
            for _ in range(3):
                clock.now += idle - MINUTE
                assert (await client.get("/memory", allow_redirects=False)).status == 200
            stream = await open_stream(client)
            clock.now += idle
            # The server's sweep ends the stream without any request.
            assert await stream_ended(stream)
            assert (await client.get("/memory", allow_redirects=False)).status == 303
            assert (await client.get("/memory", headers=JSON)).status == 401


def test_the_idle_timeout_is_a_config_key(tmp_path: Path) -> None:
    assert DashboardConfig().session_idle_minutes == 720
    settings = load_config(
        tmp_path / "absent.toml", environ={"CLAWGATE_DASHBOARD__SESSION_IDLE_MINUTES": "30"}
    ).dashboard
    assert settings.session_idle_minutes == 30


async def test_failed_logins_are_logged_and_slowed(
    tmp_path: Path, agent_config: AgentConfig, caplog: pytest.LogCaptureFixture
) -> None:
    config = make_config(tmp_path, agent_config)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async with Harness(config) as harness:
        services = dashboard_services(harness.gateway)
        auth = Auth(config.data_dir, throttle=LoginThrottle(sleep=sleep))
        app = build_app(dataclasses.replace(services, auth=auth))
        token = rotate_token(config.data_dir)
        async with site_client(app, config.data_dir) as client:
            with caplog.at_level(logging.WARNING, "clawgate.gateway.dashboard"):
                for guess in ("wrong", "also-wrong"):
                    refused = await client.post("/login", data={"token": guess})
                    assert refused.status == 403
                assert (await client.get("/login?code=guessed")).status == 403
                right = await client.post("/login", data={"token": token}, allow_redirects=False)
                assert right.status == 303
            # Each attempt after a failure waited, longer after each failure.
            assert len(waits) == 3 and waits == sorted(waits) and waits[0] > 0
            failed = [r.getMessage() for r in caplog.records if "failed login" in r.getMessage()]
            assert len(failed) == 3 and "3 in a row" in failed[-1]
            assert token not in caplog.text and "also-wrong" not in caplog.text
            # After a success the client starts afresh.
            waits.clear()
            assert (await client.post("/login", data={"token": token})).status == 200
            assert waits == []


async def test_a_real_gateway_revokes_on_logout_and_on_clawgate_dashboard_rotate(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        jars = [aiohttp.CookieJar(unsafe=True) for _ in range(2)]
        sessions = [localhost_session(cookie_jar=jar) for jar in jars]
        try:
            cookies = []
            for session, jar in zip(sessions, jars, strict=True):
                login = await session.get(await gateway.login_link(), allow_redirects=False)
                assert login.status == 200
                cookies.append(next(c.value for c in jar if c.key == COOKIE_NAME))
            first, second = sessions
            page = await (await first.get(gateway.url + "memory")).text()
            csrf = CSRF_META.search(page)
            assert csrf
            logout = await first.post(
                gateway.url + "logout", data={CSRF_FIELD: csrf.group(1)}, allow_redirects=False
            )
            assert logout.status == 303
            saved = {"Cookie": f"{COOKIE_NAME}={cookies[0]}", **JSON}
            async with localhost_session() as attacker:
                replayed = await attacker.get(gateway.url + "memory", headers=saved)
                assert replayed.status == 401

            stream = await second.get(
                gateway.url + "chat/owner/events", headers={"Accept": "text/event-stream"}
            )
            assert stream.status == 200
            assert await stream.content.readline() == b"retry: 2000\n"
            code, output = await clawgate_output(
                tmp_path, "--config", str(gateway.config_path), "dashboard", "--rotate", "--no-open"
            )
            assert code == 0, output
            assert await stream_ended(stream, timeout=20)
            saved = {"Cookie": f"{COOKIE_NAME}={cookies[1]}", **JSON}
            async with localhost_session() as attacker:
                replayed = await attacker.get(gateway.url + "memory", headers=saved)
                assert replayed.status == 401
            assert re.search(
                r"session ended \(the dashboard token changed\)", gateway.process.stderr
            )
        finally:
            for session in sessions:
                await session.close()

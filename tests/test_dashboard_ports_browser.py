"""The dashboard's session cannot be taken from another loopback port (#33 item 1).

Cookies are scoped by host name, not by port, so a cookie set for 127.0.0.1 reaches every
process listening on any port of 127.0.0.1 that the browser visits. Here a real `clawgate
gateway` serves the dashboard, headless Chromium logs in through the link `clawgate
dashboard` prints, and then visits two listeners on other loopback ports of this machine:
one that records every request, and one that sends the browser on to its own port under
every name an outsider can know for the dashboard (127.0.0.1, localhost, a fixed
clawgate.localhost). Everything both received is replayed against the dashboard, and no
replay gets further than the login page, and nothing they received names the dashboard's
host. The same replay with the browser's own cookie gets in: the replay would notice a leak.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from tests.dashboard_harness import Browser, DashboardGateway, browser, free_port
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser"]

# The names of the dashboard an outsider knows: its address, loopback's own name, a fixed
# name under .localhost. The redirecting listener sends the browser to each on its own port.
KNOWN_NAMES = ("127.0.0.1", "localhost", "clawgate.localhost")
# Not replayed: how the request reached the listener.
TRANSPORT_HEADERS = frozenset({"host", "connection", "content-length", "accept"})


@dataclass(frozen=True)
class Received:
    host: str
    path: str
    headers: tuple[tuple[str, str], ...]

    def replayable(self) -> dict[str, str]:
        return {k: v for k, v in self.headers if k.lower() not in TRANSPORT_HEADERS}


@asynccontextmanager
async def listener(*, redirect: bool) -> AsyncIterator[tuple[int, list[Received]]]:
    """A server on another loopback port recording every request: (port, requests). With
    `redirect`, `/hop/<n>` sends the browser to KNOWN_NAMES[n] on this same port."""
    port = free_port()
    received: list[Received] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        received.append(Received(request.host, request.path_qs, tuple(request.headers.items())))
        parts = request.path.split("/")
        if redirect and len(parts) == 3 and parts[1] == "hop" and parts[2].isdigit():
            hop = int(parts[2])
            if hop < len(KNOWN_NAMES):
                raise web.HTTPFound(f"http://{KNOWN_NAMES[hop]}:{port}/hop/{hop + 1}")
        return web.Response(
            text="<title>elsewhere</title><p>nothing here</p>", content_type="text/html"
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield port, received
    finally:
        await runner.cleanup()


async def replay(gateway: DashboardGateway, site: str, headers: dict[str, str]) -> list[int]:
    """What `headers` get from the dashboard, sent from elsewhere: a page and a script's
    JSON request, under the dashboard's own host name (an outsider cannot know it; given
    here for the strongest replay)."""
    statuses = []
    async with aiohttp.ClientSession() as attacker:
        for accept in ("text/html", "application/json"):
            response = await attacker.get(
                f"http://127.0.0.1:{gateway.port}/memory",
                headers={**headers, "Host": site, "Accept": accept},
                allow_redirects=False,
            )
            async with response:
                statuses.append(response.status)
                if response.status == 303:
                    assert response.headers["Location"] == "/login"
    return statuses


async def test_no_listener_on_another_loopback_port_receives_a_session_it_can_replay(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with (
        DashboardGateway(tmp_path, telegram, fake_llm) as gateway,
        listener(redirect=False) as (plain_port, plain),
        listener(redirect=True) as (hop_port, hops),
    ):
        link = await gateway.login_link()
        site = urlsplit(link).netloc
        await browser.get(link)
        await browser.find("nav a[href='/memory']")
        own_cookies = await browser.call(browser.driver.get_cookies)
        assert own_cookies

        for name in KNOWN_NAMES:
            await browser.get(f"http://{name}:{plain_port}/memory")
            await browser.wait_for_text("p", "nothing here")
        await browser.get(f"http://127.0.0.1:{hop_port}/hop/0")
        await browser.wait_for_text("p", "nothing here")
        assert f"http://{KNOWN_NAMES[-1]}:{hop_port}/hop/" in browser.current_url

        # The browser went everywhere and followed every redirect.
        for name in KNOWN_NAMES:
            assert any(r.host == f"{name}:{plain_port}" for r in plain), name
            assert any(r.host == f"{name}:{hop_port}" for r in hops), name
        # The browser's session is alive, and replaying its own cookie would get in.
        cookie = "; ".join(f"{c['name']}={c['value']}" for c in own_cookies)
        assert await replay(gateway, site, {"Cookie": cookie}) == [200, 200]
        # Nothing the listeners received gets in.
        for received in [*plain, *hops]:
            statuses = await replay(gateway, site, received.replayable())
            assert statuses == [303, 401], (received, statuses)
        # Nor did they learn the dashboard's host name, which a redirect would need (a
        # referrer, say); the gateway's log does not name it either.
        host = site.rsplit(":", 1)[0]
        for received in [*plain, *hops]:
            assert host not in repr(received), received
        assert host not in gateway.process.stderr
        await browser.get(f"{link.split('/login')[0]}/memory")
        await browser.find("nav a[href='/memory']")

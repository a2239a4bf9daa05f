"""The dashboard's serving, login and request checks, through aiohttp's test client over the
real app and services (tests/dashboard_harness.py): login by one-time code and by token,
the session cookie, CSRF and Origin checks, security headers, the loopback Host check, the
refusal to listen beyond loopback without a token, static file confinement, and the
`clawgate dashboard` command."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from pathlib import Path

import pytest
from aiohttp import ClientSession

from clawgate.gateway.dashboard.auth import (
    COOKIE_NAME,
    LOGIN_CODE_SECONDS,
    Auth,
    issue_login_code,
    read_token,
    rotate_token,
    token_path,
)
from clawgate.gateway.dashboard.server import Dashboard
from clawgate.kernel.config import DashboardConfig, load_config
from clawgate.kernel.errors import ConfigError
from tests.dashboard_harness import (
    DashboardClient,
    clawgate_output,
    dashboard,
    free_port,
    site_headers,
)
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import fake_model, fake_telegram, write_config

__all__ = ["dashboard"]

PAGES = ["/chat", "/memory", "/sessions", "/people", "/jobs", "/health"]


async def test_a_logged_in_owner_sees_every_page_in_the_navigation(
    dashboard: DashboardClient,
) -> None:
    page = await dashboard.text("/memory")
    for href in PAGES:
        assert f'href="{href}"' in page
        await dashboard.text(href)


async def test_the_login_cookie_is_httponly_strict_and_the_code_works_once(
    dashboard: DashboardClient,
) -> None:
    code = issue_login_code(dashboard.config.data_dir)
    site = site_headers(dashboard.config.data_dir)
    async with ClientSession(headers=site) as fresh:
        first = await fresh.get(
            dashboard.client.make_url(f"/login?code={code}"), allow_redirects=False
        )
        # A page that moves on to / itself: a navigation of the site, which carries the
        # Strict cookie even when another site (the login page file) started the login.
        assert first.status == 200
        assert '<meta http-equiv="refresh" content="0;url=/">' in await first.text()
        cookie = first.headers["Set-Cookie"]
        assert f"{COOKIE_NAME}=" in cookie
        for attribute in ("HttpOnly", "SameSite=Strict", "Path=/"):
            assert attribute in cookie
        assert "domain" not in cookie.lower()  # host-only: the site host alone
        again = await fresh.get(
            dashboard.client.make_url(f"/login?code={code}"), allow_redirects=False
        )
        assert again.status == 403
        assert "used or expired" in await again.text()
        assert "Set-Cookie" not in again.headers


async def test_without_a_cookie_pages_redirect_to_login_and_the_rest_is_401(
    dashboard: DashboardClient,
) -> None:
    other = await dashboard.anonymous()
    try:
        for path in [*PAGES, "/memory/edit", "/sessions/archive"]:
            response = await other.get(path, allow_redirects=False)
            assert response.status == 303 and response.headers["Location"] == "/login", path
        api = await other.get("/memory", headers={"Accept": "application/json"})
        assert api.status == 401
        post = await other.post("/memory/edit", data={"text": "x", "version": "y"})
        assert post.status == 401
        forged = await other.get(
            "/memory", cookies={COOKIE_NAME: "1.abc.def"}, allow_redirects=False
        )
        assert forged.status == 303
    finally:
        await other.close()


async def test_the_token_form_logs_in_and_a_wrong_token_does_not(
    dashboard: DashboardClient,
) -> None:
    token = read_token(dashboard.config.data_dir)
    assert token
    other = await dashboard.anonymous()
    try:
        wrong = await other.post("/login", data={"token": token + "x"}, allow_redirects=False)
        assert wrong.status == 403 and "Wrong token" in await wrong.text()
        assert (await other.get("/memory", allow_redirects=False)).status == 303
        right = await other.post("/login", data={"token": token}, allow_redirects=False)
        assert right.status == 303
        assert (await other.get("/memory", allow_redirects=False)).status == 200
    finally:
        await other.close()


async def test_an_expired_code_and_a_code_from_before_a_rotation_are_refused(
    dashboard: DashboardClient,
) -> None:
    data_dir = dashboard.config.data_dir
    old = issue_login_code(data_dir, clock=lambda: 1_000.0)
    late = Auth(data_dir, clock=lambda: 1_000.0 + LOGIN_CODE_SECONDS + 1)
    assert not late.consume_code(old)
    pending = issue_login_code(data_dir)
    rotate_token(data_dir)
    assert not Auth(data_dir).consume_code(pending)


async def test_rotating_the_token_logs_every_browser_out(dashboard: DashboardClient) -> None:
    assert (await dashboard.get("/memory", allow_redirects=False)).status == 200
    # The file's mtime may not move within its resolution: the inode does (atomic replace).
    rotate_token(dashboard.config.data_dir)
    assert (await dashboard.get("/memory", allow_redirects=False)).status == 303


async def test_state_changing_requests_need_the_csrf_token(dashboard: DashboardClient) -> None:
    form = {"text": "- hacked\n", "version": "anything"}
    missing = await dashboard.post_form("/memory/edit", form, csrf=False)
    assert missing.status == 403 and "CSRF" in await missing.text()
    wrong = await dashboard.client.post(
        "/memory/edit", data={**form, "_csrf": "0" * 64}, allow_redirects=False
    )
    assert wrong.status == 403
    header = await dashboard.client.post(
        "/logout", headers={"X-CSRF-Token": dashboard.csrf}, allow_redirects=False
    )
    assert header.status == 303
    assert "hacked" not in dashboard.services.memory.read_memory()


async def test_cross_site_and_cross_origin_posts_are_refused(dashboard: DashboardClient) -> None:
    for headers in (
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
    ):
        response = await dashboard.post_form("/logout", headers=headers)
        assert response.status == 403, headers
    # A same-origin form post under Referrer-Policy no-referrer says `Origin: null`.
    same = await dashboard.post_form(
        "/logout", headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"}
    )
    assert same.status == 303
    anonymous = await dashboard.anonymous()
    try:
        token = read_token(dashboard.config.data_dir) or ""
        login = await anonymous.post(
            "/login", data={"token": token}, headers={"Origin": "http://evil.example"}
        )
        assert login.status == 403
    finally:
        await anonymous.close()


async def test_every_response_carries_the_security_headers(dashboard: DashboardClient) -> None:
    anonymous = await dashboard.anonymous()
    try:
        responses = [
            await dashboard.get("/memory"),
            await dashboard.get("/static/style.css"),
            await dashboard.get("/no/such/page"),
            await anonymous.get("/login"),
        ]
        for response in responses:
            headers = response.headers
            csp = headers["Content-Security-Policy"]
            assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert "unsafe-inline" not in csp
            assert headers["X-Frame-Options"] == "DENY"
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Referrer-Policy"] == "no-referrer"
    finally:
        await anonymous.close()


async def test_pages_have_no_inline_script(dashboard: DashboardClient) -> None:
    for path in ["/memory", "/memory/edit", "/sessions", "/login"]:
        page = await dashboard.text(path)
        for chunk in page.split("<script")[1:]:
            assert chunk.lstrip().startswith("src="), path


async def test_a_host_header_not_naming_the_site_host_is_refused(
    dashboard: DashboardClient,
) -> None:
    # A DNS-rebinding page reaches 127.0.0.1 under its own name; loopback's own names are
    # refused too (a cookie set under them would reach every other loopback port).
    site = site_headers(dashboard.config.data_dir)["Host"]
    for host in ("evil.example", "localhost", "127.0.0.1", "clawgate.localhost", "[::1]"):
        for path in ("/login", "/memory", "/static/app.js"):
            response = await dashboard.get(path, headers={"Host": f"{host}:18790"})
            assert response.status == 421, (host, path)
            # Anyone on the machine may ask: the answer must not tell the site host.
            assert site not in await response.text()
    for host in (site, site.upper(), f"{site}:18790"):
        assert (await dashboard.get("/login", headers={"Host": host})).status == 200


@pytest.mark.parametrize(
    "name", ["../auth.py", "..%2Fauth.py", "%2e%2e/templates/base.html", "/etc/passwd"]
)
async def test_static_files_stay_inside_the_static_folder(
    dashboard: DashboardClient, name: str
) -> None:
    response = await dashboard.get(f"/static/{name}")
    assert response.status == 404
    assert "import" not in await response.text()


async def test_static_files_are_served(dashboard: DashboardClient) -> None:
    script = await dashboard.get("/static/app.js")
    assert script.status == 200
    assert script.headers["Content-Type"].startswith(("text/javascript", "application/javascript"))
    assert "X-CSRF-Token" in await script.text()


async def test_a_non_loopback_host_without_a_token_is_refused_at_start(
    dashboard: DashboardClient, tmp_path: Path
) -> None:
    config = dashboard.config.model_copy(
        update={
            "data_dir": tmp_path / "empty",
            "dashboard": DashboardConfig(host="0.0.0.0", port=free_port()),
        }
    )
    services = dataclasses.replace(dashboard.services, config=config)
    with pytest.raises(ConfigError, match="not loopback"):
        Dashboard(services)
    # With a token, made on purpose (`clawgate dashboard --rotate`), it may.
    rotate_token(config.data_dir)
    Dashboard(services)
    # Loopback needs no token made beforehand: start() makes one.
    loopback = config.model_copy(
        update={"data_dir": tmp_path / "other", "dashboard": DashboardConfig()}
    )
    Dashboard(dataclasses.replace(services, config=loopback))


async def test_the_dashboard_listens_on_loopback_and_stops(dashboard: DashboardClient) -> None:
    port = free_port()
    config = dashboard.config.model_copy(update={"dashboard": DashboardConfig(port=port)})
    server = Dashboard(dataclasses.replace(dashboard.services, config=config))
    await server.start()
    try:
        assert server.url == f"http://127.0.0.1:{port}/"
        async with ClientSession() as client:
            site = site_headers(dashboard.config.data_dir)
            assert (await client.get(f"{server.url}login", headers=site)).status == 200
            assert (await client.get(f"{server.url}login")).status == 421
    finally:
        await server.stop()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_a_port_in_use_leaves_the_gateway_running_without_a_dashboard(
    dashboard: DashboardClient, caplog: pytest.LogCaptureFixture
) -> None:
    port = dashboard.client.port
    assert port is not None
    config = dashboard.config.model_copy(update={"dashboard": DashboardConfig(port=port)})
    server = Dashboard(dataclasses.replace(dashboard.services, config=config))
    await server.start()
    assert server.url is None
    assert "cannot listen" in caplog.text
    await server.stop()


async def test_a_disabled_dashboard_does_not_listen(dashboard: DashboardClient) -> None:
    port = free_port()
    settings = DashboardConfig(enabled=False, port=port)
    config = dashboard.config.model_copy(update={"dashboard": settings})
    server = Dashboard(dataclasses.replace(dashboard.services, config=config))
    await server.start()
    assert server.url is None
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_clawgate_dashboard_prints_a_working_one_time_link_and_rotates(
    dashboard: DashboardClient, tmp_path: Path
) -> None:
    port = free_port()
    config_path = tmp_path / "cli.toml"
    config_path.write_text(
        f"data_dir = {json.dumps(str(dashboard.config.data_dir))}\n"
        f"workspace = {json.dumps(str(dashboard.workspace))}\n"
        f"[dashboard]\nport = {port}\n",
        encoding="utf-8",
    )
    # The command makes a link only once the dashboard on that port has proved it is the
    # gateway's (it writes the nonce the proof needs).
    config = dashboard.config.model_copy(update={"dashboard": DashboardConfig(port=port)})
    server = Dashboard(dataclasses.replace(dashboard.services, config=config))
    await server.start()
    try:
        code, output = await clawgate_output(
            tmp_path, "--config", str(config_path), "dashboard", "--no-open"
        )
    finally:
        await server.stop()
    assert code == 0, output
    site = site_headers(dashboard.config.data_dir)["Host"]
    assert site.startswith("clawgate-") and site.endswith(".localhost")
    # One link, under the site host, at the configured port.
    links = re.findall(r"http://\S+", output)
    assert len(links) == 1, output
    match = re.fullmatch(rf"http://{re.escape(site)}:{port}/login\?code=(\S+)", links[0])
    assert match, output
    assert read_token(dashboard.config.data_dir) not in output
    anonymous = await dashboard.anonymous()
    try:
        login = await anonymous.get(f"/login?code={match.group(1)}", allow_redirects=False)
        assert login.status == 200
        assert (await anonymous.get("/memory", allow_redirects=False)).status == 200
        before = read_token(dashboard.config.data_dir)
        code, output = await clawgate_output(
            tmp_path, "--config", str(config_path), "dashboard", "--rotate", "--no-open"
        )
        assert code == 0, output
        assert read_token(dashboard.config.data_dir) != before
        assert token_path(dashboard.config.data_dir).stat().st_mode & 0o777 == 0o600
        assert (await anonymous.get("/memory", allow_redirects=False)).status == 303
    finally:
        await anonymous.close()


async def test_onboard_makes_the_token_once_private(tmp_path: Path) -> None:
    code, output = await clawgate_output(tmp_path, "onboard", "--yes", "--no-check")
    assert code == 0, output
    token_file = token_path(tmp_path / ".clawgate")
    assert f"created  {token_file}" in output
    assert token_file.stat().st_mode & 0o777 == 0o600
    token = read_token(tmp_path / ".clawgate")
    assert token and len(token) >= 40 and token not in output
    code, output = await clawgate_output(tmp_path, "onboard", "--yes", "--no-check")
    assert code == 0, output
    assert f"kept     {token_file}" in output
    assert read_token(tmp_path / ".clawgate") == token


async def test_a_gateway_told_to_listen_beyond_loopback_without_a_token_stops_with_one_line(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config_path = write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        telegram=fake_telegram(telegram, [1001]),
        extra=f'[dashboard]\nhost = "0.0.0.0"\nport = {free_port()}\n',
    )
    code, output = await clawgate_output(tmp_path, "--config", str(config_path), "gateway")
    assert code == 2, output
    assert output.splitlines()[-1] == (
        "clawgate: [dashboard] host = '0.0.0.0' is not loopback and there is no dashboard "
        'token: run `clawgate dashboard --rotate` to make one, or set host = "127.0.0.1"'
    ), output
    assert "Traceback" not in output


async def test_a_browser_with_a_cookie_from_before_a_rotation_logs_in_again(
    dashboard: DashboardClient,
) -> None:
    token = rotate_token(dashboard.config.data_dir)
    assert (await dashboard.get("/memory", allow_redirects=False)).status == 303
    login = await dashboard.client.post("/login", data={"token": token}, allow_redirects=False)
    assert login.status == 303
    assert (await dashboard.get("/memory", allow_redirects=False)).status == 200


def test_the_dashboard_section_defaults_to_loopback_and_checks_its_port(tmp_path: Path) -> None:
    settings = load_config(tmp_path / "absent.toml", environ={}).dashboard
    assert (settings.enabled, settings.host, settings.port) == (True, "127.0.0.1", 18790)
    with pytest.raises(ConfigError, match="CLAWGATE_DASHBOARD__PORT"):
        load_config(tmp_path / "absent.toml", environ={"CLAWGATE_DASHBOARD__PORT": "70000"})

"""Test fixtures for the dashboard, at three depths.

- `dashboard`: aiohttp's test client over `build_app`, with the real services of an
  in-process gateway (tests/harness.py: fake model, recording channel) on a tmp workspace,
  already logged in through a one-time code. `DashboardClient.post_form` adds the CSRF
  token; `.anonymous()` is a second client with no cookie. Test clients connect to
  127.0.0.1 and name the site host in their Host header (`site_client`).
- `DashboardGateway`: a real `clawgate gateway` process (tests/process.py) with the
  dashboard on a free loopback port, against the fake model and fake Telegram. `gw.url` is
  under the site host, as `clawgate dashboard` prints it; `localhost_session()` is an
  aiohttp session that resolves `*.localhost` to 127.0.0.1 as browsers do (the system
  resolver may not).
- `browser`: headless Chromium from the distribution (`/usr/bin/chromium` driven by
  `/usr/bin/chromedriver` through Selenium; nothing downloaded), one per test process
  (`Chromium`, the `chromium` fixture of tests/conftest.py), given to each test in a new
  window with cookies and cache cleared. Skipped when Chromium is
  absent, except with CI=true, where the browser tests must run. Selenium blocks, so every
  call runs in a thread (`await browser.call(fn)`): the fakes serve on this event loop.
  `await browser.screenshots(name)` saves `<name>-desktop.png` (1280x900) and
  `<name>-phone.png` (390x844) under $TEST_SCREENSHOTS_DIR (default build/screenshots/,
  which .ci/run leaves behind as the run's artifacts); `await browser.audit(name)` also
  runs axe-core (tests/vendor/axe.min.js, vendored from the npm package) in the page at
  both widths and returns its serious and critical violations.

Test modules import the fixtures they use: `from tests.dashboard_harness import dashboard`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import ClientResponse, web
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.test_utils import TestClient, TestServer

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.base import Channel
from clawgate.gateway.app import dashboard_services
from clawgate.gateway.dashboard.auth import (
    COOKIE_NAME,
    CSRF_FIELD,
    CSRF_HEADER,
    ensure_token,
    issue_login_code,
    read_token,
    site_host,
)
from clawgate.gateway.dashboard.server import build_app
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.dashboard.web_channel import WebChannel
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import AgentConfig, Config
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.harness import Harness, make_config
from tests.process import (
    ClawgateProcess,
    fake_model,
    fake_telegram,
    start_clawgate,
    write_config,
)

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
DESKTOP = (1280, 900)
PHONE = (390, 844)
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
# Runs in the page (Selenium's script channel, which the page's CSP does not govern): the
# serious and critical violations, each with the first few elements it names.
AXE_RUN = """
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ["violations"]}).then(function (result) {
  done(result.violations
    .filter(function (v) { return v.impact === "serious" || v.impact === "critical"; })
    .map(function (v) {
      return {id: v.id, impact: v.impact, help: v.help,
              nodes: v.nodes.slice(0, 5).map(function (n) { return n.target.join(" "); })};
    }));
}, function (error) { done([{id: "axe-error", impact: "critical", help: String(error)}]); });
"""
# Answers null to the same script channel: the page has no axe yet.
AXE_MISSING = "arguments[arguments.length - 1](null);"
CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]*)">')


def screenshot_dir() -> Path:
    # Relative to the repository, not the working directory: pytest run from inside a
    # package folder once left a screenshot committed in gateway/dashboard/.
    folder = REPO / (os.environ.get("TEST_SCREENSHOTS_DIR") or "build/screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# -- (a) the app in process, through aiohttp's test client -----------------------------------


class DashboardClient:
    """A logged-in browser, as far as HTTP goes: cookie jar, CSRF token, helpers."""

    def __init__(
        self, client: TestClient[Any, Any], services: DashboardServices, harness: Harness
    ) -> None:
        self.client = client
        self.services = services
        self.harness = harness

    @property
    def url(self) -> str:
        """The server's base URL (for a browser pointed at this in-process app)."""
        return str(self.client.make_url("/"))

    @property
    def config(self) -> Config:
        return self.services.config

    @property
    def workspace(self) -> Path:
        return self.services.config.workspace

    @property
    def cookie(self) -> str | None:
        for cookie in self.client.session.cookie_jar:
            if cookie.key == COOKIE_NAME:
                return cookie.value
        return None

    @property
    def csrf(self) -> str:
        cookie = self.cookie
        assert cookie, "not logged in"
        return self.services.auth.csrf_token(cookie)

    async def login(self) -> ClientResponse:
        code = issue_login_code(self.config.data_dir)
        return await self.client.get(f"/login?code={code}", allow_redirects=False)

    async def get(self, path: str, **kwargs: Any) -> ClientResponse:
        return await self.client.get(path, **kwargs)

    async def text(self, path: str, status: int = 200) -> str:
        """The body of GET `path`, which must answer `status`."""
        response = await self.client.get(path)
        body = await response.text()
        assert response.status == status, f"GET {path}: {response.status}\n{body[:2000]}"
        return body

    async def post_form(
        self, path: str, data: Mapping[str, str] | None = None, *, csrf: bool = True, **kw: Any
    ) -> ClientResponse:
        """POST a form as the page's <form> would (with its `_csrf` field)."""
        fields = dict(data or {})
        if csrf:
            fields[CSRF_FIELD] = self.csrf
        return await self.client.post(path, data=fields, allow_redirects=False, **kw)

    async def post_json(self, path: str, body: Any, **kw: Any) -> ClientResponse:
        """POST JSON as the page scripts do (the token in the X-CSRF-Token header)."""
        headers = {CSRF_HEADER: self.csrf, **kw.pop("headers", {})}
        return await self.client.post(path, json=body, headers=headers, **kw)

    async def anonymous(self) -> TestClient[Any, Any]:
        """Another client on the same server, with no cookie."""
        other = site_client(self.client.app, self.config.data_dir)
        await other.start_server()
        return other


@pytest.fixture
async def dashboard(tmp_path: Path, agent_config: AgentConfig) -> AsyncIterator[DashboardClient]:
    """The dashboard app over a running in-process gateway, logged in."""
    async with dashboard_client(make_config(tmp_path, agent_config)) as client:
        yield client


def web_channel(bus: MessageBus, runtimes: Sequence[AgentRuntime]) -> Sequence[Channel]:
    """The web chat over every agent's runtime (the default agent's first)."""
    return [WebChannel(bus, [r.loop.progress for r in runtimes], runtimes[0].config.agent_name)]


@pytest.fixture
async def chat(tmp_path: Path, agent_config: AgentConfig) -> AsyncIterator[DashboardClient]:
    """`dashboard`, with the web chat's channel running in the gateway."""
    async with dashboard_client(
        make_config(tmp_path, agent_config), extra_channels=web_channel
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def dashboard_client(
    config: Config, **harness_options: Any
) -> AsyncIterator[DashboardClient]:
    """An in-process gateway (tests/harness.py) with the dashboard app over its services,
    logged in. `harness_options` go to `Harness` (e.g. `scheduler=True`)."""
    async with Harness(config, **harness_options) as harness:
        services = dashboard_services(harness.gateway)
        ensure_token(config.data_dir)
        async with site_client(build_app(services), config.data_dir) as test_client:
            client = DashboardClient(test_client, services, harness)
            response = await client.login()
            assert response.status == 200, await response.text()
            yield client


def site_headers(data_dir: Path) -> dict[str, str]:
    """The Host header of a request the dashboard answers (its site host, of the current
    token)."""
    return {"Host": site_host(read_token(data_dir) or "")}


def site_client(app: web.Application, data_dir: Path) -> TestClient[Any, Any]:
    """A test client on 127.0.0.1 whose requests name the current site host, as a browser
    under the link `clawgate dashboard` prints does; a Host header a test gives stays."""

    async def name_the_site(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        if request.headers.get("Host") == request.url.raw_authority:
            request.headers.update(site_headers(data_dir))
        return await handler(request)

    return TestClient(TestServer(app, host="127.0.0.1"), middlewares=(name_the_site,))


class LocalhostResolver(AbstractResolver):
    """`*.localhost` is loopback (RFC 6761), as browsers resolve it; nothing else resolves."""

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != "localhost" and not host.endswith(".localhost"):
            raise OSError(f"{host}: only localhost names resolve in these tests")
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        return None


def localhost_session(**options: Any) -> aiohttp.ClientSession:
    """An aiohttp session that reaches `*.localhost` on 127.0.0.1 (`options` go to the
    session, e.g. a cookie jar)."""
    connector = aiohttp.TCPConnector(resolver=LocalhostResolver())
    return aiohttp.ClientSession(connector=connector, **options)


# -- (b) a real gateway process with the dashboard -------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class DashboardGateway:
    """`async with DashboardGateway(home, telegram, fake_llm) as gw`: `clawgate gateway` with
    the dashboard on a free loopback port; `gw.url`, `await gw.login_link()` (made by the
    real `clawgate dashboard --no-open`)."""

    def __init__(
        self,
        home: Path,
        telegram: FakeTelegram,
        llm: FakeLLM,
        *,
        chats: tuple[int, ...] = (1001,),
        extra: str = "",
        agent: Mapping[str, Any] | None = None,
    ) -> None:
        # `extra`: top-level TOML lines, or whole sections, written before [dashboard];
        # `agent`: [agent] settings over the fake model's.
        self.home = home
        self.port = free_port()
        self.config_path = write_config(
            home,
            agent={**fake_model(llm, request_timeout=60), **(agent or {})},
            telegram=fake_telegram(telegram, chats),
            extra=f'{extra}\n[dashboard]\nhost = "127.0.0.1"\nport = {self.port}\n',
        )
        self.loopback_url = f"http://127.0.0.1:{self.port}/"
        self.process = ClawgateProcess(home, "--config", str(self.config_path), "gateway")

    @property
    def url(self) -> str:
        """The dashboard's address under its site host (the gateway made the token)."""
        token = read_token(self.data_dir)
        assert token, "the gateway has not made its dashboard token yet"
        return f"http://{site_host(token)}:{self.port}/"

    @property
    def workspace(self) -> Path:
        return self.home / "workspace"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    async def __aenter__(self) -> DashboardGateway:
        await self.process.start()
        await self.process.wait_for_log("dashboard listening on", timeout=60)
        return self

    async def __aexit__(self, *exc: object) -> None:
        import signal

        if self.process.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await self.process.wait(30)
            except TimeoutError:
                pass
        await self.process.close()

    async def login_link(self) -> str:
        """A one-time login link, as `clawgate dashboard --no-open` prints it."""
        code, out = await clawgate_output(
            self.home, "--config", str(self.config_path), "dashboard", "--no-open"
        )
        assert code == 0, out
        match = re.search(r"(http://\S+/login\?code=\S+)", out)
        assert match, out
        return match.group(1)


async def clawgate_output(home: Path, *args: str, timeout: float = 60) -> tuple[int, str]:
    """Run `clawgate *args` to the end: (exit code, stdout and stderr together)."""
    child = await start_clawgate(home, *args, merge_stderr=True)
    raw, _ = await asyncio.wait_for(child.communicate(), timeout)
    assert child.returncode is not None
    return child.returncode, raw.decode(errors="replace")


# -- (c) headless Chromium -----------------------------------------------------------------


def chromium_or_skip() -> None:
    if CHROMIUM.exists() and CHROMEDRIVER.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{CHROMIUM} or {CHROMEDRIVER} missing: CI must run the browser tests")
    pytest.skip("no /usr/bin/chromium (apt-get install chromium chromium-driver)")


class Browser:
    """One headless Chromium. Every Selenium call runs in a thread (`call`), so the event
    loop - and the fakes on it - keeps running while the browser waits."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def call(self, work: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(work, *args)

    async def get(self, url: str) -> None:
        await self.call(self.driver.get, url)

    async def find(self, css: str, timeout: float = 20) -> Any:
        """The first element matching `css`, waiting for it to appear."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions
        from selenium.webdriver.support.ui import WebDriverWait

        wait = WebDriverWait(self.driver, timeout)
        return await self.call(
            wait.until, expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
        )

    async def wait_for_text(self, css: str, text: str, timeout: float = 20) -> None:
        """Until the first element matching `css` holds `text`, across the page being
        replaced meanwhile (a navigation between finding the element and reading it)."""
        from selenium.common.exceptions import (
            NoSuchElementException,
            StaleElementReferenceException,
            WebDriverException,
        )
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        def shown(driver: Any) -> bool:
            try:
                return text in driver.find_element(By.CSS_SELECTOR, css).text
            except (NoSuchElementException, StaleElementReferenceException):
                return False
            except WebDriverException as exc:
                # Chrome may say this of an element of a page it has just replaced, where
                # it should say "stale element" (SeleniumHQ/selenium issue #15401).
                if "does not belong to the document" in str(exc.msg):
                    return False
                raise

        await self.call(WebDriverWait(self.driver, timeout).until, shown)

    @property
    def current_url(self) -> str:
        return str(self.driver.current_url)

    async def accessibility(self) -> list[dict[str, Any]]:
        """axe-core's serious and critical violations on the page as it is now.

        A page may replace itself between injecting axe and running it (the settings page
        reloads by itself after a restart), so axe is injected in the same script that runs
        it, and a script lost to a navigation is tried again on the new page. A page that
        has axe already (the second width of an audit) is asked first without its 650 KB of
        source, which every script would otherwise carry through WebDriver and parse."""
        from selenium.common.exceptions import WebDriverException

        present = f"if (!window.axe) {{ {AXE_MISSING} }} else {{\n{AXE_RUN}\n}}"
        script = f"if (!window.axe) {{\n{AXE.read_text(encoding='utf-8')}\n}}\n{AXE_RUN}"
        await self.call(self.driver.set_script_timeout, 60)
        for _ in range(2):
            try:
                found: list[dict[str, Any]] | None = await self.call(
                    self.driver.execute_async_script, present
                )
                if found is None:
                    found = await self.call(self.driver.execute_async_script, script)
                assert found is not None
                return found
            except WebDriverException:
                await asyncio.sleep(1)
        found = await self.call(self.driver.execute_async_script, script)
        assert found is not None
        return found

    async def audit(self, name: str) -> dict[str, list[dict[str, Any]]]:
        """Screenshots of the page at phone and desktop width (as `screenshots`), with
        axe-core run at each: {"phone": violations, "desktop": violations}."""
        found = {}
        folder = screenshot_dir()
        for label, (width, height) in (("phone", PHONE), ("desktop", DESKTOP)):
            await self.call(self.driver.set_window_size, width, height)
            found[label] = await self.accessibility()
            path = folder / f"{name}-{label}.png"
            assert await self.call(self.driver.save_screenshot, str(path)), path
        return found

    async def screenshots(self, name: str) -> list[Path]:
        """The current page at desktop and at phone width; back to desktop after."""
        saved = []
        folder = screenshot_dir()
        for label, (width, height) in (("phone", PHONE), ("desktop", DESKTOP)):
            await self.call(self.driver.set_window_size, width, height)
            path = folder / f"{name}-{label}.png"
            assert await self.call(self.driver.save_screenshot, str(path)), path
            saved.append(path)
        return saved


def launch_chromium() -> Any:
    """A new headless Chromium under chromedriver (its profile in a temporary folder, removed
    by `quit_chromium`)."""
    chromium_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="clawgate-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    try:
        return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    except BaseException:
        shutil.rmtree(profile, ignore_errors=True)
        raise


def quit_chromium(driver: Any) -> None:
    profile = driver.capabilities.get("chrome", {}).get("userDataDir")
    driver.quit()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


class Chromium:
    """The test process's one Chromium (a launch costs seconds of CPU), handed to each browser
    test as new: `fresh()` closes every window but the first, leaves its page for a blank one
    (its scripts and dialogs with it), takes back the emulation and URL blocking tests set,
    and clears cookies and the HTTP cache, the state the dashboard keeps in a browser (it uses
    no web storage). The window is kept, not opened anew: a new one costs a new renderer
    process, ~1 s of Chromium's CPU a test. If that reset fails, a new window replaces them
    all; a browser that stopped answering is launched again."""

    def __init__(self) -> None:
        self._driver: Any = None

    def fresh(self) -> Any:
        from selenium.common.exceptions import WebDriverException

        if self._driver is not None:
            for reset in (self._reuse_window, self._new_window):
                try:
                    reset(self._driver)
                    return self._driver
                except WebDriverException:
                    continue
            self.close()
        self._driver = launch_chromium()
        return self._driver

    @classmethod
    def _reuse_window(cls, driver: Any) -> None:
        from selenium.common.exceptions import NoAlertPresentException

        # A dialog a test left open stops the driver's other commands until it is answered.
        with contextlib.suppress(NoAlertPresentException):
            driver.switch_to.alert.dismiss()
        cls._keep_only(driver, driver.window_handles[0])
        driver.get("about:blank")
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "", "features": []})
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        cls._clear(driver)

    @classmethod
    def _new_window(cls, driver: Any) -> None:
        driver.switch_to.new_window("window")
        cls._keep_only(driver, driver.current_window_handle)
        cls._clear(driver)

    @staticmethod
    def _keep_only(driver: Any, kept: str) -> None:
        for handle in driver.window_handles:
            if handle != kept:
                driver.switch_to.window(handle)
                driver.close()
        driver.switch_to.window(kept)

    @staticmethod
    def _clear(driver: Any) -> None:
        driver.execute_cdp_cmd("Network.clearBrowserCookies", {})
        driver.execute_cdp_cmd("Network.clearBrowserCache", {})
        driver.set_window_size(*DESKTOP)

    def close(self) -> None:
        if self._driver is not None:
            driver, self._driver = self._driver, None
            quit_chromium(driver)


@pytest.fixture
def browser(chromium: Chromium) -> Browser:
    """Headless Chromium as new for this test (`chromium`: the process's one, tests/conftest.py)."""
    return Browser(chromium.fresh())

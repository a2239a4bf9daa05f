"""The dashboard in a real headless Chromium (tests/dashboard_harness.py): logging in with
the link `clawgate dashboard` prints, against a real gateway process."""

from __future__ import annotations

from pathlib import Path

from tests.dashboard_harness import Browser, DashboardGateway, browser, browser_driver
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser", "browser_driver"]


async def test_the_owner_logs_in_with_the_printed_link_and_walks_every_page(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        link = await gateway.login_link()
        await browser.get(link)
        await browser.find("nav a[href='/memory']")
        for name in ("memory", "sessions"):
            await browser.get(f"{gateway.url}{name}")
            await browser.find("main h1")
            await browser.screenshots(name)
        # The link was single-use: opened again, it is refused.
        await browser.get(link)
        await browser.wait_for_text("main", "used or expired")

"""The spend page in a real headless Chromium against a real gateway process: two weeks of
ledger, plus today's Telegram chat answered through the fake model, drawn as stacked bars;
the screenshot is the one the README shows (docs/spend-chart.png)."""

from __future__ import annotations

from pathlib import Path

from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.spend_helpers import PRICED, past_calls

__all__ = ["browser"]

OWNER = 1001
PRICES = f'[agent.prices."{PRICED}"]\ninput_per_mtok = 2.5\noutput_per_mtok = 10\n'


async def test_the_spend_chart_in_the_browser(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    await past_calls(tmp_path / "data", 13)
    gateway = DashboardGateway(
        tmp_path, telegram, fake_llm, chats=(OWNER,), extra=PRICES, agent={"model": PRICED}
    )
    async with gateway:
        fake_llm.script(text("Good morning."))
        telegram.user_says(OWNER, "morning")
        assert (await telegram.next_message(OWNER, timeout=60))["text"] == "Good morning."
        await browser.get(await gateway.login_link())
        await browser.get(f"{gateway.url}spend")
        today = await browser.find("#spend-chart rect[data-series='main · chat']:last-of-type")
        assert today.tag_name == "rect"
        bars = await browser.call(
            browser.driver.find_elements, "css selector", "#spend-chart svg.chart rect"
        )
        assert len(bars) == 13 * 3 + 1  # three series on each past day, today's chat
        legend = await browser.find("#spend-chart .legend")
        assert "main · heartbeat" in legend.text
        await browser.wait_for_text("#top-chats tbody tr:first-child", "telegram:1001")
        await browser.screenshots("spend")

"""The chat page in headless Chromium against a real `clawgate gateway` process: log in with
the token's one-time link, type a message, watch the reply stream in, open a tool card."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.dashboard_harness import Browser, DashboardGateway, browser, browser_driver
from tests.fakes.llm import FakeLLM, pause, text, tool_call
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser", "browser_driver"]  # fixtures used below

ANSWER = "The streamed answer arrives in several pieces."


async def _type(browser: Browser, message: str) -> None:
    from selenium.webdriver.common.keys import Keys

    field = await browser.find("#text")
    await browser.call(field.send_keys, message)
    await browser.call(field.send_keys, Keys.ENTER)


async def _text_of(browser: Browser, css: str) -> str:
    element = await browser.find(css)
    return str(await browser.call(lambda: element.text))


async def _count(browser: Browser, css: str) -> int:
    from selenium.webdriver.common.by import By

    found: list[Any] = await browser.call(browser.driver.find_elements, By.CSS_SELECTOR, css)
    return len(found)


async def test_the_reply_streams_into_the_page(
    tmp_path: Path, browser: Browser, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    release = asyncio.Event()
    # Held after "The streamed " until the test has seen that much on the page.
    fake_llm.script(pause(release, text(ANSWER), after=3))
    fake_llm.script(tool_call("list_dir", _id="call_l", path="."), text("That is the list."))
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        await browser.get(await gateway.login_link())
        await browser.find("#chat.connected")
        assert browser.current_url.rstrip("/").endswith("/chat")

        await _type(browser, "Tell me something")
        await browser.wait_for_text("#messages li.user .bubble", "Tell me something")
        await browser.wait_for_text("#messages li.live .bubble", "The streamed")
        partial = await _text_of(browser, "#messages li.live .bubble")
        assert partial.startswith("The streamed") and partial != ANSWER
        await browser.screenshots("chat-streaming")

        release.set()
        await browser.wait_for_text("#messages li.assistant:last-child .bubble", ANSWER)
        await browser.find("#chat:not(.busy)")
        assert await _count(browser, "#messages li.live") == 0

        await _type(browser, "what is here?")
        summary = await browser.find("#messages li.tool summary")
        await browser.wait_for_text("#messages li.assistant:last-child", "That is the list.")
        assert await _count(browser, "#messages li.tool.running") == 0
        await browser.call(summary.click)
        await browser.wait_for_text("#messages li.tool pre.result", "memory")
        await browser.screenshots("chat")

        # A reload shows the same conversation from the session transcript.
        await browser.get(gateway.url + "chat")
        await browser.wait_for_text("#messages", ANSWER)
        assert await _count(browser, "#messages li.tool details") == 1

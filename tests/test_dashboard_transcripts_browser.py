"""Issue 29: the dashboard's memory search with "also past conversations" switched on, in a
real headless Chromium against a real `clawgate gateway` process (tests/dashboard_harness.py):
a hit in a group's transcript names the conversation, the time and the speaker, with the
question's words highlighted; switched off, transcripts stay out."""

from __future__ import annotations

import json
from pathlib import Path

from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser"]

OWNER = 1001
GROUP = "telegram:-100700"


async def log_in(browser: Browser, gateway: DashboardGateway) -> None:
    await browser.get(await gateway.login_link())
    await browser.find("nav a[href='/memory']")


async def texts(browser: Browser, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    found = await browser.call(browser.driver.find_elements, By.CSS_SELECTOR, css)
    return [await browser.call(lambda e=element: str(e.text)) for element in found]


def write_group_transcript(workspace: Path) -> None:
    lines = [
        {"type": "session", "key": GROUP, "version": 1, "first_seq": 1},
        {"seq": 1, "role": "user", "content": "[Tom] long day at work",
         "timestamp": "2026-11-02T09:15:00.000Z"},
        {"seq": 2, "role": "user", "content": "[Maya] I switched dentists, Dr Haddad now",
         "timestamp": "2026-11-02T09:16:00.000Z"},
    ]  # fmt: skip
    sessions = workspace / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (sessions / "telegram_-100700.jsonl").write_text(text, encoding="utf-8")


async def test_memory_search_finds_what_was_said_in_a_group(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        write_group_transcript(gateway.workspace)
        await log_in(browser, gateway)
        await browser.get(f"{gateway.url}memory/search")
        box = await browser.find("input[name='q']")
        await browser.call(box.send_keys, "Maya dentist")
        await browser.call((await browser.find("#search-sessions")).click)
        await browser.call((await browser.find("form[role='search'] button")).click)
        await browser.wait_for_text("#transcript-results", "Dr Haddad")
        await browser.screenshots("memory-search-past-conversations")
        assert await texts(browser, "#transcript-results .conversation") == [GROUP]
        assert await texts(browser, "#transcript-results .speaker") == ["Maya"]
        assert await texts(browser, "#transcript-results .time") == ["2026-11-02 09:16"]
        assert [m.lower() for m in await texts(browser, "#transcript-results mark")] == ["dentist"]
        # Switched off (the default), the page searches memory files only.
        await browser.get(f"{gateway.url}memory/search?q=Maya+dentist")
        await browser.find("#search-results")
        assert await texts(browser, "#transcript-results") == []

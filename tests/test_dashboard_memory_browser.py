"""The memory pages' compare-and-swap writes in a real headless Chromium against a real
`clawgate gateway` process (tests/dashboard_harness.py), as the owner meets them:

- #35 item 7: an edit refused because MEMORY.md changed shows only what changed meanwhile,
  never the owner's own new line as "removed" (Chromium posts the hidden base with CRLF);
- #24 item 4: "Restore this version" clicked on a page opened before a consolidation added a
  fact is refused with what changed, and the fact stays;
- #24 "Also": the lines that consolidation removed are on the memory page, and one click
  puts them back at the end of MEMORY.md.

Screenshots of each state go to build/screenshots/ (or $TEST_SCREENSHOTS_DIR)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from clawgate.agent.memory.store import MemoryStore
from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM, gate, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.memory_helpers import is_consolidation

__all__ = ["browser"]

OWNER = 1001
MODEL_TIMEOUT = 90.0  # the gateway's first model call imports litellm, on a loaded machine

FACTS = (
    "# Facts\n\n"
    "- Ann lives in Porto\n"
    "- Ann's sister is Bea\n"
    "- Ann likes green tea\n"
    "- Ann's cat is Miso\n"
    "- Ann works at Acme\n"
)


async def log_in(browser: Browser, gateway: DashboardGateway) -> None:
    await browser.get(await gateway.login_link())
    await browser.find("nav a[href='/memory']")


async def confirm(browser: Browser) -> None:
    """Accept the page's "are you sure?" dialog (a form with data-confirm)."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    alert = await browser.call(
        WebDriverWait(browser.driver, 20).until, expected_conditions.alert_is_present()
    )
    await browser.call(alert.accept)


async def texts(browser: Browser, css: str) -> list[str]:
    from selenium.webdriver.common.by import By

    found = await browser.call(browser.driver.find_elements, By.CSS_SELECTOR, css)
    return [await browser.call(lambda e=element: str(e.text)) for element in found]


async def test_an_edit_conflict_shows_only_what_changed_meanwhile(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        memory = MemoryStore(gateway.workspace)
        memory.replace_memory("# Facts\n\n- Ann's boat leaves at nine\n")
        await log_in(browser, gateway)
        await browser.get(f"{gateway.url}memory/edit")
        editor = await browser.find("#memory-editor")
        # Another writer (a consolidation, here this process under the same lock) adds a fact.
        memory.replace_memory("# Facts\n\n- Ann's boat leaves at nine\n- Ann has a cat, Miso\n")
        await browser.call(editor.send_keys, "- Ann prefers window seats\n")
        await browser.call((await browser.find("#save-memory")).click)
        await browser.wait_for_text("#conflict", "Not saved")
        await browser.wait_for_text(".diff", "+- Ann has a cat, Miso")
        await browser.screenshots("memory-conflict-only-theirs")
        assert await texts(browser, ".diff .del") == []  # the owner's line is not "removed"
        assert await texts(browser, ".diff .add") == ["+- Ann has a cat, Miso"]
        shown = await browser.call((await browser.find("#memory-editor")).get_attribute, "value")
        assert "- Ann prefers window seats" in shown
        assert "window seats" not in memory.read_memory()


async def test_restore_is_refused_after_a_consolidation_and_its_removed_lines_come_back(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    release = asyncio.Event()
    update = FACTS.replace("- Ann likes green tea\n", "") + "- Ann plans a Rome trip in May\n"

    def model(request: dict[str, Any]) -> Any:
        if is_consolidation(request):
            answer = tool_call(
                "save_memory",
                history_entry="Ann planned a Rome trip for May.",
                memory_update=update,
                removed=["- Ann likes green tea"],
            )
            return gate(release, answer)
        return text("noted")

    fake_llm.handler = model
    agent = {"memory_window": 4}
    async with DashboardGateway(tmp_path, telegram, fake_llm, agent=agent) as gateway:
        memory = MemoryStore(gateway.workspace)
        memory.replace_memory("# Facts\n\n- Ann lives in Lisbon\n")
        memory.replace_memory(FACTS)
        await log_in(browser, gateway)
        # The owner opens the older version, meaning to restore it.
        old = memory.versions()[-1].name
        await browser.get(f"{gateway.url}memory/versions/{old}")
        restore = await browser.find("#restore")

        # Meanwhile a conversation is consolidated: a fact added, a line removed (listed).
        for said in ("I am planning Rome", "in May", "thanks"):
            telegram.user_says(OWNER, said)
            assert (await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT))["text"] == "noted"
        await wait_until(lambda: any(is_consolidation(r) for r in fake_llm.requests), 60)
        release.set()
        await wait_until(lambda: "Rome" in memory.read_memory(), MODEL_TIMEOUT)

        await browser.call(restore.click)
        await confirm(browser)
        await browser.wait_for_text("#conflict", "Not restored")
        await browser.wait_for_text(".diff", "+- Ann plans a Rome trip in May")
        await browser.screenshots("memory-restore-conflict")
        assert "Rome" in memory.read_memory() and "Lisbon" not in memory.read_memory()

        await browser.get(f"{gateway.url}memory")
        await browser.wait_for_text("#removals", "- Ann likes green tea")
        await browser.wait_for_text("#removals", f"telegram:{OWNER}")
        await browser.screenshots("memory-removed-lines")
        await browser.call((await browser.find("#removals .restore-removed")).click)
        await browser.wait_for_text("main .notice", "Lines restored")
        await browser.wait_for_text("#memory-text", "- Ann likes green tea")
        await browser.find("#no-removals")
        await browser.screenshots("memory-removed-lines-restored")
        assert memory.read_memory() == update + "- Ann likes green tea\n"

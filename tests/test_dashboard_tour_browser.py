"""Every page of the dashboard in headless Chromium against a real `clawgate gateway` process
with two agents: the agent switcher, the chat (the / menu above the composer, a Markdown
reply, Esc stopping a reply), sessions by name and a transcript, memory, the owner's files with a
preview, settings and a restart the page comes back from, the job form kept after an error, people, health, spend, dark mode.
Each page is checked with axe-core at phone and desktop width (no serious or critical
violation) and saved as screenshots (build/screenshots/, or $TEST_SCREENSHOTS_DIR); the
README's are copied from there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from selenium.webdriver.common.keys import Keys

from clawgate.agent.memory.store import MemoryStore
from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM, gate, text, tool_call
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser"]

OWNER = 1001
MODEL_TIMEOUT = 60.0
REPLY = "Here is your week:\n\n- **Monday**: the boat at nine\n- **Friday**: `dentist`\n"


def rect(browser: Browser, css: str) -> dict[str, float]:
    return dict(
        browser.driver.execute_script(
            "return document.querySelector(arguments[0]).getBoundingClientRect().toJSON()", css
        )
    )


async def test_every_page_reads_well_at_both_widths_and_passes_axe(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    violations: dict[str, Any] = {}

    async def audit(name: str) -> None:
        for width, found in (await browser.audit(f"tour-{name}")).items():
            if found:
                violations[f"{name} ({width})"] = found

    extra = '[agents.work]\nmodel = "openai/fake-model"\n'
    async with DashboardGateway(tmp_path, telegram, fake_llm, extra=extra) as gateway:
        (gateway.workspace / "todo.md").write_text("- milk\n", encoding="utf-8")
        fake_llm.script(tool_call("read_file", path="todo.md"), text("You need **milk**."))
        telegram.user_says(OWNER, "what is on my list?")
        await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT)
        MemoryStore(gateway.workspace).replace_memory(
            "# Facts\n\n- Ann's boat leaves at nine\n- Ann has a cat, Miso\n"
        )

        await browser.get(await gateway.login_link())
        await browser.find("#chat.connected")
        picker = await browser.find("#agent-picker")
        assert await browser.call(lambda: picker.get_attribute("value")) == "main"

        # The / menu opens above the composer; Esc closes it.
        field = await browser.find("#text")
        await browser.call(field.send_keys, "/")
        await browser.find("#commands.open")
        menu, box = (
            await browser.call(rect, browser, "#commands"),
            await browser.call(rect, browser, "#text"),
        )
        assert menu["bottom"] <= box["top"] + 1, (menu, box)
        await browser.screenshots("tour-chat-commands")
        await browser.call(field.send_keys, Keys.ESCAPE)
        await browser.find("#commands:not(.open)")

        fake_llm.script(text(REPLY))
        await browser.call(field.send_keys, "Plan my week", Keys.ENTER)
        await browser.wait_for_text("#messages li.assistant:last-child", "Monday")
        await audit("chat")

        # Dark mode follows the system.
        light = await browser.call(
            browser.driver.execute_script, "return getComputedStyle(document.body).backgroundColor"
        )
        await browser.call(
            browser.driver.execute_cdp_cmd,
            "Emulation.setEmulatedMedia",
            {"features": [{"name": "prefers-color-scheme", "value": "dark"}]},
        )
        dark = await browser.call(
            browser.driver.execute_script, "return getComputedStyle(document.body).backgroundColor"
        )
        assert light != dark
        await audit("chat-dark")
        await browser.call(
            browser.driver.execute_cdp_cmd, "Emulation.setEmulatedMedia", {"features": []}
        )

        # Esc stops the reply being written.
        fake_llm.script(gate(asyncio.Event(), text("never sent")))
        await browser.call(field.send_keys, "take your time", Keys.ENTER)
        await browser.find("#chat.busy")
        await browser.call(field.send_keys, Keys.ESCAPE)
        await browser.wait_for_text("#messages li.assistant:last-child", "Stopped.")

        await browser.get(f"{gateway.url}sessions")
        await browser.wait_for_text("#sessions", "web chat")
        await audit("sessions")
        await browser.get(f"{gateway.url}sessions/view?key=telegram%3A{OWNER}")
        await browser.wait_for_text("#transcript", "You need milk.")
        await browser.call((await browser.find("#transcript .tool-card summary")).click)
        await browser.wait_for_text("#transcript .tool-card", "- milk")
        await audit("transcript")

        await browser.get(f"{gateway.url}memory")
        await browser.wait_for_text("#memory-text", "Miso")
        await audit("memory")

        await browser.get(f"{gateway.url}files/edit?file=SOUL.md")
        editor = await browser.find("#memory-editor")
        await browser.call(editor.clear)
        await browser.call(editor.send_keys, "# Soul\n\nBe **brief** and kind.\n")
        await browser.call((await browser.find("#preview-file")).click)
        await browser.wait_for_text("#preview strong", "brief")
        await audit("files-preview")
        await browser.call((await browser.find("#save-memory")).click)
        await browser.wait_for_text("#file-text strong", "brief")
        await audit("files")

        await browser.get(f"{gateway.url}settings")
        await browser.wait_for_text("#effective", "agent.model")
        await audit("settings")
        # A change saved, then the gateway restarted from the page, which comes back by
        # itself, logged in, with the new value in effect.
        limit = await browser.find("input[name='agent.max_tool_iterations']")
        await browser.call(limit.clear)
        await browser.call(limit.send_keys, "25")
        await browser.call((await browser.find("#save-settings")).click)
        await browser.find("#saved")
        # The waiting page leaves once a new run answers its poll, which can be within a
        # second: the poll is held until the page has been looked at.
        cdp = browser.driver.execute_cdp_cmd
        await browser.call(cdp, "Network.enable", {})
        await browser.call(cdp, "Network.setBlockedURLs", {"urls": ["*/restart/alive"]})
        try:
            await browser.call((await browser.find("#restart")).click)
            await browser.find("#restarting")
            await audit("restarting")
            await gateway.process.wait_for_log("restarting with the config file", timeout=30)
        finally:
            await browser.call(cdp, "Network.setBlockedURLs", {"urls": []})
        await browser.find("#settings-form", timeout=60)
        assert browser.current_url.endswith("/settings")
        source = await browser.call(lambda: browser.driver.page_source)
        row = '<code>agent.max_tool_iterations</code></td><td data-label="Value">25</td>'
        assert row in source

        await browser.get(f"{gateway.url}jobs")
        form = await browser.find("#add-job")
        await browser.call(form.find_element("name", "name").send_keys, "walk")
        await browser.call(form.find_element("name", "message").send_keys, "Go for a walk")
        await browser.call(form.find_element("name", "schedule").send_keys, "not a schedule")
        await browser.call(form.find_element("name", "add").click)
        await browser.find("main .error")
        kept = await browser.find("#add-job input[name='name']")
        assert await browser.call(lambda: kept.get_attribute("value")) == "walk"
        await audit("jobs")

        for page in ("people", "health", "spend"):
            await browser.get(f"{gateway.url}{page}")
            await browser.find("main h1")
            await audit(page)

        # The switcher scopes the pages to the other agent.
        await browser.get(f"{gateway.url}memory")
        picker = await browser.find("#agent-picker")
        await browser.call(lambda: picker.send_keys("work"))
        await browser.wait_for_text("#agent-picker option[selected]", "work")
        assert "Miso" not in await browser.call(lambda: browser.driver.page_source)
        await audit("memory-work")

    assert not violations, "\n".join(
        f"{page}: {v['impact']} {v['id']} ({v['help']}) at {v.get('nodes')}"
        for page, found in violations.items()
        for v in found
    )

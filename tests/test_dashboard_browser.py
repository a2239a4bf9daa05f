"""The dashboard in a real headless Chromium (tests/dashboard_harness.py), against a real
`clawgate gateway` process with the fake model and fake Telegram: log in with the link
`clawgate dashboard` prints, read and edit MEMORY.md, see an edit refused when the file
changed underneath, walk the memory and sessions pages. Every page is saved as a screenshot
at desktop and phone width (build/screenshots/, or $TEST_SCREENSHOTS_DIR)."""

from __future__ import annotations

from pathlib import Path

from clawgate.agent.memory.store import MemoryStore
from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser"]

OWNER = 1001
MODEL_TIMEOUT = 60.0  # the gateway's first model call may wait on litellm's import


async def test_the_owner_logs_in_edits_memory_meets_a_conflict_and_reads_sessions(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        # A conversation to look at: a tool call and a reply delivered to Telegram.
        (gateway.workspace / "todo.md").write_text("- milk\n", encoding="utf-8")
        fake_llm.script(tool_call("read_file", path="todo.md"), text("You need milk."))
        telegram.user_says(OWNER, "what is on my list?")
        reply = await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT)
        assert reply["text"] == "You need milk."

        await browser.get(f"{gateway.url}memory")
        await browser.find("form[action='/login'] input[name='token']")
        await browser.screenshots("login")

        link = await gateway.login_link()
        await browser.get(link)
        await browser.find("nav a[href='/memory']")
        assert "code=" not in browser.current_url

        # Edit MEMORY.md and save.
        await browser.get(f"{gateway.url}memory/edit")
        editor = await browser.find("#memory-editor")
        await browser.call(editor.clear)
        await browser.call(editor.send_keys, "# Facts\n\n- Ann's boat leaves at nine\n")
        await browser.screenshots("memory-edit")
        await browser.call((await browser.find("#save-memory")).click)
        await browser.wait_for_text("#memory-text", "Ann's boat leaves at nine")
        await browser.screenshots("memory")
        memory = MemoryStore(gateway.workspace)
        assert memory.read_memory() == "# Facts\n\n- Ann's boat leaves at nine\n"

        # Open the editor, then another writer (here: this process, through the same lock
        # file) changes the file before the owner saves.
        await browser.get(f"{gateway.url}memory/edit")
        editor = await browser.find("#memory-editor")
        memory.replace_memory("# Facts\n\n- Ann's boat leaves at nine\n- Ann has a cat, Miso\n")
        await browser.call(editor.send_keys, "- Ann prefers window seats\n")
        await browser.call((await browser.find("#save-memory")).click)
        await browser.wait_for_text("#conflict", "Not saved")
        await browser.wait_for_text(".diff", "+- Ann has a cat, Miso")
        await browser.screenshots("memory-conflict")
        assert "window seats" not in memory.read_memory()
        assert "Miso" in memory.read_memory()

        await browser.get(f"{gateway.url}memory/versions")
        await browser.find("table a[href^='/memory/versions/MEMORY.']")
        await browser.screenshots("memory-versions")
        await browser.call((await browser.find("table a[href^='/memory/versions/']")).click)
        await browser.find("#restore")
        await browser.screenshots("memory-version")

        await browser.get(f"{gateway.url}memory/search?q=boat+nine")
        await browser.wait_for_text("#search-results", "keyword")
        await browser.screenshots("memory-search")
        for name in ("history", "daily", "audit"):
            await browser.get(f"{gateway.url}memory/{name}")
            await browser.find("main h1")
            await browser.screenshots(f"memory-{name}")

        await browser.get(f"{gateway.url}sessions")
        await browser.wait_for_text("#sessions", f"telegram:{OWNER}")
        await browser.screenshots("sessions")
        await browser.call((await browser.find(f"#sessions a[href*='telegram%3A{OWNER}']")).click)
        await browser.wait_for_text("#transcript", "You need milk.")
        await browser.wait_for_text("#transcript", "read_file")
        await browser.wait_for_text("#transcript .badge", "sent")
        await browser.screenshots("transcript")
        await browser.get(f"{gateway.url}sessions/archive")
        await browser.find("main h1")
        await browser.screenshots("sessions-archive")

        # The login link was single-use.
        await browser.call(browser.driver.delete_all_cookies)
        await browser.get(link)
        await browser.wait_for_text("main", "used or expired")

"""Issue 30's flows in headless Chromium against a real `clawgate gateway` process, each run
at phone width (390x844) with the parts whose layout changes checked at desktop width too:
the sessions list's "new" and "replying" markers, an owner file's refused stale edit and the
version kept, the agent switcher driving the web chat, the header's badge for a pending exec
approval, and that card redrawn and answerable in a reloaded chat. Screenshots are saved as
`flows-*` (tests/dashboard_harness.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from selenium.webdriver.common.keys import Keys

from tests.dashboard_harness import (
    DESKTOP,
    PHONE,
    Browser,
    DashboardGateway,
    browser,
)
from tests.fakes.llm import FakeLLM, Reply, gate, text, tool_call
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser"]

OWNER = 1001
SESSION = f"telegram:{OWNER}"
MODEL_TIMEOUT = 60.0

# The markers of the sessions list's row for a key, and whether each one is on screen: shown,
# and inside the window's width (at phone width the table is laid out as cards).
ROW_MARKERS = """
const key = arguments[0];
const row = Array.from(document.querySelectorAll("#sessions tbody tr"))
  .find(function (tr) { return tr.querySelector("code").textContent === key; });
if (!row) { return null; }
function shown(css) {
  const badge = row.querySelector(css);
  if (!badge) { return null; }
  const box = badge.getBoundingClientRect();
  return {text: badge.textContent, visible: box.width > 0 && box.height > 0 &&
          box.left >= 0 && box.right <= document.documentElement.clientWidth};
}
return {unread: shown(".badge.unread"), active: shown(".badge.active")};
"""

# Whether an element is on screen within the window's width (not cut off or pushed aside).
ON_SCREEN = """
const box = document.querySelector(arguments[0]).getBoundingClientRect();
return box.width > 0 && box.height > 0 && box.left >= 0 &&
       box.right <= document.documentElement.clientWidth;
"""


async def at(browser: Browser, size: tuple[int, int]) -> None:
    await browser.call(browser.driver.set_window_size, *size)


async def log_in_at_phone_width(browser: Browser, gateway: DashboardGateway) -> None:
    await at(browser, PHONE)
    await browser.get(await gateway.login_link())
    await browser.find("nav a[href='/memory']")


async def markers(browser: Browser, key: str) -> dict[str, Any]:
    found = await browser.call(browser.driver.execute_script, ROW_MARKERS, key)
    assert found is not None, f"no row for {key} on {browser.current_url}"
    return dict(found)


async def on_screen(browser: Browser, css: str) -> bool:
    await browser.find(css)
    return bool(await browser.call(browser.driver.execute_script, ON_SCREEN, css))


async def value_of(browser: Browser, css: str) -> str:
    element = await browser.find(css)
    return str(await browser.call(element.get_attribute, "value"))


async def click(browser: Browser, css: str) -> None:
    await browser.call((await browser.find(css)).click)


async def submit(browser: Browser, css: str) -> None:
    """Click a link or a form's button and wait until the page it leads to has replaced this
    one (an element found before then may belong to the page going away)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    page = await browser.find("html")
    await click(browser, css)

    def gone(_driver: object) -> bool:
        # Mid-navigation Chrome may answer "node does not belong to the document" instead of
        # "stale element": both say the old page has been replaced.
        try:
            page.is_enabled()
        except WebDriverException:
            return True
        return False

    await browser.call(WebDriverWait(browser.driver, 20).until, gone)


async def test_the_sessions_list_marks_unread_and_replying_sessions(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        fake_llm.script(text("Hello, Ann."))
        telegram.user_says(OWNER, "hi")
        await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT)
        await log_in_at_phone_width(browser, gateway)

        await browser.get(f"{gateway.url}sessions")
        found = await markers(browser, SESSION)
        assert found["unread"] == {"text": "new", "visible": True} and found["active"] is None

        # A turn held by the model: the session is replying, and still unread.
        release = asyncio.Event()
        fake_llm.script(gate(release, text("Done, slowly.")))
        telegram.user_says(OWNER, "take your time")
        await fake_llm.wait_for_requests(2, timeout=MODEL_TIMEOUT)
        await browser.get(f"{gateway.url}sessions")
        found = await markers(browser, SESSION)
        assert found["active"] == {"text": "replying", "visible": True}
        assert found["unread"] == {"text": "new", "visible": True}
        await browser.screenshots("flows-sessions-replying")
        await at(browser, DESKTOP)
        found = await markers(browser, SESSION)
        assert found["active"]["visible"] and found["unread"]["visible"]

        # Read on the phone: no longer new, though still replying.
        await at(browser, PHONE)
        await submit(browser, f"#sessions a[href='/sessions/view?key=telegram%3A{OWNER}']")
        await browser.wait_for_text("#transcript", "take your time")
        await browser.get(f"{gateway.url}sessions")
        found = await markers(browser, SESSION)
        assert found["unread"] is None and found["active"] is not None

        # The reply lands: new again, and no longer replying.
        release.set()
        assert (await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT))["text"] == (
            "Done, slowly."
        )
        await browser.get(f"{gateway.url}sessions")
        found = await markers(browser, SESSION)
        assert found["unread"] == {"text": "new", "visible": True} and found["active"] is None
        await browser.screenshots("flows-sessions-unread")


async def test_a_stale_edit_of_soul_md_is_refused_and_the_old_text_kept(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        soul = gateway.workspace / "SOUL.md"
        soul.write_text("# Soul\n\nBe kind.\n", encoding="utf-8")
        await log_in_at_phone_width(browser, gateway)
        edit = f"{gateway.url}files/edit?file=SOUL.md"
        await browser.get(edit)
        stale = await browser.call(lambda: browser.driver.current_window_handle)
        await browser.find("#memory-editor")

        # A second tab opens the same file and saves first.
        await browser.call(browser.driver.switch_to.new_window, "tab")
        await browser.get(edit)
        await browser.call((await browser.find("#memory-editor")).send_keys, "Be brief.\n")
        await submit(browser, "#save-memory")
        await browser.wait_for_text("main .notice", "Saved.")
        await browser.call(browser.driver.close)
        await browser.call(browser.driver.switch_to.window, stale)

        # The first tab's edit is based on the text before that save: refused, shown as a
        # conflict with what changed meanwhile, the owner's text still in the editor.
        await browser.call((await browser.find("#memory-editor")).send_keys, "Sail on Sundays.\n")
        await submit(browser, "#save-memory")
        await browser.wait_for_text("#conflict", "Not saved: SOUL.md changed after you opened it")
        await browser.wait_for_text(".diff", "+Be brief.")
        assert "Sail on Sundays." in await value_of(browser, "#memory-editor")
        assert await on_screen(browser, "#conflict")
        await browser.screenshots("flows-files-conflict")
        await at(browser, PHONE)
        assert soul.read_text(encoding="utf-8") == "# Soul\n\nBe kind.\nBe brief.\n"

        # Merged by hand and saved from the refusal's form: it lands, each replaced text kept.
        editor = await browser.find("#memory-editor")
        await browser.call(editor.clear)
        await browser.call(editor.send_keys, "# Soul\n\nBe kind.\nBe brief.\nSail on Sundays.\n")
        await submit(browser, "#save-memory")
        await browser.wait_for_text("main .notice", "Saved.")
        await browser.wait_for_text("#file-text", "Sail on Sundays.")
        assert soul.read_text(encoding="utf-8") == (
            "# Soul\n\nBe kind.\nBe brief.\nSail on Sundays.\n"
        )
        kept = sorted(
            (gateway.workspace / ".versions").glob("SOUL.*.md"), key=lambda p: p.stat().st_mtime
        )
        assert [p.read_text(encoding="utf-8") for p in kept] == [
            "# Soul\n\nBe kind.\n",
            "# Soul\n\nBe kind.\nBe brief.\n",
        ]
        await browser.wait_for_text("#versions", kept[0].name)
        await browser.wait_for_text("#versions", kept[1].name)
        await browser.screenshots("flows-files-saved")


def answer_with_the_model(request: dict[str, Any]) -> Reply:
    """The fake model's reply names the model the request was for."""
    return text(f"Answered by {request['model']}.")


async def test_the_agent_switcher_drives_the_web_chat(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    fake_llm.handler = answer_with_the_model
    extra = '[agents.work]\nmodel = "openai/work-model"\n'
    async with DashboardGateway(tmp_path, telegram, fake_llm, extra=extra) as gateway:
        work = gateway.data_dir / "agents" / "work" / "workspace"
        (gateway.workspace / "SOUL.md").write_text("You are Tern, at home.\n", encoding="utf-8")
        (work / "SOUL.md").write_text("You are Quill, at work.\n", encoding="utf-8")
        await log_in_at_phone_width(browser, gateway)
        await browser.find("#chat.connected")
        assert await value_of(browser, "#agent-picker") == "main"
        assert await on_screen(browser, "#agent-picker")

        field = await browser.find("#text")
        await browser.call(field.send_keys, "who is there?", Keys.ENTER)
        await browser.wait_for_text("#messages li.assistant:last-child", "Answered by fake-model.")
        assert "Tern" in (fake_llm.last_system_prompt() or "")

        # Switched on the phone, the chat is the other agent's: its own (empty) conversation,
        # and a message goes to its model with its workspace's files.
        await browser.call((await browser.find("#agent-picker")).send_keys, "work")
        await browser.wait_for_text("#agent-picker option[selected]", "work")
        await browser.find("#chat.connected")
        assert browser.current_url.endswith("/chat")
        assert "fake-model" not in await browser.call(lambda: browser.driver.page_source)
        field = await browser.find("#text")
        await browser.call(field.send_keys, "who is there?", Keys.ENTER)
        await browser.wait_for_text("#messages li.assistant:last-child", "Answered by work-model.")
        prompt = fake_llm.last_system_prompt() or ""
        assert "Quill" in prompt and "Tern" not in prompt
        await browser.screenshots("flows-chat-work-agent")
        assert "work-model" in (work / "sessions" / "web_owner.jsonl").read_text("utf-8")
        assert "work-model" not in (gateway.workspace / "sessions" / "web_owner.jsonl").read_text(
            "utf-8"
        )

        # Back to the default agent: its conversation again, not the other's.
        await at(browser, PHONE)
        await browser.call((await browser.find("#agent-picker")).send_keys, "main")
        await browser.wait_for_text("#agent-picker option[selected]", "main")
        await browser.wait_for_text("#messages", "Answered by fake-model.")
        assert "work-model" not in await browser.call(lambda: browser.driver.page_source)


async def test_a_pending_exec_approval_shows_a_badge_leading_to_it(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    fake_llm.script(tool_call("exec", command="touch from-web.txt"), text("Made it."))
    extra = '[tools]\nexec_approval = "risky"\n'
    async with DashboardGateway(tmp_path, telegram, fake_llm, extra=extra) as gateway:
        await log_in_at_phone_width(browser, gateway)
        await browser.find("#chat.connected")
        field = await browser.find("#text")
        await browser.call(field.send_keys, "make the file", Keys.ENTER)
        await browser.wait_for_text("#messages li.approval", "touch from-web.txt")

        # Any page drawn now carries the badge, on screen at both widths.
        await browser.get(f"{gateway.url}memory")
        await browser.wait_for_text("#pending-badge", "1 waiting")
        assert await on_screen(browser, "#pending-badge")
        await browser.screenshots("flows-approval-badge")
        assert await on_screen(browser, "#pending-badge")
        await at(browser, PHONE)

        await submit(browser, "#pending-badge")
        await browser.wait_for_text("main table", "touch from-web.txt")
        assert browser.current_url.endswith("/approvals")
        await browser.screenshots("flows-approvals")
        await at(browser, PHONE)
        assert await on_screen(browser, "main form[action='/approvals/answer'] button")
        await submit(browser, "main form[action='/approvals/answer'] button")
        await browser.wait_for_text("main", "Nothing is waiting for you.")
        assert (
            await browser.call(
                lambda: browser.driver.find_elements("css selector", "#pending-badge")
            )
            == []
        )
        await browser.get(f"{gateway.url}chat")
        await browser.wait_for_text("#messages li.assistant:last-child", "Made it.")
    assert (gateway.workspace / "from-web.txt").exists()


async def test_a_reloaded_chat_shows_the_approval_card_still_waiting(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    fake_llm.script(tool_call("exec", command="touch after-reload.txt"), text("Made it."))
    extra = '[tools]\nexec_approval = "risky"\n'
    async with DashboardGateway(tmp_path, telegram, fake_llm, extra=extra) as gateway:
        await log_in_at_phone_width(browser, gateway)
        await browser.find("#chat.connected")
        field = await browser.find("#text")
        await browser.call(field.send_keys, "make the file", Keys.ENTER)
        await browser.wait_for_text("#messages li.approval", "touch after-reload.txt")

        # Drawn again from the server: the question the turn still waits on is there, with
        # its buttons, last in the conversation.
        await browser.get(f"{gateway.url}chat")
        await browser.find("#chat.connected")
        await browser.wait_for_text("#messages li.approval:last-child", "touch after-reload.txt")
        assert await on_screen(browser, "#messages li.approval button")
        await browser.screenshots("flows-chat-approval-reloaded")
        await at(browser, PHONE)

        # Answered on the phone from the redrawn card: the command runs and the turn ends.
        await click(browser, "#messages li.approval button")
        await browser.wait_for_text("#messages li.approval", "Allow once: touch after-reload.txt")
        assert browser.current_url.endswith("/chat")
        await browser.wait_for_text("#messages li.assistant:last-child", "Made it.")
        await browser.get(f"{gateway.url}chat")
        await browser.wait_for_text("#messages li.assistant:last-child", "Made it.")
        assert (
            await browser.call(
                lambda: browser.driver.find_elements("css selector", "#messages li.approval")
            )
            == []
        )
    assert (gateway.workspace / "after-reload.txt").exists()

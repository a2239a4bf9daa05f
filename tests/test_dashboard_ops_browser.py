"""The people, jobs and health pages in a real headless Chromium against a real gateway
process on the fake Telegram (tests/dashboard_harness.py): approving a stranger in the
browser lets them chat at once, "Run now" runs a cron job whose reply reaches the chat."""

from __future__ import annotations

import json
from pathlib import Path

from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram

__all__ = ["browser"]

OWNER = 1001
STRANGER = 4242
JOB = {
    "id": "tea",
    "name": "tea",
    "schedule": {"cron": "0 16 * * *"},
    "message": "Remind me to drink tea",
    "deliver_to": f"telegram:{OWNER}",
}


def write_job(workspace: Path) -> None:
    folder = workspace / "cron"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "jobs.json").write_text(json.dumps({"version": 1, "jobs": [JOB]}), encoding="utf-8")


async def click(browser: Browser, css: str) -> None:
    button = await browser.find(css)
    await browser.call(button.click)


async def test_approving_a_stranger_in_the_browser_lets_them_chat(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        telegram.user_says(STRANGER, "hello", username="newcomer")
        refusal = (await telegram.next_message(STRANGER, timeout=30))["text"]
        assert "Pairing code:" in refusal
        await browser.get(await gateway.login_link())
        await browser.get(f"{gateway.url}people")
        await browser.find("#pending tr[data-code]")
        await browser.screenshots("people")
        await click(browser, "#pending button[name='approve-allowed']")
        await browser.wait_for_text(".notice", f"approved telegram user {STRANGER} (@newcomer)")
        await browser.find(f"#approved tr[data-user='telegram:{STRANGER}']")
        welcome = (await telegram.next_message(STRANGER, timeout=30))["text"]
        assert welcome.endswith("Send your message again.")

        fake_llm.script(text("Welcome aboard."))
        telegram.user_says(STRANGER, "hello again", username="newcomer")
        answer = await telegram.next_message(STRANGER, timeout=60)
    assert answer["text"] == "Welcome aboard."
    assert "(trust: allowed)" in (fake_llm.last_system_prompt() or "")


async def test_run_now_in_the_browser_delivers_the_jobs_reply(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    write_job(tmp_path / "workspace")
    async with DashboardGateway(tmp_path, telegram, fake_llm, chats=(OWNER,)) as gateway:
        await browser.get(await gateway.login_link())
        await browser.get(f"{gateway.url}jobs")
        await browser.find("#jobs tr[data-job='tea']")
        await browser.screenshots("jobs")
        fake_llm.script(text("Time for tea."))
        await click(browser, "#jobs tr[data-job='tea'] button[name='run']")
        await browser.wait_for_text(".notice", "ran tea: Time for tea.", timeout=60)
        delivered = await telegram.next_message(OWNER, timeout=30)
        await browser.wait_for_text("#jobs tr[data-job='tea']", "ok")

        await browser.get(f"{gateway.url}health/doctor")
        # The config file the gateway was started with (`--config`), not the default one.
        await browser.wait_for_text("#doctor", f"config loads: {gateway.config_path}")
        await browser.wait_for_text("#log", "dashboard listening on")
        await browser.wait_for_text("#channels", "running")
        await browser.screenshots("health")
    assert delivered["text"].endswith("Time for tea.")
    state = json.loads((tmp_path / "workspace" / "cron" / "state.json").read_text("utf-8"))
    assert state["jobs"]["tea"]["runs"] == 1
    assert state["jobs"]["tea"]["last_status"] == "ok"

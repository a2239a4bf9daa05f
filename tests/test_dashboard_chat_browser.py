"""The chat page in headless Chromium against a real `clawgate gateway` process: log in with
the token's one-time link, type a message, watch the reply stream in, open a tool card."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from selenium.webdriver.common.keys import Keys

from tests.dashboard_harness import Browser, DashboardGateway, browser
from tests.fakes.llm import FakeLLM, gate, pause, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.memory_helpers import save

__all__ = ["browser"]  # fixtures used below

ANSWER = "The streamed answer arrives in several pieces."


async def _type(browser: Browser, message: str) -> None:
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
    # Held until /stop; then the consolidation of the transcript /new archives.
    fake_llm.script(gate(asyncio.Event(), text("never sent")), save("The owner tried the chat."))
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
        await browser.find("#chat.connected")

        # Stop cancels a turn the model holds.
        await _type(browser, "take your time")
        await fake_llm.wait_for_requests(4)
        await browser.find("#chat.busy")
        await browser.call((await browser.find("#stop")).click)
        await browser.wait_for_text("#messages li.assistant:last-child", "Stopped.")

        # Slash commands complete with Tab; /new starts the page over.
        field = await browser.find("#text")
        await browser.call(field.send_keys, "/ne")
        await browser.wait_for_text("#commands.open", "/new")
        await browser.call(field.send_keys, Keys.TAB)
        assert await browser.call(field.get_attribute, "value") == "/new "
        await browser.call(field.send_keys, Keys.ENTER)
        await browser.wait_for_text("#messages", "New session started.")
        assert await _count(browser, "#messages li") == 1


MARKDOWN_REPLY = """## Your plan

**Bold** and *quiet* words, a [safe link](https://example.org/doc) and a
[trap](javascript:alert(1)) and <img src=x onerror="document.title='owned'"> raw HTML.

- first
- second

```python
print("<b>not bold</b>")
```

| day | task |
|-----|------|
| Mon | tea  |
"""


async def _html_of(browser: Browser, css: str) -> str:
    element = await browser.find(css)
    return str(await browser.call(element.get_attribute, "innerHTML"))


async def test_a_reply_in_markdown_is_rendered_live_and_after_a_reload(
    tmp_path: Path, browser: Browser, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    # Issue 35 item 8: the chat showed `##`, `**`, fences and table pipes as typed.
    fake_llm.script(text(MARKDOWN_REPLY))
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        await browser.get(await gateway.login_link())
        await browser.find("#chat.connected")
        await _type(browser, "plan my week")
        last = "#messages li.assistant:last-child .bubble"
        for shown in ("live", "after a reload"):
            if shown == "after a reload":
                await browser.get(gateway.url + "chat")
            await browser.find(f"{last} table")
            assert await _text_of(browser, f"{last} h2") == "Your plan"
            assert await _text_of(browser, f"{last} strong") == "Bold"
            assert await _text_of(browser, f"{last} em") == "quiet"
            assert await _count(browser, f"{last} ul > li") == 2
            assert await _text_of(browser, f"{last} pre code") == 'print("<b>not bold</b>")'
            assert await _text_of(browser, f"{last} td") == "Mon"
            link = await browser.find(f"{last} a")
            assert await browser.call(link.get_attribute, "href") == "https://example.org/doc"
            assert await _count(browser, f"{last} a") == 1, "the javascript: link is no link"
            assert await _count(browser, f"{last} img, {last} script") == 0
            html = await _html_of(browser, last)
            assert "**" not in html and "##" not in html and "```" not in html
            assert await browser.call(lambda: browser.driver.title) != "owned"
        await browser.screenshots("chat-markdown")


# Put before a page's own scripts: its EventSource opens only when the test calls
# window.openHeldStreams(), so the test decides what happens between drawing and opening.
HOLD_STREAMS = """
(function () {
  const Real = window.EventSource;
  const held = [];
  window.openHeldStreams = function () { held.splice(0).forEach(function (open) { open(); }); };
  window.EventSource = function (url, options) {
    const self = this;
    self.close = function () {};
    held.push(function () {
      const real = new Real(url, options);
      real.onopen = function (event) { if (self.onopen) { self.onopen(event); } };
      real.onerror = function (event) { if (self.onerror) { self.onerror(event); } };
      real.onmessage = function (event) { if (self.onmessage) { self.onmessage(event); } };
      self.close = function () { real.close(); };
    });
  };
})();
"""


async def test_a_reply_made_before_the_page_s_stream_opened_is_shown(
    tmp_path: Path, browser: Browser, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    # The page drew the transcript, then opened its event stream: a reply recorded between
    # the two was never shown until a reload (the approval flow's browser test met it under
    # load).
    fake_llm.script(text("Made while the page had no stream."))
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        await browser.get(await gateway.login_link())
        await browser.find("#chat.connected")
        cdp = browser.driver.execute_cdp_cmd
        added = await browser.call(
            cdp, "Page.addScriptToEvaluateOnNewDocument", {"source": HOLD_STREAMS}
        )
        try:
            await browser.get(gateway.url + "chat")
        finally:
            await browser.call(cdp, "Page.removeScriptToEvaluateOnNewDocument", added)
        await _type(browser, "hello")  # sent by a POST: the page needs no stream for that
        transcript = gateway.workspace / "sessions" / "web_owner.jsonl"
        await wait_until(
            lambda: transcript.exists() and "Made while the page" in transcript.read_text("utf-8")
        )
        assert await _count(browser, "#chat.connected") == 0
        await browser.call(browser.driver.execute_script, "window.openHeldStreams();")
        await browser.find("#chat.connected")
        await browser.wait_for_text(
            "#messages li.assistant:last-child .bubble", "Made while the page had no stream."
        )

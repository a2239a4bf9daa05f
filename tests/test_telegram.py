"""Telegram end to end: the real python-telegram-bot against FakeTelegram, the real gateway,
FakeLLM behind litellm. Plus self-tests of the fake's rules, driven by PTB's Bot."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, ReplyParameters
from telegram.error import BadRequest, Conflict, RetryAfter

from clawgate.channels.pairing import PairingStore
from clawgate.channels.telegram import create_channel
from clawgate.channels.telegram.journal import InboundJournal
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config
from clawgate.kernel.errors import ChannelError
from tests.fakes.llm import FakeLLM, gate, text, tool_call
from tests.fakes.telegram import BOT_USERNAME, TOKEN, FakeTelegram, utf16_len
from tests.harness import make_config, wait_until
from tests.telegram_world import (
    GROUP,
    MENTION,
    OWNER,
    Sleeps,
    TelegramGateway,
    telegram_config,
    telegram_gateway_config,
)

# PTB's own RetryAfter constructor trips its v22.2 deprecation of the int retry_after.
pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram) -> Config:
    return telegram_gateway_config(tmp_path, agent_config, telegram)


def last_user_content(llm: FakeLLM) -> str:
    users = [m for m in llm.last_messages() if m["role"] == "user"]
    content = users[-1]["content"]
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content)
    return content


async def processed(fake: FakeTelegram, update_id: int) -> None:
    """The channel confirmed the update: it has been read and decided on."""
    await wait_until(lambda: fake.confirmed_offset > update_id, timeout=10)


# -- private chats and access ---------------------------------------------------------------


async def test_owner_gets_the_model_reply_as_html(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hello **Ann**, see `x < y`"))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "hi there")
        reply = await telegram.next_message(OWNER)
    assert reply["text"] == "Hello Ann, see x < y"
    assert reply["parse_mode"] == "HTML"
    assert "<b>Ann</b>" in reply["raw"]
    assert reply["reply_to_message_id"] is None  # private chats get no quote
    assert last_user_content(fake_llm) == "hi there"
    assert "(trust: owner)" in (fake_llm.last_system_prompt() or "")
    assert {"chat_id": OWNER, "action": "typing", "message_thread_id": None} in telegram.actions
    assert [c["command"] for c in telegram.commands] == [
        "new",
        "stop",
        "help",
        "status",
        "model",
        "usage",
    ]
    session = config.workspace / "sessions" / f"telegram_{OWNER}.jsonl"
    records = [json.loads(line) for line in session.read_text().splitlines()]
    assert any(r.get("type") == "delivery" and r.get("status") == "sent" for r in records)


async def test_unknown_sender_gets_a_pairing_code_then_is_answered_once_approved(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    async with TelegramGateway(config):
        telegram.user_says(2002, "hello", username="eve")
        pairing = await telegram.next_message(2002)
        code = re.search(r"Pairing code: (\w{8})", pairing["text"])
        assert code is not None
        again = telegram.user_says(2002, "hello?", username="eve")
        await processed(telegram, again)
        assert fake_llm.requests == []
        assert len(telegram.messages_to(2002)) == 1  # one pairing reply, not one per message

        PairingStore(config.data_dir / "pairing.json").approve(code.group(1))
        fake_llm.script(text("Welcome, Eve."))
        telegram.user_says(2002, "may I come in?", username="eve")
        reply = await telegram.next_message(2002)
    assert reply["text"] == "Welcome, Eve."
    assert len(fake_llm.requests) == 1
    assert "(trust: allowed)" in (fake_llm.last_system_prompt() or "")


# -- groups ---------------------------------------------------------------------------------


async def test_group_chatter_without_mention_never_reaches_the_model(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    async with TelegramGateway(config):
        telegram.user_says(GROUP, "lunch anyone?", user_id=3003, chat_type="supergroup")
        telegram.user_says(GROUP, "/help@some_other_bot", user_id=3003, chat_type="supergroup")
        # A group not in group_allow is ignored even when it mentions the bot.
        last = telegram.user_says(-100777, f"{MENTION} hi", user_id=3003, chat_type="supergroup")
        telegram.channel_post(-100888, f"{MENTION} news")
        await processed(telegram, last + 1)
    assert fake_llm.requests == []
    assert telegram.sent == []


async def test_group_mention_is_answered_with_the_speaker_named(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hi Bob."), text("Sure."), text("Commands..."))
    async with TelegramGateway(config):
        telegram.user_says(
            GROUP,
            f"{MENTION} what's up?",
            user_id=3003,
            first_name="Bob",
            last_name="Smith",
            chat_type="supergroup",
        )
        first = await telegram.next_message(GROUP)
        assert first["text"] == "Hi Bob."
        assert first["reply_to_message_id"] == 1  # quotes whom it answers
        assert last_user_content(fake_llm) == f"[Bob Smith] {MENTION} what's up?"

        # Replying to the bot counts as addressing it; the quoted text reaches the model.
        telegram.user_says(
            GROUP,
            "and tomorrow?",
            user_id=3003,
            first_name="Bob",
            chat_type="supergroup",
            reply_to=first["message_id"],
        )
        second = await telegram.next_message(GROUP)
        assert second["text"] == "Sure."
        assert last_user_content(fake_llm) == "[Bob] > Hi Bob.\nand tomorrow?"

        telegram.user_says(GROUP, f"/help@{BOT_USERNAME}", user_id=3003, chat_type="supergroup")
        help_reply = await telegram.next_message(GROUP)
    assert "/new" in help_reply["text"]
    assert len(fake_llm.requests) == 2


async def test_group_without_require_mention_answers_everything(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    channels = ChannelsConfig(telegram=telegram_config(telegram, require_mention=False))
    config = make_config(tmp_path, agent_config, channels=channels)
    fake_llm.script(text("Noted."))
    async with TelegramGateway(config):
        telegram.user_says(GROUP, "lunch at noon", user_id=3003, chat_type="group")
        reply = await telegram.next_message(GROUP)
    assert reply["text"] == "Noted."


async def test_forum_topic_has_its_own_session_and_reply_thread(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("In topic seven."))
    async with TelegramGateway(config):
        telegram.user_says(
            GROUP, f"{MENTION} hello", user_id=3003, chat_type="supergroup", thread_id=7
        )
        reply = await telegram.next_message(GROUP)
    assert reply["message_thread_id"] == 7
    assert {"chat_id": GROUP, "action": "typing", "message_thread_id": 7} in telegram.actions
    assert (config.workspace / "sessions" / f"telegram_{GROUP}_7.jsonl").exists()
    assert not (config.workspace / "sessions" / f"telegram_{GROUP}.jsonl").exists()


async def test_edited_message_is_passed_on_marked_as_edit(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("first"), text("second"))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "meet at 5")
        await telegram.next_message(OWNER)
        telegram.user_says(OWNER, "meet at 6", edit_of=1)
        await telegram.next_message(OWNER)
    assert last_user_content(fake_llm) == "[edited] meet at 6"


# -- sending --------------------------------------------------------------------------------


async def test_long_reply_arrives_as_compliant_parts_in_order(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    paragraphs = [f"Paragraph {i:02d}: " + "lorem ipsum & <dolor> " * 10 for i in range(24)]
    long = "\n\n".join(paragraphs)
    assert len(long) > 5000
    fake_llm.script(text(long))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "write a lot")
        parts = [await telegram.next_message(OWNER)]
        while sum(len(p["text"]) for p in parts) < len(long) - 100:
            parts.append(await telegram.next_message(OWNER))
    assert len(parts) >= 2
    for part in parts:
        assert utf16_len(part["raw"]) <= 4096
        assert part["parse_mode"] == "HTML"
    numbers = [int(n) for p in parts for n in re.findall(r"Paragraph (\d+):", p["text"])]
    assert numbers == list(range(24))


async def test_long_code_block_is_reopened_in_each_part(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    code = "\n".join(f"print('line {i:03d} <ok>')" for i in range(300))
    fake_llm.script(text(f"Here:\n\n```python\n{code}\n```\nDone."))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "code please")
        parts = [await telegram.next_message(OWNER)]
        while "Done." not in parts[-1]["text"]:
            parts.append(await telegram.next_message(OWNER))
    assert len(parts) >= 3
    for part in parts:
        assert utf16_len(part["raw"]) <= 4096
        assert part["raw"].count('<pre><code class="language-python">') == 1
    lines = re.findall(r"line (\d{3})", "".join(p["text"] for p in parts))
    assert lines == [f"{i:03d}" for i in range(300)]


async def test_rejected_html_falls_back_to_plain_text(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Some **bold** claim"))
    telegram.fail_next(
        "sendMessage", 400, 'Bad Request: can\'t parse entities: Unsupported start tag "x"'
    )
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "hi")
        reply = await telegram.next_message(OWNER)
    assert reply["parse_mode"] is None
    assert reply["text"] == "Some **bold** claim"
    assert len(telegram.messages_to(OWNER)) == 1


async def test_rate_limit_is_waited_out_and_delivered_once(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Patience."))
    telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 3", retry_after=3)
    async with TelegramGateway(config) as gw:
        telegram.user_says(OWNER, "hi")
        reply = await telegram.next_message(OWNER)
        await asyncio.sleep(0.1)
    assert reply["text"] == "Patience."
    assert 3 in gw.sleeps.delays
    assert telegram.calls["sendMessage"] == 2
    assert len(telegram.messages_to(OWNER)) == 1


async def test_server_errors_are_retried_but_a_timed_out_send_is_not(
    config: Config, telegram: FakeTelegram
) -> None:
    channel = create_channel(
        config.channels.telegram, MessageBus(), config, sleep=Sleeps(), read_timeout=0.5
    )
    await channel.start()
    try:
        telegram.fail_next("sendMessage", 502, "Bad Gateway")
        await channel.send(OutboundMessage(channel="telegram", chat_id=str(OWNER), text="one"))
        assert [m["text"] for m in telegram.messages_to(OWNER)] == ["one"]

        # The fake takes the message but answers too late: the outcome is unknown.
        telegram.stall_next("sendMessage", 3)
        calls = telegram.calls["sendMessage"]
        with pytest.raises(ChannelError, match="not retried"):
            await channel.send(OutboundMessage(channel="telegram", chat_id=str(OWNER), text="two"))
        assert telegram.calls["sendMessage"] == calls + 1
        assert [m["text"] for m in telegram.messages_to(OWNER)] == ["one", "two"]
    finally:
        await channel.stop()
        await channel.close()


async def test_outbound_media_goes_out_as_photo_or_document(
    config: Config, telegram: FakeTelegram
) -> None:
    public = config.workspace / "public"
    public.mkdir(exist_ok=True)
    (public / "chart.png").write_bytes(b"\x89PNG fake")
    (public / "notes.txt").write_text("notes")
    channel = create_channel(config.channels.telegram, MessageBus(), config, sleep=Sleeps())
    await channel.start()
    try:
        await channel.send(
            OutboundMessage(
                channel="telegram",
                chat_id=str(OWNER),
                text="Files:",
                media=("public/chart.png", "public/notes.txt"),
                trust=Trust.OWNER,  # an owner's session attached them: the workspace is its reach
            )
        )
        with pytest.raises(ChannelError, match="not a file in the workspace"):
            await channel.send(
                OutboundMessage(
                    channel="telegram", chat_id=str(OWNER), text="", media=("../../etc/passwd",)
                )
            )
    finally:
        await channel.stop()
        await channel.close()
    kinds = [(m.get("kind", "text"), m.get("filename")) for m in telegram.messages_to(OWNER)]
    assert kinds == [("text", None), ("photo", "chart.png"), ("document", "notes.txt")]
    assert telegram.messages_to(OWNER)[1]["data"] == b"\x89PNG fake"


# -- receiving: failures, backlog, restarts ---------------------------------------------------


async def test_polling_recovers_after_server_errors_and_a_conflict(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    telegram.fail_next("getUpdates", 500, "Internal Server Error")
    telegram.fail_next("getUpdates", 502, "Bad Gateway")
    telegram.conflict()
    telegram.conflict()
    fake_llm.script(text("Back."))
    with caplog.at_level(logging.WARNING, logger="clawgate.channels.telegram"):
        async with TelegramGateway(config) as gw:
            telegram.user_says(OWNER, "anyone?")
            reply = await telegram.next_message(OWNER)
    assert reply["text"] == "Back."
    assert gw.channel.polls_failed == 2
    conflicts = [r for r in caplog.records if "another bot instance" in r.getMessage()]
    assert len(conflicts) == 1
    assert gw.sleeps.delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert TOKEN not in caplog.text


async def test_backlog_from_before_start_is_answered_in_order(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    for i in range(3):
        telegram.user_says(OWNER, f"queued {i}")
    fake_llm.script(text("a0"), text("a1"), text("a2"))
    async with TelegramGateway(config):
        replies = [(await telegram.next_message(OWNER))["text"] for _ in range(3)]
    assert replies == ["a0", "a1", "a2"]
    assert [last["content"] for last in _user_messages(fake_llm)] == [
        "queued 0",
        "queued 1",
        "queued 2",
    ]


def _user_messages(llm: FakeLLM) -> list[dict[str, Any]]:
    return [[m for m in r["messages"] if m["role"] == "user"][-1] for r in llm.requests]


async def test_updates_fetched_before_a_crash_are_answered_exactly_once(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    never = asyncio.Event()
    fake_llm.script(gate(never, text("too late")))
    ids = [
        telegram.user_says(OWNER, "first"),
        telegram.user_says(OWNER, "second"),
        telegram.user_says(4004, f"{MENTION} third", chat_type="group", user_id=OWNER),
    ]
    crashed = TelegramGateway(config)
    await crashed.gateway.start()
    await fake_llm.wait_for_requests(1)
    await processed(telegram, ids[-1])  # journaled, and confirmed to Telegram
    # The crash: every task cancelled, no reply sent, nothing marked answered.
    await crashed.gateway.stop(grace=0)
    assert telegram.sent == []

    fake_llm.handler = lambda body: text(f"answer {len(fake_llm.requests)}")
    telegram.user_says(OWNER, "fourth")
    async with TelegramGateway(config):
        got = [await telegram.next_message(OWNER) for _ in range(3)]
        await asyncio.sleep(0.3)  # room for a duplicate to show up
    assert len(telegram.messages_to(OWNER)) == 3
    assert len(got) == 3
    replayed = [m["content"] for m in _user_messages(fake_llm)[1:]]
    assert replayed == ["first", "second", "fourth"]
    # Chat 4004 is not in group_allow: ignored before and after the restart.
    assert telegram.messages_to(4004) == []
    journal = InboundJournal(config.data_dir / "channels" / "telegram" / "journal.jsonl")
    assert await journal.load() == []


async def test_journal_compaction_keeps_unanswered_and_the_high_mark(tmp_path: Path) -> None:
    journal = InboundJournal(tmp_path / "journal.jsonl", compact_after=10)
    message = InboundMessage(channel="telegram", chat_id="1", text="x", trust=Trust.OWNER)
    await journal.record((i, message) for i in range(1, 31))
    await journal.record([(31, None)])
    await journal.answered(range(1, 28))
    assert len(journal.path.read_text().splitlines()) <= 5
    reloaded = InboundJournal(journal.path)
    assert [u for u, _ in await reloaded.load()] == [28, 29, 30]
    assert reloaded.high == 31


async def test_new_and_stop_from_telegram(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    held = asyncio.Event()

    def model(body: dict[str, Any]) -> Any:
        # /new also has the archived session consolidated; that request offers save_memory.
        if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
            return tool_call("save_memory", history_entry="Ann asked to remember something.")
        last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        return gate(held, text("never sent")) if last == "think hard" else text("remembered")

    fake_llm.handler = model
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "remember this")
        await telegram.next_message(OWNER)
        telegram.user_says(OWNER, "/new")
        assert (await telegram.next_message(OWNER))["text"] == "New session started."
        assert list((config.workspace / "sessions" / "archive").glob("telegram_1001.*.jsonl"))

        telegram.user_says(OWNER, "think hard")
        await wait_until(lambda: last_user_content(fake_llm) == "think hard")
        telegram.user_says(OWNER, "/stop")
        assert (await telegram.next_message(OWNER))["text"] == "Stopped."
    assert [m["text"] for m in telegram.messages_to(OWNER)][-1] == "Stopped."


async def test_photo_is_downloaded_into_the_workspace(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("A cat."))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "what is this?", photo=b"\xff\xd8JPEG-bytes-of-a-cat")
        await telegram.next_message(OWNER)
    content = last_user_content(fake_llm)
    match = re.search(r"\[photo: (media/telegram/1001/[\w.]+\.jpg)\]", content)
    assert match is not None, content
    assert content.startswith("what is this?")
    # The largest size is the one fetched, not the thumbnail.
    assert (config.workspace / match.group(1)).read_bytes() == b"\xff\xd8JPEG-bytes-of-a-cat"


async def test_document_and_voice_are_downloaded(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("ok"), text("ok"))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "", document=("report 1.pdf", b"%PDF-1.4"))
        await telegram.next_message(OWNER)
        telegram.user_says(OWNER, "", voice=b"OggS")
        await telegram.next_message(OWNER)
    first = _user_messages(fake_llm)[0]["content"]
    second = _user_messages(fake_llm)[1]["content"]
    assert re.fullmatch(r"\[document: media/telegram/1001/\w+_report_1\.pdf\]", first)
    assert re.fullmatch(r"\[voice: media/telegram/1001/\w+\.ogg\]", second)
    media = config.workspace / "media" / "telegram" / "1001"
    assert sorted(p.read_bytes() for p in media.iterdir()) == [b"%PDF-1.4", b"OggS"]


# -- the fake's own rules, checked with PTB's Bot ----------------------------------------------


@pytest.fixture
async def bot(telegram: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(TOKEN, base_url=telegram.base_url, base_file_url=telegram.base_file_url) as b:
        yield b


async def test_fake_rejects_empty_and_too_long_text(bot: Bot) -> None:
    with pytest.raises(BadRequest, match="text is empty"):
        await bot.send_message(OWNER, "<b> </b>", parse_mode="HTML")
    # 2048 emoji are 4096 UTF-16 units: the limit exactly. One more is too long.
    await bot.send_message(OWNER, "😀" * 2048)
    with pytest.raises(BadRequest, match="too long"):
        await bot.send_message(OWNER, "😀" * 2049)


async def test_fake_checks_html(bot: Bot, telegram: FakeTelegram) -> None:
    for bad in ["<b>open", "a < b", "<foo>x</foo>", "<b><i>x</b></i>", "fish & chips"]:
        with pytest.raises(BadRequest, match="parse entities"):
            await bot.send_message(OWNER, bad, parse_mode="HTML")
    good = '<b>a</b> <a href="https://x.org">l</a> <pre><code class="language-py">1 &lt; 2</code></pre>'
    sent = await bot.send_message(OWNER, good, parse_mode="HTML")
    assert sent.text == "a l 1 < 2"


async def test_fake_get_updates_honours_offsets_and_wakes_on_new_updates(
    bot: Bot, telegram: FakeTelegram
) -> None:
    first = telegram.user_says(OWNER, "one")
    second = telegram.user_says(OWNER, "two")
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [first, second]
    # Not confirmed yet: handed out again.
    assert [u.update_id for u in await bot.get_updates(timeout=0)] == [first, second]
    assert [u.update_id for u in await bot.get_updates(offset=second, timeout=0)] == [second]
    # Confirmed updates are gone for good, whatever offset comes later.
    assert [u.update_id for u in await bot.get_updates(offset=1, timeout=0)] == [second]
    assert telegram.confirmed_offset == second

    loop = asyncio.get_running_loop()
    started = loop.time()
    waiting = asyncio.create_task(bot.get_updates(offset=second + 1, timeout=10))
    await asyncio.sleep(0.2)
    third = telegram.user_says(OWNER, "three")
    updates = await waiting
    assert [u.update_id for u in updates] == [third]
    assert loop.time() - started < 5


async def test_fake_injects_rate_limits_and_conflicts(bot: Bot, telegram: FakeTelegram) -> None:
    telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 7", retry_after=7)
    with pytest.raises(RetryAfter) as caught:
        await bot.send_message(OWNER, "x")
    assert caught.value._retry_after.total_seconds() == 7
    telegram.conflict()
    with pytest.raises(Conflict):
        await bot.get_updates(timeout=0)


async def test_fake_records_threads_quotes_and_uploads(bot: Bot, telegram: FakeTelegram) -> None:
    telegram.user_says(GROUP, "hi", user_id=3003, chat_type="supergroup", thread_id=9)
    await bot.send_message(
        GROUP,
        "in thread",
        message_thread_id=9,
        reply_parameters=ReplyParameters(message_id=1),
    )
    await bot.send_document(OWNER, document=b"data", filename="a.txt")
    threaded, upload = telegram.sent
    assert threaded["message_thread_id"] == 9
    assert threaded["reply_to_message_id"] == 1
    assert (upload["kind"], upload["filename"], upload["data"]) == ("document", "a.txt", b"data")


async def test_fake_serves_files(bot: Bot, telegram: FakeTelegram) -> None:
    telegram.user_says(OWNER, "pic", photo=b"image-bytes")
    (update,) = await bot.get_updates(timeout=0)
    assert update.message is not None
    file = await bot.get_file(update.message.photo[-1].file_id)
    assert bytes(await file.download_as_bytearray()) == b"image-bytes"


async def test_in_a_group_only_the_owner_runs_the_owner_only_commands(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    async with TelegramGateway(config):
        telegram.user_says(GROUP, f"/new@{BOT_USERNAME}", user_id=3003, chat_type="supergroup")
        refused = await telegram.next_message(GROUP)
        telegram.user_says(GROUP, f"/new@{BOT_USERNAME}", user_id=OWNER, chat_type="supergroup")
        done = await telegram.next_message(GROUP)
    assert refused["text"] == "Only the owner can start a new session here."
    assert done["text"] == "New session started."
    assert fake_llm.requests == []

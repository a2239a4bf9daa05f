"""Replies that stream into Telegram: the real python-telegram-bot against FakeTelegram, the
real gateway, FakeLLM streaming. The channel throttles on virtual time (`Sleeps.clock`), so
"at most one edit a second" is checked without waiting a second."""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from clawgate.channels.live import CUT_LINE, STOPPED_LINE
from clawgate.channels.split import split_message
from clawgate.gateway.daemon.ratelimit import RateLimiter
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config
from tests.fakes.llm import FakeLLM, cut, error, gate, pause, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config, wait_until
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config
from tests.telegram_world import GROUP, MENTION, OWNER, TelegramGateway, telegram_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

WORDS = " ".join(f"word{n}" for n in range(80))


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram) -> Config:
    channels = ChannelsConfig(telegram=telegram_config(telegram, streaming="edit"))
    return make_config(tmp_path, agent_config, channels=channels)


def records(config: Config, chat: int = OWNER) -> list[dict[str, Any]]:
    path = config.workspace / "sessions" / f"telegram_{chat}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def of_type(config: Config, kind: str, chat: int = OWNER) -> list[dict[str, Any]]:
    return [r for r in records(config, chat) if r.get("type") == kind]


async def test_a_reply_shows_early_then_is_edited_at_most_once_a_second_into_html(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(f"**Sure.** {WORDS}"), after=12))
    async with TelegramGateway(config, virtual_time=True) as gateway:
        telegram.clock = gateway.sleeps.clock
        telegram.user_says(OWNER, "tell me")
        live = await telegram.next_message(OWNER)
        # Shown before the model finished, plain, whole words only.
        assert live["parse_mode"] is None
        assert len(live["text"]) >= 30
        assert live["text"].startswith("**Sure.** word0")
        assert f"Sure. {WORDS}".startswith(live["text"].replace("**", "").rstrip())
        release.set()
        await wait_until(lambda: any(e["parse_mode"] == "HTML" for e in telegram.edits))
    assert telegram.messages_to(OWNER) == [live]
    assert telegram.text_of(OWNER, live["message_id"]) == f"Sure. {WORDS}"
    times = [telegram.posted_at[OWNER, live["message_id"]], *(e["at"] for e in telegram.edits)]
    assert len(times) >= 2
    assert all(later - earlier >= 1.0 for earlier, later in itertools.pairwise(times))
    # One reply: one delivery record, and the record that it began to show.
    assert [r["status"] for r in of_type(config, "delivery")] == ["sent"]
    assert len(of_type(config, "streamed")) == 1


async def test_a_429_during_a_stream_delays_the_next_edit_and_the_final_text_arrives(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(WORDS), after=12))
    async with TelegramGateway(config, virtual_time=True) as gateway:
        telegram.clock = gateway.sleeps.clock
        for _ in range(2):
            telegram.fail_next("editMessageText", 429, "Too Many Requests: retry after 7", 7)
        telegram.user_says(OWNER, "tell me")
        live = await telegram.next_message(OWNER)
        release.set()
        await wait_until(lambda: telegram.text_of(OWNER, live["message_id"]) == WORDS)
    assert telegram.messages_to(OWNER) == [live]
    assert 7 in gateway.sleeps.delays


async def test_a_deleted_live_message_gets_one_follow_up_with_the_reply(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(WORDS), after=12))
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(OWNER, "tell me")
        live = await telegram.next_message(OWNER)
        telegram.delete_message(OWNER, live["message_id"])
        release.set()
        follow_up = await telegram.next_message(OWNER)
    assert follow_up["text"] == WORDS
    assert telegram.messages_to(OWNER) == [live, follow_up]
    assert [r["status"] for r in of_type(config, "delivery")] == ["sent"]


async def test_stop_mid_stream_keeps_the_text_so_far_with_a_stopped_marker(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(pause(asyncio.Event(), text(WORDS), after=12))
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(OWNER, "tell me")
        live = await telegram.next_message(OWNER)
        telegram.user_says(OWNER, "/stop")
        await wait_until(lambda: telegram.text_of(OWNER, live["message_id"]).endswith(STOPPED_LINE))
    shown = telegram.text_of(OWNER, live["message_id"])
    assert shown.startswith(live["text"].rstrip())
    assert telegram.messages_to(OWNER) == [live]  # no separate "Stopped."
    assert len(of_type(config, "stopped")) == 1


async def test_a_model_error_mid_stream_replaces_the_unfinished_line_with_the_error(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    channels = ChannelsConfig(telegram=telegram_config(telegram, streaming="edit"))
    once = agent_config.model_copy(update={"max_retries": 0})
    config = make_config(tmp_path, once, channels=channels)
    failed = asyncio.Event()
    lines = "\n".join(f"line {n} of the answer" for n in range(12))
    fake_llm.script(cut(text(lines), error(400, "the model broke"), hold=failed))
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(OWNER, "tell me")
        live = await telegram.next_message(OWNER)
        failed.set()
        await wait_until(lambda: len(telegram.edits) >= 1 and "line" not in last_line(telegram))
    shown = telegram.text_of(OWNER, live["message_id"])
    head, _, error_line = shown.rpartition("\n\n")
    assert lines.startswith(head) and head.startswith("line 0")
    assert error_line and "line" not in error_line
    assert telegram.messages_to(OWNER) == [live]
    assert len(of_type(config, "error")) == 1


def last_line(telegram: FakeTelegram) -> str:
    return str(telegram.edits[-1]["text"]).splitlines()[-1]


async def test_a_10000_character_reply_continues_in_new_messages_split_as_usual(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    block = "```\n" + "\n".join(f"code line {n}" for n in range(150)) + "\n```"
    reply = f"{WORDS}\n\n{block}\n\n" + " ".join(f"tail{n}" for n in range(1200))
    assert len(reply) > 10_000
    release = asyncio.Event()
    fake_llm.script(pause(release, text(reply), after=12))
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(OWNER, "a long one")
        live = await telegram.next_message(OWNER)
        release.set()
        parts = len(split_message(reply, 4000))
        await wait_until(lambda: len(telegram.messages_to(OWNER)) >= parts)
    sent = telegram.messages_to(OWNER)
    shown = [telegram.text_of(OWNER, live["message_id"])] + [m["text"] for m in sent[1:]]
    assert len(sent) >= 3
    # Every part renders on its own: a code block cut between parts is closed and reopened.
    assert all(m["parse_mode"] == "HTML" for m in sent[1:])
    assert "".join(shown).replace(" ", "").replace("\n", "") == (
        reply.replace("```", "").replace(" ", "").replace("\n", "")
    )
    assert [r["status"] for r in of_type(config, "delivery")] == ["sent"]


async def test_a_tool_step_shows_one_status_line_replaced_when_text_resumes(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(
        tool_call("list_dir", path="notes/2026"),
        gate(release, text(WORDS)),
    )
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(OWNER, "what is here?")
        live = await telegram.next_message(OWNER)
        # The model is writing its answer: the status line is what shows meanwhile.
        assert live["text"] == "⏳ list_dir: notes/2026"
        release.set()
        await wait_until(lambda: telegram.text_of(OWNER, live["message_id"]) == WORDS)
    assert not any("⏳" in e["text"] for e in telegram.edits)


async def test_a_group_sees_the_tool_name_only_and_the_quote_on_the_live_message(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(
        tool_call("list_dir", path="secret-folder"),
        gate(release, text(WORDS)),
    )
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(GROUP, f"{MENTION} what is here?", chat_type="supergroup")
        live = await telegram.next_message(GROUP)
        assert live["text"] == "⏳ list_dir"
        release.set()
        await wait_until(lambda: telegram.text_of(GROUP, live["message_id"]) == WORDS)
    assert live["reply_to_message_id"] is not None
    assert telegram.messages_to(GROUP) == [live]
    assert [r["status"] for r in of_type(config, "delivery", GROUP)] == ["sent"]


async def test_streaming_off_sends_the_reply_whole(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    channels = ChannelsConfig(telegram=telegram_config(telegram, streaming="off"))
    config = make_config(tmp_path, agent_config, channels=channels)
    fake_llm.script(text(WORDS))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "tell me")
        reply = await telegram.next_message(OWNER)
    assert reply["text"] == WORDS and reply["parse_mode"] == "HTML"
    assert telegram.edits == []
    assert not fake_llm.requests[-1].get("stream")
    assert of_type(config, "streamed") == []


async def test_kill_9_mid_stream_leaves_one_message_marked_cut_and_answers_nothing_twice(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(pause(asyncio.Event(), text(WORDS), after=12))
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        telegram=fake_telegram(telegram, [OWNER], streaming="edit"),
    )
    streams = tmp_path / "data" / "channels" / "telegram" / "streams.jsonl"
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("channel telegram ready", 30)
        telegram.user_says(OWNER, "tell me")
        live = await telegram.next_message(OWNER, timeout=60)
        await wait_until(lambda: '"shown"' in streams.read_text(), timeout=10)
        gateway.send_signal(signal.SIGKILL)
        assert await gateway.wait(25) == -signal.SIGKILL
    asked = len(fake_llm.requests)

    fake_llm.script(text("A fresh answer."))
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log("channel telegram ready", 30)
        await wait_until(
            lambda: telegram.text_of(OWNER, live["message_id"]).endswith(CUT_LINE), timeout=20
        )
        telegram.user_says(OWNER, "and now?")
        reply = await telegram.next_message(OWNER, timeout=60)
        # Streamed too: a slow machine shows its first words before the rest is edited in.
        await wait_until(
            lambda: telegram.text_of(OWNER, reply["message_id"]) == "A fresh answer.", timeout=20
        )
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(25) == 0
    # The cut message was neither replayed from the journal nor recovered from the session.
    assert len(fake_llm.requests) == asked + 1
    assert telegram.messages_to(OWNER) == [live, reply]
    assert telegram.text_of(OWNER, live["message_id"]).startswith(live["text"].rstrip())


async def test_a_forum_topic_streams_in_its_topic(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(pause(release, text(WORDS), after=12))
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(GROUP, f"{MENTION} tell me", chat_type="supergroup", thread_id=7)
        live = await telegram.next_message(GROUP)
        release.set()
        await wait_until(lambda: telegram.text_of(GROUP, live["message_id"]) == WORDS)
    assert live["message_thread_id"] == 7
    assert telegram.messages_to(GROUP) == [live]


async def test_a_secret_the_model_writes_never_shows_even_half_written(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    secret = "sk-test-secret"  # the configured model key: the redactor knows it
    release = asyncio.Event()
    fake_llm.script(pause(release, text(f"Your key is {secret} and {WORDS}"), after=5))
    async with TelegramGateway(config, virtual_time=True):
        telegram.user_says(OWNER, "what is my key?")
        live = await telegram.next_message(OWNER)
        release.set()
        await wait_until(lambda: telegram.text_of(OWNER, live["message_id"]).endswith("word79"))
    shown = [live["text"], *(e["text"] for e in telegram.edits)]
    assert not any("sk-test" in s or "secret" in s for s in shown)


async def test_the_rate_limit_counts_a_streamed_reply_as_one_message(
    config: Config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    # Two messages a minute for a group member: two questions whose replies stream with
    # several edits each are both answered, and nothing is held over the limit.
    fake_llm.script(text(f"one {WORDS}"), text(f"two {WORDS}"))
    limiter = RateLimiter(2, clock=lambda: 0.0)
    async with TelegramGateway(config, virtual_time=True, rate_limiter=limiter):
        for said in ("first", "second"):
            telegram.user_says(GROUP, f"{MENTION} {said}", chat_type="supergroup", user_id=2002)
            live = await telegram.next_message(GROUP)
            await wait_until(
                lambda live=live: telegram.text_of(GROUP, live["message_id"]).endswith("word79")
            )
    assert len(telegram.messages_to(GROUP)) == 2
    assert of_type(config, "over_limit", GROUP) == []

"""Faults from outside: a model endpoint that times out, rate-limits, errs, answers garbage or
cuts its answer off; Telegram and Discord refusing or dropping sends and polls; a disk that
refuses writes (through the DiskWriter seam: root ignores file modes).

Each test checks the same four things: the user gets a clear message where one can be
delivered, other chats keep being served, nothing written is corrupted (every line of every
file is whole JSON), and the next message is answered normally once the fault clears, with
no restart.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.session import load_session, session_filename
from clawgate.channels.telegram.journal import InboundJournal
from clawgate.gateway.cli.memory import split_entries
from clawgate.kernel.bus import OutboundMessage
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config
from clawgate.kernel.storage import DiskWriter
from tests.discord_world import OWNER as DISCORD_OWNER
from tests.discord_world import World
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, cut, error, garbage, gate, hang, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import Harness, make_config, wait_until
from tests.telegram_world import TelegramGateway, telegram_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

TG_OWNER = 1001
TG_OTHER = 1002
HISTORY_ENTRY = "Ann and the assistant talked about tea and the weekend."
MODEL_DOWN = "Sorry, I couldn't reach the model"


# -- shared helpers -----------------------------------------------------------------------


def last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    content = users[-1]["content"]
    return content if isinstance(content, str) else json.dumps(content)


def is_consolidation(body: dict[str, Any]) -> bool:
    return any(t["function"]["name"] == "save_memory" for t in body.get("tools") or [])


def echo(body: dict[str, Any]) -> Reply:
    return text(f"re: {last_user(body)}")


def file_lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, parsed: a torn or glued line fails the test."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n"), f"{path.name} ends mid-line"
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def session_path(config: Config, key: str) -> Path:
    return config.workspace / "sessions" / f"{session_filename(key)}.jsonl"


def transcript(config: Config, key: str) -> list[tuple[str, str]]:
    """(role, content) of the stored messages, after checking the whole file is whole."""
    path = session_path(config, key)
    file_lines(path)
    session = load_session(path, key)
    return [(m.role, m.content) for m in session.messages]


def model_config(llm: FakeLLM, **overrides: Any) -> AgentConfig:
    values: dict[str, Any] = {
        "model": "openai/fake-model",
        "api_base": llm.url,
        "api_key": "sk-test-secret",
        # Long enough that a loaded machine never turns another fault into a timeout; the
        # hanging model's test sets its own short one.
        "request_timeout": 10.0,
        "max_retries": 1,
    }
    values.update(overrides)
    return AgentConfig(**values)


class RefusingWriter(DiskWriter):
    """A disk that refuses every write under `refused` paths with `code` (ENOSPC, EROFS)."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: list[Path] = []
        self.code = errno.ENOSPC
        self.refusals: Counter[str] = Counter()

    def refuse(self, *paths: Path, code: int = errno.ENOSPC) -> None:
        self.refused, self.code = list(paths), code

    def clear(self) -> None:
        self.refused = []

    def _check(self, path: Path) -> None:
        if any(path == p or path.is_relative_to(p) for p in self.refused):
            self.refusals[path.name] += 1
            raise OSError(self.code, os.strerror(self.code), str(path))


class Clock:
    """A monotonic clock the test moves (the consolidator's failure backoff reads it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the model endpoint ---------------------------------------------------------------------

MODEL_FAULTS: dict[str, tuple[Reply, str]] = {
    "timeout": (hang(), "timed out"),
    "429": (error(429, "slow down", retry_after=0), "rate limited"),
    "500": (error(500, "boom", retry_after=0), "server error"),
    # litellm reports a body it cannot parse as a provider error (HTTP 500).
    "garbage-json": (garbage(), "HTTP 500"),
    # The body stops half-way and the connection closes: retried like a dropped connection.
    "cut-mid-way": (cut(text("an answer that never arrives whole " * 40)), "could not connect"),
}


@pytest.mark.parametrize("model_path", ["direct", "litellm"])
@pytest.mark.parametrize("fault", MODEL_FAULTS)
async def test_model_fault_gets_a_clear_reply_others_are_served_and_it_recovers(
    tmp_path: Path, fake_llm: FakeLLM, fault: str, model_path: str
) -> None:
    failing, reason = MODEL_FAULTS[fault]
    broken = True

    def model(body: dict[str, Any]) -> Reply:
        # Only chat 1's messages meet the fault, on every attempt, until it clears.
        return failing if broken and last_user(body).startswith("one:") else echo(body)

    fake_llm.handler = model
    if model_path == "litellm":
        import_litellm()  # the one-off import is not part of the timed attempts
    timeout = 1.0 if fault == "timeout" else 10.0
    config = make_config(
        tmp_path,
        model_config(fake_llm, direct_http=model_path == "direct", request_timeout=timeout),
    )
    async with Harness(config) as gw:
        await gw.channel.say("one: hello", chat_id="1")
        await gw.channel.say("two: hello", chat_id="2")
        other = await gw.channel.next_reply("2")
        failed = await gw.channel.next_reply("1")
        broken = False
        recovered = await gw.ask("one: again", chat_id="1")

    assert (other.text, other.is_error) == ("re: two: hello", False)
    assert failed.is_error
    assert failed.text.startswith(MODEL_DOWN), failed.text
    assert reason in failed.text
    assert "Your message was not answered: send it again in a moment." in failed.text
    assert "sk-test-secret" not in failed.text
    assert (recovered.text, recovered.is_error) == ("re: one: again", False)
    # The failed turn stored the user's message and an error record, never a fake reply.
    assert transcript(config, "test:1") == [
        ("user", "one: hello"),
        ("user", "one: again"),
        ("assistant", "re: one: again"),
    ]
    records = file_lines(session_path(config, "test:1"))
    assert [r["type"] for r in records if r.get("type") == "error"] == ["error"]
    # The second request carried the first message too: nothing was lost.
    assert [last_user(b) for b in fake_llm.requests].count("one: again") == 1
    assert audit_sessions(config.workspace / "sessions").ok


async def test_a_fault_that_clears_within_the_retries_is_invisible(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(error(500, retry_after=0), error(429, retry_after=0), text("Fine."))
    config = make_config(tmp_path, model_config(fake_llm, max_retries=2))
    async with Harness(config) as gw:
        reply = await gw.ask("hi")
    assert (reply.text, reply.is_error) == ("Fine.", False)
    assert len(fake_llm.requests) == 3


# -- Telegram -------------------------------------------------------------------------------


class DroppingRelay:
    """A TCP relay in front of FakeTelegram that can drop the connection carrying a given Bot
    API method before the request reaches the server - a connection lost in transit."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.dropped: list[str] = []
        self._armed: Counter[str] = Counter()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    def drop_next(self, method: str) -> None:
        self._armed[method] += 1

    async def __aenter__(self) -> DroppingRelay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    def _drop_for(self, chunk: bytes) -> str | None:
        for method, count in self._armed.items():
            if count and f"/{method} HTTP/".encode() in chunk:
                self._armed[method] -= 1
                return method
        return None

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self._writers |= {writer, up_writer}

        async def downstream() -> None:
            while data := await up_reader.read(65536):
                writer.write(data)
                await writer.drain()
            writer.close()

        copier = asyncio.create_task(downstream())
        try:
            while chunk := await reader.read(65536):
                method = self._drop_for(chunk)
                if method is not None:
                    self.dropped.append(method)
                    break
                up_writer.write(chunk)
                await up_writer.drain()
        except ConnectionError:
            pass
        finally:
            copier.cancel()
            await asyncio.gather(copier, return_exceptions=True)
            for w in (writer, up_writer):
                w.close()
                self._writers.discard(w)


def telegram_world(
    tmp_path: Path, llm: FakeLLM, telegram: FakeTelegram, base_url: str | None = None
) -> Config:
    settings = telegram_config(telegram, allow_from=[str(TG_OWNER), str(TG_OTHER)])
    if base_url is not None:
        settings = settings.model_copy(update={"base_url": base_url})
    return make_config(tmp_path, model_config(llm), channels=ChannelsConfig(telegram=settings))


def deliveries(config: Config, key: str) -> list[str]:
    return [
        r["status"] for r in file_lines(session_path(config, key)) if r.get("type") == "delivery"
    ]


async def journal_empty(config: Config) -> bool:
    journal = InboundJournal(config.data_dir / "channels" / "telegram" / "journal.jsonl")
    return await journal.load() == []


@pytest.mark.parametrize(
    ("status", "description", "retry_after"),
    [(429, "Too Many Requests: retry after 1", 1), (502, "Bad Gateway", None)],
)
async def test_telegram_refusing_sends_costs_one_reply_not_the_chat(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    status: int,
    description: str,
    retry_after: float | None,
) -> None:
    fake_llm.handler = echo
    config = telegram_world(tmp_path, fake_llm, telegram)
    async with TelegramGateway(config) as gw:
        # Every attempt of the next reply is refused (5 attempts, then it is given up).
        for _ in range(5):
            telegram.fail_next("sendMessage", status, description, retry_after=retry_after)
        telegram.user_says(TG_OWNER, "lost in the post")
        await wait_until(lambda: telegram.calls["sendMessage"] >= 5, timeout=10)
        await wait_until(lambda: deliveries(config, f"telegram:{TG_OWNER}") == ["failed"])
        telegram.user_says(TG_OTHER, "anyone there?")
        other = await telegram.next_message(TG_OTHER)
        telegram.user_says(TG_OWNER, "and now?")
        recovered = await telegram.next_message(TG_OWNER)
        await asyncio.sleep(0.2)  # room for a late duplicate to show

    assert other["text"] == "re: anyone there?"
    assert recovered["text"] == "re: and now?"
    assert [m["text"] for m in telegram.messages_to(TG_OWNER)] == ["re: and now?"]
    if retry_after is not None:
        assert gw.sleeps.delays.count(retry_after) >= 4
    assert deliveries(config, f"telegram:{TG_OWNER}") == ["failed", "sent"]
    assert transcript(config, f"telegram:{TG_OWNER}") == [
        ("user", "lost in the post"),
        ("assistant", "re: lost in the post"),
        ("user", "and now?"),
        ("assistant", "re: and now?"),
    ]
    assert await journal_empty(config)  # the given-up reply is not replayed at next start


async def test_telegram_polls_survive_429_5xx_and_dropped_connections(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.handler = echo
    async with DroppingRelay(int(telegram.base_url.split(":")[2].split("/")[0])) as relay:
        config = telegram_world(
            tmp_path, fake_llm, telegram, base_url=f"http://127.0.0.1:{relay.port}/bot"
        )
        telegram.fail_next("getUpdates", 429, "Too Many Requests: retry after 1", retry_after=1)
        telegram.fail_next("getUpdates", 503, "Service Unavailable")
        relay.drop_next("getUpdates")
        async with TelegramGateway(config) as gw:
            telegram.user_says(TG_OWNER, "through the storm")
            first = await telegram.next_message(TG_OWNER)
            assert relay.dropped == ["getUpdates"]

            # A send whose connection drops may or may not have arrived: it is not retried
            # (at most once), recorded as failed, and the chat goes on.
            relay.drop_next("sendMessage")
            telegram.user_says(TG_OWNER, "dropped reply")
            await wait_until(lambda: relay.dropped == ["getUpdates", "sendMessage"])
            await wait_until(
                lambda: deliveries(config, f"telegram:{TG_OWNER}") == ["sent", "failed"]
            )
            telegram.user_says(TG_OTHER, "me too")
            other = await telegram.next_message(TG_OTHER)
            telegram.user_says(TG_OWNER, "still there?")
            last = await telegram.next_message(TG_OWNER)

    assert gw.channel.polls_failed >= 3
    assert first["text"] == "re: through the storm"
    assert other["text"] == "re: me too"
    assert last["text"] == "re: still there?"
    assert [m["text"] for m in telegram.messages_to(TG_OWNER)] == [
        "re: through the storm",
        "re: still there?",
    ]
    assert deliveries(config, f"telegram:{TG_OWNER}") == ["sent", "failed", "sent"]
    assert await journal_empty(config)


# -- Discord --------------------------------------------------------------------------------


async def test_discord_5xx_on_send_fails_one_reply_other_channels_keep_going(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    async with FakeDiscord() as fake:
        world = World(fake, tmp_path, model_config(fake_llm))
        route = f"POST /channels/{world.owner_dm}/messages"
        async with world.running():
            for _ in range(4):  # the first try and its three retries
                fake.fail_next(route, 503)
            await fake.user_says(world.owner_dm, "hello?", author_id=DISCORD_OWNER, username="ann")
            await fake.wait_for(lambda: fake.count(route) >= 4)
            key = f"discord:{world.owner_dm}"
            await wait_until(lambda: deliveries(world.config, key) == ["failed"])
            await fake.user_says(
                world.general, "hi all", author_id=DISCORD_OWNER, username="ann", mentions_bot=True
            )
            other = await fake.next_message(world.general)
            await fake.user_says(world.owner_dm, "back?", author_id=DISCORD_OWNER, username="ann")
            recovered = await fake.next_message(world.owner_dm)

    assert other.content.endswith("hi all")
    assert recovered.content == "re: back?"
    assert [m.content for m in fake.sent_to(world.owner_dm)] == ["re: back?"]
    assert deliveries(world.config, key) == ["failed", "sent"]
    assert [c for r, c in transcript(world.config, key) if r == "user"] == ["hello?", "back?"]


# -- the disk -------------------------------------------------------------------------------

DISK_FAULTS = {"ENOSPC": errno.ENOSPC, "EROFS": errno.EROFS}


@pytest.mark.parametrize("code", DISK_FAULTS.values(), ids=DISK_FAULTS.keys())
async def test_session_disk_refusing_writes_fails_the_turn_plainly(
    tmp_path: Path, fake_llm: FakeLLM, code: int
) -> None:
    fake_llm.handler = echo
    writer = RefusingWriter()
    config = make_config(tmp_path, model_config(fake_llm))
    path = session_path(config, "test:1")
    async with Harness(config, writer=writer) as gw:
        assert (await gw.ask("before", chat_id="1")).text == "re: before"
        before = path.read_bytes()

        writer.refuse(path, code=code)
        await gw.channel.say("during", chat_id="1")
        await gw.channel.say("elsewhere", chat_id="2")
        refused = await gw.channel.next_reply("1")
        other = await gw.channel.next_reply("2")
        assert path.read_bytes() == before  # not a byte of the refused turn
        writer.clear()
        recovered = await gw.ask("after", chat_id="1")

    assert refused.is_error
    assert refused.text.startswith("I can't save messages right now"), refused.text
    assert os.strerror(code) in refused.text
    assert writer.refusals[path.name] >= 1
    # The model was never asked: an unsaved message must not get an answer it cannot keep.
    assert "during" not in [last_user(b) for b in fake_llm.requests]
    assert (other.text, other.is_error) == ("re: elsewhere", False)
    assert (recovered.text, recovered.is_error) == ("re: after", False)
    assert transcript(config, "test:1") == [
        ("user", "before"),
        ("assistant", "re: before"),
        ("user", "after"),
        ("assistant", "re: after"),
    ]
    assert audit_sessions(config.workspace / "sessions").ok


async def test_disk_filling_up_mid_turn_keeps_the_file_whole(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()
    fake_llm.script(gate(release, text("an answer with nowhere to go")))
    fake_llm.handler = echo
    writer = RefusingWriter()
    config = make_config(tmp_path, model_config(fake_llm))
    path = session_path(config, "test:1")
    async with Harness(config, writer=writer) as gw:
        await gw.channel.say("think", chat_id="1")
        await fake_llm.wait_for_requests(1)
        writer.refuse(path)  # the user's message is stored; the disk fills before the answer
        release.set()
        refused = await gw.channel.next_reply("1")
        writer.clear()
        recovered = await gw.ask("again", chat_id="1")

    assert refused.is_error and "can't save messages" in refused.text
    assert (recovered.text, recovered.is_error) == ("re: again", False)
    assert transcript(config, "test:1") == [
        ("user", "think"),
        ("user", "again"),
        ("assistant", "re: again"),
    ]


@pytest.mark.parametrize("code", DISK_FAULTS.values(), ids=DISK_FAULTS.keys())
async def test_memory_disk_refusing_writes_leaves_memory_whole_and_consolidation_retries(
    tmp_path: Path, fake_llm: FakeLLM, code: int
) -> None:
    config = make_config(tmp_path, model_config(fake_llm, memory_window=4))
    memory_dir = config.workspace / "memory"
    original_memory = (memory_dir / "MEMORY.md").read_text(encoding="utf-8")
    updated_memory = original_memory.rstrip("\n") + "\n- Ann likes green tea.\n"

    def model(body: dict[str, Any]) -> Reply:
        if is_consolidation(body):
            return tool_call(
                "save_memory", history_entry=HISTORY_ENTRY, memory_update=updated_memory
            )
        return echo(body)

    fake_llm.handler = model
    writer = RefusingWriter()
    clock = Clock()
    saves = lambda: sum(map(is_consolidation, fake_llm.requests))  # noqa: E731

    def memory_files() -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(memory_dir.glob("*.md"))}

    async with Harness(config, writer=writer) as gw:
        gw.runtime.consolidator.clock = clock
        writer.refuse(memory_dir, code=code)
        before = memory_files()
        for said in ("tea?", "green, please"):
            assert (await gw.ask(said)).text == f"re: {said}"
        await wait_until(lambda: saves() == 1 and not gw.runtime.consolidator.busy)
        assert memory_files() == before  # neither HISTORY.md, the day's log nor MEMORY.md
        assert writer.refusals

        # Still failing, and still inside the backoff: no new attempt, replies unaffected.
        assert (await gw.ask("still there?")).text == "re: still there?"
        assert saves() == 1

        writer.clear()
        clock.now += 31  # past the first backoff
        assert (await gw.ask("and now?")).text == "re: and now?"
        await wait_until(lambda: saves() == 2 and not gw.runtime.consolidator.busy)

    history = (memory_dir / "HISTORY.md").read_text(encoding="utf-8")
    [entry] = split_entries(history)
    assert f"(test:1) {HISTORY_ENTRY} <!-- test:1 #" in entry
    assert history.endswith("\n\n")
    assert (memory_dir / "MEMORY.md").read_text(encoding="utf-8") == updated_memory
    records = file_lines(session_path(config, "test:1"))
    [consolidation] = [r for r in records if r.get("type") == "consolidation"]
    assert consolidation["mode"] == "llm"
    report = audit_sessions(config.workspace / "sessions")
    assert report.ok, report.problems
    assert report.covered == consolidation["to_seq"] - consolidation["from_seq"] + 1


async def test_a_failed_delivery_record_does_not_stop_later_replies(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """The reply went out but its delivery record cannot be written: later replies still go."""
    fake_llm.handler = echo
    writer = RefusingWriter()
    config = make_config(tmp_path, model_config(fake_llm))
    path = session_path(config, "test:1")
    async with Harness(config, writer=writer) as gw:
        sent = asyncio.Event()
        original = gw.channel.send

        async def send_then_fill(message: OutboundMessage) -> None:
            await original(message)
            writer.refuse(path)  # the disk fills between the send and its record
            sent.set()

        gw.channel.send = send_then_fill  # type: ignore[method-assign]
        first = await gw.ask("one")
        await sent.wait()
        gw.channel.send = original  # type: ignore[method-assign]
        await gw.runtime.sessions.sync(await gw.runtime.sessions.get("test:1"))
        writer.clear()
        second = await gw.ask("two")

    assert (first.text, second.text) == ("re: one", "re: two")
    statuses = [r["status"] for r in file_lines(path) if r.get("type") == "delivery"]
    assert statuses == ["sent"]  # the first record was refused; the file stayed whole

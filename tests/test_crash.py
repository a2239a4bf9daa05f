"""kill -9 of the real `clawgate gateway` process: nothing lost, nothing answered twice.

Three chats talk to the gateway through FakeTelegram; FakeLLM answers "re: <text>" and, for
consolidation requests (those offering save_memory), a summary and a grown MEMORY.md. With
memory_window = 6 consolidation runs every few turns. The process is killed once while
updates are handed out but unanswered (every model call hangs), once while consolidations
are held at the model, then run to completion and stopped gracefully. Each start pays
litellm's import (6-7 s), so there are three gateway starts.

`CrashWorld` is shared with bench/soak.py, which does the same 50+ times at random moments.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.session import Consolidation, load_session, read_key
from clawgate.channels.telegram.journal import InboundJournal
from clawgate.gateway.cli.memory import split_entries
from tests.fakes.llm import FakeLLM, Reply, hang, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.process import ClawgateProcess, fake_model, fake_telegram, run_clawgate, write_config

OWNER = 1001
CHATS = (1001, 1002, 1003)
MEMORY_WINDOW = 6
READY = "channel telegram ready"
START_TIMEOUT = 30.0
MODEL_TIMEOUT = 60.0  # litellm's import on the first call, on a loaded machine
EXIT_TIMEOUT = 25.0
HISTORY_ENTRY = re.compile(
    r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] \(telegram:(\d+)\) Summary of \d+ lines\. "
    r"<!-- telegram:\1 #\d+-\d+ -->",
    re.S,
)
CHAT_ENTRY = re.compile(
    r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] said in telegram_(\d+) by [^\n]*: "
    r"<!-- telegram:\1 #\d+-\d+ -->\n> Summary of \d+ lines\."
)
FACT = re.compile(r"- fact about telegram:\d+ \(\d+ lines\)")


def last_user(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"])


def is_consolidation(body: dict[str, Any]) -> bool:
    return any(t["function"]["name"] == "save_memory" for t in body.get("tools") or [])


def save_memory(body: dict[str, Any]) -> Reply:
    """A well-formed consolidation answer; owners' MEMORY.md grows by one fact line."""
    excerpt = last_user(body)
    key = re.search(r"## Conversation excerpt \((telegram:\d+)\)", excerpt)
    lines = excerpt.count("\n")
    arguments = {"history_entry": f"Summary of {lines} lines."}
    if "## Current MEMORY.md\n\n" in excerpt:
        current = excerpt.split("## Current MEMORY.md\n\n", 1)[1]
        current = current.split("\n\n## Conversation excerpt", 1)[0]
        current = "" if current == "(empty)" else current
        name = key.group(1) if key else "?"
        fact = f"- fact about {name} ({lines} lines)\n"
        arguments["memory_update"] = f"{current.rstrip()}\n{fact}" if current.strip() else fact
    return tool_call("save_memory", **arguments)


@dataclass(frozen=True)
class Sent:
    chat: int
    update_id: int
    message_id: int
    text: str

    @property
    def key(self) -> str:
        """What the gateway stores as the user message's message_id."""
        return f"{self.update_id}:{self.message_id}"


@dataclass
class Tally:
    sent: int = 0
    handed_out: int = 0
    answered_once: int = 0
    answered_twice: int = 0
    unanswered: int = 0
    unexpected_replies: int = 0
    missing_from_session: int = 0
    stored_twice: int = 0
    unreadable_files: int = 0
    audit_problems: list[str] = field(default_factory=list)
    consolidations: int = 0
    history_entries: int = 0
    bad_history_entries: int = 0
    memory_ok: bool = True
    journal_pending: int = 0
    doubled: list[str] = field(default_factory=list)  # texts answered more than once
    # Of those, how many were one stored reply sent twice (killed after Telegram took it,
    # before the gateway recorded it) rather than a turn run twice.
    resent: int = 0
    # Replies at most once: a kill while a reply's send is under way leaves it stored, its
    # update marked answered, and never sent again (it might have arrived). Not counted as
    # unanswered; the turn did run and the reply is in the session.
    lost_in_send: int = 0
    unanswered_texts: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, Any]:
        """Everything that must be zero (or true) after a final graceful run."""
        checks = {
            "answered twice": self.answered_twice,
            "unanswered": self.unanswered,
            "unexpected replies": self.unexpected_replies,
            "missing from session": self.missing_from_session,
            "stored twice": self.stored_twice,
            "unreadable session files": self.unreadable_files,
            "audit problems": len(self.audit_problems),
            "malformed HISTORY entries": self.bad_history_entries,
            "MEMORY.md damaged": int(not self.memory_ok),
            "journal still pending": self.journal_pending,
            "handed out but not sent?": self.sent - self.handed_out,
        }
        return {name: value for name, value in checks.items() if value}


class CrashWorld:
    """One home (config, workspace, data_dir), its fakes, and what the test said and saw."""

    def __init__(
        self,
        home: Path,
        telegram: FakeTelegram,
        llm: FakeLLM,
        *,
        chats: tuple[int, ...] = CHATS,
        memory_window: int = MEMORY_WINDOW,
    ) -> None:
        self.home = home
        self.telegram = telegram
        self.llm = llm
        self.chats = chats
        self.hold_turns = False  # every chat turn hangs at the model
        self.hold_saves = False  # every consolidation hangs at the model
        self.sent: list[Sent] = []
        llm.handler = self._model
        agent = {**fake_model(llm, request_timeout=60), "memory_window": memory_window}
        self.config = write_config(
            home,
            # The per-sender flood limit is not under test here; the soak sends far faster
            # than a person (and a restart replays the backlog at once).
            extra="[limits]\nmessages_per_minute = 0",
            agent=agent,
            telegram=fake_telegram(telegram, chats, owners=[str(chats[0])]),
        )
        self.workspace = home / "workspace"
        self.template_memory = ""

    def _model(self, body: dict[str, Any]) -> Reply:
        if is_consolidation(body):
            return hang() if self.hold_saves else save_memory(body)
        return hang() if self.hold_turns else text(f"re: {last_user(body)}")

    def gateway(self) -> ClawgateProcess:
        return ClawgateProcess(self.home, "--config", str(self.config), "gateway")

    def say(self, chat: int, said: str) -> Sent:
        update_id = self.telegram.user_says(chat, said)
        update = self.telegram.updates[-1]
        assert update["update_id"] == update_id
        sent = Sent(chat, update_id, update["message"]["message_id"], said)
        self.sent.append(sent)
        return sent

    def saves(self) -> int:
        return sum(map(is_consolidation, self.llm.requests))

    def chat_requests(self) -> int:
        return len(self.llm.requests) - self.saves()

    def replies(self) -> Counter[str]:
        return Counter(m["text"] for m in self.telegram.sent)

    def answered(self, sent: Sent) -> bool:
        return self.replies()[f"re: {sent.text}"] > 0

    def all_answered(self) -> bool:
        replies = self.replies()
        return all(replies[f"re: {s.text}"] for s in self.sent)

    def all_handed_out(self) -> bool:
        return self.telegram.confirmed_offset > max((s.update_id for s in self.sent), default=0)

    async def check(self) -> Tally:
        """Count what a crash could have broken (see Tally.problems)."""
        tally = Tally(sent=len(self.sent))
        handed = set(self.telegram.handed_out)
        tally.handed_out = sum(1 for s in self.sent if s.update_id in handed)
        replies = self.replies()
        expected = {f"re: {s.text}" for s in self.sent}
        for sent in self.sent:
            count = replies[f"re: {sent.text}"]
            tally.answered_once += count == 1
            tally.answered_twice += count > 1
            if count > 1:
                tally.doubled.append(sent.text)
            if count == 0:
                tally.unanswered_texts.append(sent.text)
        tally.unexpected_replies = sum(n for t, n in replies.items() if t not in expected)

        stored: Counter[str] = Counter()
        replies_stored: Counter[str] = Counter()
        sessions = self.workspace / "sessions"
        for path in [*sessions.glob("*.jsonl"), *sessions.glob("archive/*.jsonl")]:
            try:
                for line in path.read_bytes().decode("utf-8").splitlines():
                    json.loads(line)
                session = load_session(path, read_key(path) or path.stem)
            except ValueError:
                tally.unreadable_files += 1
                continue
            stored.update(
                str(m.message_id) for m in session.messages if m.role == "user" and m.message_id
            )
            replies_stored.update(str(m.content) for m in session.messages if m.role == "assistant")
            tally.consolidations += sum(1 for _ in session.records_of(Consolidation))
        tally.resent = sum(1 for t in tally.doubled if replies_stored[f"re: {t}"] == 1)
        tally.lost_in_send = sum(1 for t in tally.unanswered_texts if replies_stored[f"re: {t}"])
        tally.unanswered = len(tally.unanswered_texts) - tally.lost_in_send
        tally.missing_from_session = sum(1 for s in self.sent if stored[s.key] == 0)
        tally.stored_twice = sum(1 for s in self.sent if stored[s.key] > 1)
        tally.audit_problems = audit_sessions(sessions).problems

        memory = self.workspace / "memory"
        history_path = memory / "HISTORY.md"
        history = history_path.read_text(encoding="utf-8") if history_path.exists() else ""
        # Non-owner chats' consolidations land in their own notes, memory/chats/<chat>/.
        notes = [p.read_text(encoding="utf-8") for p in memory.glob("chats/*/HISTORY.md")]
        entries = [e for text in (history, *notes) for e in split_entries(text)]
        tally.history_entries = len(entries)
        tally.bad_history_entries = sum(
            1 for e in entries if not (HISTORY_ENTRY.fullmatch(e) or CHAT_ENTRY.fullmatch(e))
        )
        tally.bad_history_entries += sum(
            1 for text in (history, *notes) if text and not text.endswith("\n\n")
        )
        memory_path = memory / "MEMORY.md"
        current = memory_path.read_text(encoding="utf-8") if memory_path.exists() else ""
        added = current[len(self.template_memory.rstrip()) :].strip().splitlines()
        tally.memory_ok = (
            (current == "" or current.endswith("\n"))
            and current.startswith(self.template_memory.rstrip())
            and all(FACT.fullmatch(line) for line in added)
        )
        journal = InboundJournal(self.home / "data" / "channels" / "telegram" / "journal.jsonl")
        tally.journal_pending = len(await journal.load())
        return tally

    async def journal_settled(self, timeout: float) -> None:
        """Wait until the gateway's journal holds no unanswered update."""
        path = self.home / "data" / "channels" / "telegram" / "journal.jsonl"
        async with asyncio.timeout(timeout):
            while await InboundJournal(path).load():  # noqa: ASYNC110 - another process writes it
                await asyncio.sleep(0.05)

    def remember_template(self) -> None:
        """MEMORY.md as onboarding left it: everything later must extend it line by line."""
        path = self.workspace / "memory" / "MEMORY.md"
        self.template_memory = path.read_text("utf-8") if path.exists() else ""


async def kill(gateway: ClawgateProcess) -> None:
    gateway.send_signal(signal.SIGKILL)
    assert await gateway.wait(EXIT_TIMEOUT) == -signal.SIGKILL


async def test_kill_9_mid_turn_and_mid_consolidation_loses_and_doubles_nothing(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    world = CrashWorld(tmp_path, telegram, fake_llm)
    stderr = []

    # Run 1: two answered turns per chat, then every model call hangs and it dies with
    # updates handed out and confirmed but unanswered.
    async with world.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        world.remember_template()
        for round_ in range(2):
            for chat in CHATS:
                world.say(chat, f"{chat} warm-up {round_}")
            await wait_until(world.all_answered, timeout=MODEL_TIMEOUT)
        world.hold_turns = True
        held = [world.say(chat, f"{chat} held {n}") for n in range(2) for chat in CHATS]
        # Each chat's first held message is at the model, its second queued behind it.
        await fake_llm.wait_for_requests(world.chat_requests() + len(CHATS), timeout=20)
        await wait_until(world.all_handed_out, timeout=10)
        assert not any(world.answered(s) for s in held)
        await kill(gateway)
        stderr.append(gateway.stderr)

    # Run 2: the journal replays the held updates; their turns finish and start a
    # consolidation per chat, which hangs at the model: it dies with all three in flight.
    world.hold_turns, world.hold_saves = False, True
    saves_before = world.saves()
    async with world.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await wait_until(world.all_answered, timeout=MODEL_TIMEOUT)
        await wait_until(lambda: world.saves() >= saves_before + len(CHATS), timeout=20)
        late = [world.say(chat, f"{chat} during consolidation") for chat in CHATS]
        await wait_until(world.all_answered, timeout=20)
        # Killed once those sends completed (journaled as answered), not between Telegram
        # taking a reply and the gateway recording it: see bench/soak.py for that window.
        await world.journal_settled(timeout=10)
        assert (tmp_path / "workspace" / "memory" / "HISTORY.md").exists() is False
        await kill(gateway)
        stderr.append(gateway.stderr)
    assert all(world.answered(s) for s in late)

    # Run 3: consolidation works again; one more message per chat, then a graceful stop.
    world.hold_saves = False
    async with world.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        for chat in CHATS:
            world.say(chat, f"{chat} after the crashes")
        await wait_until(world.all_answered, timeout=MODEL_TIMEOUT)
        await wait_until(lambda: consolidated_chats(world) == set(CHATS), timeout=20)
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr
        stderr.append(gateway.stderr)

    tally = await world.check()
    assert tally.problems() == {}, tally
    assert tally.answered_once == tally.sent == len(CHATS) * 6
    # Killed while every consolidation was at the model: nothing was half-written, so each
    # HISTORY.md entry has exactly one consolidation record.
    assert tally.history_entries == tally.consolidations >= len(CHATS)
    memory = (tmp_path / "workspace" / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert "- fact about telegram:1001" in memory
    assert "telegram:1002" not in memory  # not an owner: its memory_update is never asked for
    # `clawgate memory audit` exits 1 on anything unaccounted.
    code, output = await run_clawgate(tmp_path, "--config", str(world.config), "memory", "audit")
    assert code == 0, output
    assert "Traceback" not in "".join(stderr)


def consolidated_chats(world: CrashWorld) -> set[int]:
    found = set()
    for chat in world.chats:
        path = world.workspace / "sessions" / f"telegram_{chat}.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if any('"type":"consolidation"' in line for line in lines):
            found.add(chat)
    return found

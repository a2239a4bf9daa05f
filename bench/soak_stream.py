"""bench/soak.py's streaming lanes (issue #34): replies that stream into Telegram and into
Discord while the real `clawgate gateway` is killed with kill -9 in the middle of them.

Each platform has its own home, fake and FakeLLM; the model writes every reply a word at a
time (DRIP_SECONDS a word, WORDS words), so a reply streams for several seconds. A round
starts the gateway (`streaming = "edit"`, reactions on) and sends one note from each chat
(the owner's DM and a group: Telegram's allowed group, Discord's #general); once both chats
show their live replies it kills the gateway -9 0-3 s later or, one round in four, lets the
replies finish and stops it with SIGTERM. A last graceful run marks what the kills cut (at
its start) and answers one more note per chat.

Tally per note: lost (no message shows it), twice (two messages show it), finished (its
message holds the whole reply), marked (cut: what showed, then the cut line), and anything
else left partial; standalone cut lines (a kill after the stream opened, before its first
post was noted) are counted apart. Figures: edits per reply, and the time from the model's
first token (the moment the model began its answer: its first word goes out at once) to
the first visible text, on every reply that showed.
"""

from __future__ import annotations

import asyncio
import random
import re
import signal
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgate.channels.live import CUT_LINE
from tests.discord_world import GatewayHome
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, drip, text
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

DRIP_SECONDS = 0.05
WORDS = 90
START_TIMEOUT = 60.0
SHOW_TIMEOUT = 60.0  # litellm's import on a loaded machine, then the first second
FINISH_TIMEOUT = 90.0
OWNER_CHAT = 1001
GROUP_CHAT = -100500
NOTE = re.compile(r"note-[\w-]+")


def full_reply(note: str) -> str:
    return f"re: {note} " + " ".join(f"w{n}" for n in range(WORDS))


@dataclass
class StreamTally:
    platform: str
    rounds: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    notes: int = 0
    finished: int = 0
    marked: int = 0
    partial: int = 0
    lost: int = 0
    twice: int = 0
    cut_notices: int = 0
    asked_again: int = 0  # notes the model was asked for twice (killed before any showed)
    edits: list[int] = field(default_factory=list)  # per reply
    first_visible: list[float] = field(default_factory=list)  # seconds, per reply

    def problems(self) -> dict[str, int]:
        return {"lost": self.lost, "twice": self.twice, "left partial": self.partial}


class _Model:
    """Answers "re: <note> w0 w1 ..." for the last note it is sent, dripped; notes when the
    model began each answer."""

    def __init__(self) -> None:
        self.began: dict[str, float] = {}
        self.asked: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> Reply:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        notes = NOTE.findall(str(users[-1]["content"])) if users else []
        note = notes[-1] if notes else "note-unknown"
        self.asked[note] += 1
        self.began.setdefault(note, time.monotonic())
        return drip(DRIP_SECONDS, text(full_reply(note)))


@dataclass(frozen=True)
class Shown:
    """A message the bot sent, as it shows now."""

    key: Any
    text: str
    posted_at: float
    edits: int


class _TelegramSide:
    ready = "channel telegram ready"

    def __init__(self, home: Path, fake: FakeTelegram, llm: FakeLLM) -> None:
        self.fake = fake
        self.chats = [OWNER_CHAT, GROUP_CHAT]
        self.config = write_config(
            home,
            agent={**fake_model(llm, request_timeout=60), "memory_window": 1000},
            telegram=fake_telegram(
                fake,
                [OWNER_CHAT],
                streaming="edit",
                reactions=True,
                group_allow=[str(GROUP_CHAT)],
            ),
            extra="[limits]\nmessages_per_minute = 0",
        )

    async def say(self, chat: Any, note: str) -> None:
        if chat == GROUP_CHAT:
            self.fake.user_says(chat, f"@{BOT_USERNAME} {note}", chat_type="supergroup")
        else:
            self.fake.user_says(chat, note)

    def shown(self) -> list[Shown]:
        edits = Counter((e["chat_id"], e["message_id"]) for e in self.fake.edits)
        found = []
        for sent in self.fake.sent:
            key = (sent["chat_id"], sent["message_id"])
            found.append(Shown(key, self.fake.text_of(*key), self.fake.posted_at[key], edits[key]))
        return found


class _DiscordSide:
    ready = "channel discord ready"

    def __init__(self, home: Path, fake: FakeDiscord, llm: FakeLLM) -> None:
        self.fake = fake
        self.world = GatewayHome(home, fake, llm, streaming="edit", reactions=True)
        self.chats = [self.world.owner_dm, self.world.general]
        self.config = self.world.config

    async def say(self, chat: Any, note: str) -> None:
        await self.world.say(chat, note)

    def shown(self) -> list[Shown]:
        edits = Counter(e["id"] for e in self.fake.edits)
        return [
            Shown(
                m.id,
                self.fake.content_of(m.channel_id, m.id),
                self.fake.posted_at[m.id],
                edits[m.id],
            )
            for m in self.fake.sent
        ]


async def _until(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _showing(side: _TelegramSide | _DiscordSide, note: str) -> list[Shown]:
    return [s for s in side.shown() if note in s.text]


async def _round(
    side: _TelegramSide | _DiscordSide,
    tally: StreamTally,
    rng: random.Random,
    notes: list[str],
    graceful: bool,
) -> None:
    async with ClawgateProcess(
        side.config.parent, "--config", str(side.config), "gateway"
    ) as gateway:
        await gateway.wait_for_log(side.ready, START_TIMEOUT)
        for chat, note in zip(side.chats, notes, strict=True):
            await side.say(chat, note)
        await _until(lambda: all(_showing(side, n) for n in notes), SHOW_TIMEOUT)
        if graceful:
            await _until(
                lambda: all(any(s.text == full_reply(n) for s in _showing(side, n)) for n in notes),
                FINISH_TIMEOUT,
            )
            gateway.send_signal(signal.SIGTERM)
            tally.modes["sigterm"] += 1
        else:
            await asyncio.sleep(rng.uniform(0.0, 3.0))
            gateway.send_signal(signal.SIGKILL)
            tally.modes["kill -9"] += 1
        await gateway.wait(60)
    tally.rounds += 1


def _account(
    side: _TelegramSide | _DiscordSide, model: _Model, sent: list[str], tally: StreamTally
) -> None:
    shown = side.shown()
    tally.notes = len(sent)
    tally.cut_notices = sum(1 for s in shown if s.text == CUT_LINE)
    tally.asked_again = sum(1 for n in sent if model.asked[n] > 1)
    for note in sent:
        mine = [s for s in shown if note in s.text]
        if not mine:
            tally.lost += 1
            continue
        if len(mine) > 1:
            tally.twice += 1
        first = min(mine, key=lambda s: s.posted_at)
        if note in model.began:
            tally.first_visible.append(first.posted_at - model.began[note])
        tally.edits.extend(s.edits for s in mine)
        if any(s.text == full_reply(note) for s in mine):
            tally.finished += 1
        elif all(s.text.endswith(CUT_LINE) for s in mine):
            tally.marked += 1
        else:
            tally.partial += 1


async def run_stream_lane(
    platform: str, rounds: int, seed: int, deadline: float, base: Path
) -> StreamTally:
    """`rounds` rounds (fewer once `deadline`, a time.monotonic(), has passed), then the
    graceful run and the tally."""
    rng = random.Random(f"{seed}-stream-{platform}")
    tally = StreamTally(platform)
    home = base / f"stream-{platform}"
    home.mkdir(parents=True)
    model = _Model()
    sent: list[str] = []
    async with FakeLLM() as llm:
        fake_server: Any = FakeTelegram() if platform == "telegram" else FakeDiscord()
        async with fake_server as fake:
            side = (
                _TelegramSide(home, fake, llm)
                if platform == "telegram"
                else _DiscordSide(home, fake, llm)
            )
            llm.handler = model  # after the side: GatewayHome sets its own
            for number in range(rounds + 1):
                last = number == rounds or time.monotonic() > deadline
                notes = [f"note-{platform}-{number}-{c}" for c in range(len(side.chats))]
                sent.extend(notes)
                await _round(side, tally, rng, notes, graceful=last or rng.random() < 0.25)
                if last:
                    break
            _account(side, model, sent, tally)
    return tally


def _spread(values: list[float], unit: str, digits: int = 2) -> str:
    if not values:
        return "none"
    return (
        f"min {min(values):.{digits}f}{unit}, median {statistics.median(values):.{digits}f}{unit}, "
        f"max {max(values):.{digits}f}{unit} ({len(values)} replies)"
    )


def report_stream(tally: StreamTally) -> bool:
    print(f"streaming lane ({tally.platform}): {tally.rounds} gateway runs, {dict(tally.modes)}")
    print(
        f"  notes {tally.notes}: finished {tally.finished}, marked cut {tally.marked}, "
        f"left partial {tally.partial}, lost {tally.lost}, answered twice {tally.twice}; "
        f"standalone cut lines {tally.cut_notices}; asked the model again {tally.asked_again}"
    )
    print(f"  edits per reply: {_spread([float(e) for e in tally.edits], '', 0)}")
    print(f"  first token -> first visible text: {_spread(tally.first_visible, ' s')}")
    failed = any(tally.problems().values())
    print("  RESULT:", "FAIL" if failed else "ok")
    return not failed

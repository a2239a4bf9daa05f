"""bench/soak.py's Discord lane: stop the real `clawgate gateway` during long turns with
messages queued behind them, again and again, then account.

One home (tests/discord_world.py `GatewayHome`: the owner's DM and a guild channel on
FakeDiscord, FakeLLM answering "re: <note>"). Each round starts the gateway, and:

  kill-9 held     every chat turn hangs at the model; a note in each chat starts a turn,
                  more queue behind them; once the channel has passed every one on
                  (watermarks), kill -9
  sigterm held    the same, then SIGTERM: the daemon's grace runs out on the held turns
                  and it exits with the queue still full
  kill-9 random   turns take 0.2-1 s; notes stream in; kill -9 0-15 s after ready (some land
                  mid-turn, some mid-send)

Between rounds, while the gateway is down, a few notes more and up to 250 messages of
chatter (not addressed to the bot) go into #general, so catch-up has pages to read. Then one
graceful run answers what is left, and the tally: every note answered exactly once (a reply
stored but cut off in its send by a kill counts apart: at most once), nothing pending in
the journal.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from clawgate.channels.journal import Journal
from tests.discord_world import READY, GatewayHome
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM

MODES = ("kill-9 held", "sigterm held", "kill-9 random")
START_TIMEOUT = 60.0
HOLD_TIMEOUT = 40.0
STOP_TIMEOUT = 60.0  # SIGTERM waits out the daemon's 20 s grace on the held turns
FINAL_TIMEOUT = 180.0
CHATTER = "someone else's conversation"


@dataclass
class DiscordTally:
    stops: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    answered_once: int = 0
    answered_twice: int = 0
    lost: int = 0
    lost_in_send: int = 0
    unexpected_replies: int = 0
    journal_pending: int = 0
    tracebacks: int = 0
    final_exit: int | None = None
    problems_seen: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, int]:
        checks = {
            "answered twice": self.answered_twice,
            "lost": self.lost,
            "unexpected replies": self.unexpected_replies,
            "journal still pending": self.journal_pending,
            "final exit not 0": int(self.final_exit != 0),
        }
        return {name: value for name, value in checks.items() if value}


async def wait_for(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    try:
        async with asyncio.timeout(timeout):
            while not predicate():  # noqa: ASYNC110 - polling fakes owned by this loop
                await asyncio.sleep(0.02)
    except TimeoutError:
        return False
    return True


def all_passed_on(home: GatewayHome) -> bool:
    """The channel has passed every note on (journaled, then its watermark moved)."""
    last: dict[str, int] = {}
    for said in home.said:
        last[said.chat] = max(last.get(said.chat, 0), said.message_id)
    return all(home.watermark(chat) >= message_id for chat, message_id in last.items())


async def while_down(home: GatewayHome, rng: random.Random, round_: int) -> None:
    for n in range(rng.randint(0, 250)):
        await home.fake.user_says(
            home.general, f"{CHATTER} {n}", author_id="310000000000000009", username="cy"
        )
    for n in range(rng.randint(0, 2)):
        await home.say(rng.choice((home.owner_dm, home.general)), f"note-{round_}-down-{n}")


async def one_round(home: GatewayHome, tally: DiscordTally, rng: random.Random, round_: int) -> str:
    mode = rng.choice(MODES)
    tally.modes[mode] += 1
    held = mode.endswith("held")
    home.hold, home.slow = held, 0.0 if held else rng.uniform(0.2, 1.0)
    chats = (home.owner_dm, home.general)
    requests = len(home.llm.requests)
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        if held:
            for chat in chats:  # a long turn in each chat
                await home.say(chat, f"note-{round_}-{chat[-4:]}-first")
            await wait_for(lambda: len(home.llm.requests) >= requests + 1, HOLD_TIMEOUT)
            for n in range(rng.randint(2, 5)):
                await home.say(rng.choice(chats), f"note-{round_}-queued-{n}")
            await wait_for(lambda: all_passed_on(home), HOLD_TIMEOUT)
            await asyncio.sleep(rng.uniform(0.0, 0.5))
        else:
            stop_at = time.monotonic() + rng.uniform(0.0, 15.0)
            n = 0
            while time.monotonic() < stop_at:
                await home.say(rng.choice(chats), f"note-{round_}-stream-{n}")
                n += 1
                await asyncio.sleep(rng.uniform(0.05, 0.6))
        stop = signal.SIGTERM if mode.startswith("sigterm") else signal.SIGKILL
        gateway.send_signal(stop)
        code = await gateway.wait(STOP_TIMEOUT)
        if stop == signal.SIGTERM and code != 0:
            tally.problems_seen.append(f"round {round_}: SIGTERM exit {code}")
        tally.tracebacks += gateway.stderr.count("Traceback")
    tally.stops += 1
    return mode


async def run_discord_lane(stops: int, seed: int, deadline: float, base: Path) -> DiscordTally:
    """`stops` rounds (or until `deadline`), then the graceful run and the tally."""
    tally = DiscordTally()
    rng = random.Random(seed * 1000 + 999)
    home_dir = base / "discord"
    home_dir.mkdir()
    async with FakeDiscord() as fake, FakeLLM() as llm:
        home = GatewayHome(home_dir, fake, llm)
        for round_ in range(stops):
            if time.monotonic() > deadline:
                print(f"discord: time budget reached after {tally.stops} stops", flush=True)
                break
            started = time.monotonic()
            mode = await one_round(home, tally, rng, round_)
            answered = home.answered()
            waiting = sum(1 for s in home.said if not answered[s.note])
            print(
                f"discord stop {tally.stops:2d}: {mode:13s} round of {time.monotonic() - started:5.1f} s; "
                f"{len(home.said)} notes said, {waiting} not answered yet",
                flush=True,
            )
            await while_down(home, rng, round_)
        home.hold, home.slow = False, 0.0
        async with home.gateway() as gateway:
            await gateway.wait_for_log(READY, START_TIMEOUT)
            await wait_for(home.all_answered, FINAL_TIMEOUT)
            await asyncio.sleep(1.0)  # room for a late duplicate to show
            gateway.send_signal(signal.SIGTERM)
            tally.final_exit = await gateway.wait(STOP_TIMEOUT)
            tally.tracebacks += gateway.stderr.count("Traceback")
        await account(home, tally)
    return tally


async def account(home: GatewayHome, tally: DiscordTally) -> None:
    answered = home.answered()
    notes = {s.note for s in home.said}
    sessions = home.home / "workspace" / "sessions"
    stored = "".join(p.read_text(encoding="utf-8") for p in sessions.glob("discord_*.jsonl"))
    tally.sent = len(home.said)
    for said in home.said:
        count = answered[said.note]
        if count == 1:
            tally.answered_once += 1
        elif count > 1:
            tally.answered_twice += 1
            tally.problems_seen.append(f"{said.note} answered {count} times")
        elif f"re: {said.note}" in stored:
            tally.lost_in_send += 1
        else:
            tally.lost += 1
            tally.problems_seen.append(f"{said.note} never answered")
    tally.unexpected_replies = sum(n for note, n in answered.items() if note not in notes)
    journal = Journal(home.home / "data" / "channels" / "discord" / "journal.jsonl", id_field="id")
    tally.journal_pending = len(await journal.load())


def report_discord(tally: DiscordTally) -> bool:
    print()
    print(f"Discord lane: {tally.stops} stops  modes: {dict(tally.modes)}")
    print(f"notes sent by users (DM and #general mentions): {tally.sent}")
    print(f"answered exactly once:            {tally.answered_once}")
    print(f"answered twice or more:           {tally.answered_twice}   (must be 0)")
    print(f"lost (never answered):            {tally.lost}   (must be 0)")
    print(
        f"  reply stored, its send cut by a kill (at most once: not re-sent): {tally.lost_in_send}"
    )
    print(f"replies nobody asked for:         {tally.unexpected_replies}   (must be 0)")
    print(f"journal entries still pending:    {tally.journal_pending}   (must be 0)")
    print(f"tracebacks on stderr:             {tally.tracebacks}")
    print(f"final graceful exit:              {tally.final_exit}")
    for problem in tally.problems_seen[:10]:
        print(f"    {problem}")
    failed = bool(tally.problems())
    print("DISCORD RESULT:", "FAIL" if failed else "ok")
    return not failed

"""bench/soak.py's lanes for /stop and replayed commands (issue #24 items 1 and 8), each on
its own home with FakeTelegram and FakeLLM, the real `clawgate gateway` stopped again and again:

  stop        every chat turn hangs at the model. Each round sends 2-4 notes (the first, or a
              note replayed from the last round, starts a turn; the rest queue behind it),
              then /stop; once "Stopped." is out and the next queued turn runs, SIGTERM (its
              grace runs out on the held turn) or kill -9.
  double new  the reply to a note meets a 429 with a minute's retry_after, so the chat's
              replies queue behind it; /new, /new and a note whose reply is stored follow,
              then kill -9. The next start replays both /new and the note.

Then one graceful run answers what is left, and the tally. Stop lane: each note answered
exactly once or stopped (a `stopped` record in its session) exactly once, never both, never
neither; no more "Stopped." than /stop. Double-new lane: no /new runs twice (as many archives
as /new sent, no "New session started." sent twice), each live note answered once (the one
whose send a 429 held and a kill cut is counted apart: at most once). Both: nothing pending
in the journal, `clawgate memory audit` clean.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clawgate.channels.journal import Journal
from tests.fakes.llm import FakeLLM, Reply, hang, text
from tests.fakes.telegram import FakeTelegram
from tests.memory_helpers import is_consolidation, save
from tests.process import ClawgateProcess, fake_model, fake_telegram, run_clawgate, write_config

OWNER = 1001
READY = "channel telegram ready"
START_TIMEOUT = 60.0
STEP_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
FINAL_TIMEOUT = 180.0
NOTE = re.compile(r"note-[\w-]+")
NEW_NOTICE = "New session started."


@dataclass
class StopTally:
    lane: str
    rounds: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    answered_once: int = 0
    stopped: int = 0
    answered_twice: int = 0  # answered more than once, or answered and stopped
    lost: int = 0
    lost_in_send: int = 0  # stored reply, its send held by a 429 and cut by a kill
    commands_sent: int = 0
    command_replies: int = 0  # "Stopped." or "New session started." sent
    commands_run_twice: int = 0
    journal_pending: int = 0
    audit_exit: int | None = None
    final_exit: int | None = None
    tracebacks: int = 0
    problems_seen: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, int]:
        checks = {
            "answered twice": self.answered_twice,
            "lost": self.lost,
            "commands run twice": self.commands_run_twice,
            "journal still pending": self.journal_pending,
            "audit not clean": int(self.audit_exit != 0),
            "final exit not 0": int(self.final_exit != 0),
        }
        return {name: value for name, value in checks.items() if value}


class Home:
    """One gateway home: the owner's chat on FakeTelegram, FakeLLM answering "re: <note>"
    (hanging while `hold`), consolidations saved."""

    def __init__(self, path: Path, telegram: FakeTelegram, llm: FakeLLM) -> None:
        self.path = path
        self.telegram = telegram
        self.hold = False
        self.turns = 0  # chat requests the model received
        llm.handler = self._model
        self.config = write_config(
            path,
            agent={**fake_model(llm, request_timeout=60), "shutdown_grace_seconds": 3},
            telegram=fake_telegram(telegram, [OWNER]),
            # Not under test: the flood limit (a restart replays a backlog at once).
            extra="[limits]\nmessages_per_minute = 0",
        )
        self.sessions = path / "workspace" / "sessions"

    def _model(self, body: dict[str, Any]) -> Reply:
        if is_consolidation(body):
            return save("Ann talked.")
        self.turns += 1
        users = [m for m in body["messages"] if m.get("role") == "user"]
        notes = NOTE.findall(str(users[-1]["content"])) if users else []
        return hang() if self.hold else text(f"re: {notes[-1]}" if notes else "re: ?")

    def gateway(self) -> ClawgateProcess:
        return ClawgateProcess(self.path, "--config", str(self.config), "gateway")

    def sent(self) -> list[str]:
        return [m["text"] for m in self.telegram.messages_to(OWNER)]

    def archives(self) -> int:
        return len(list((self.sessions / "archive").glob("*.jsonl")))

    def lines(self) -> list[dict[str, Any]]:
        """Every line of the chat's transcripts, archived ones first."""
        paths = [*sorted((self.sessions / "archive").glob("*.jsonl"))]
        paths.append(self.sessions / f"telegram_{OWNER}.jsonl")
        found = []
        for path in paths:
            if path.exists():
                found += [_parse(x) for x in path.read_text(encoding="utf-8").splitlines()]
        return found

    async def finish(self, tally: StopTally, done: Any) -> None:
        """The graceful run: wait until `done()`, SIGTERM, then the journal and the audit."""
        self.hold = False
        async with self.gateway() as gateway:
            await gateway.wait_for_log(READY, START_TIMEOUT)
            await wait_for(done, FINAL_TIMEOUT)
            await asyncio.sleep(1.0)  # room for a late duplicate to show
            gateway.send_signal(signal.SIGTERM)
            tally.final_exit = await gateway.wait(STOP_TIMEOUT)
            tally.tracebacks += gateway.stderr.count("Traceback")
        journal = Journal(self.path / "data" / "channels" / "telegram" / "journal.jsonl")
        tally.journal_pending = len(await journal.load())
        tally.audit_exit, _ = await run_clawgate(
            self.path, "--config", str(self.config), "memory", "audit"
        )


def _parse(line: str) -> dict[str, Any]:
    try:
        parsed = json.loads(line)
    except ValueError:
        return {}  # a line a kill -9 tore: the store skips it too
    return parsed if isinstance(parsed, dict) else {}


async def wait_for(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    try:
        async with asyncio.timeout(timeout):
            while not predicate():  # noqa: ASYNC110 - polling fakes owned by this loop
                await asyncio.sleep(0.02)
    except TimeoutError:
        return False
    return True


# -- /stop with queued messages ----------------------------------------------------------------


async def stop_round(home: Home, tally: StopTally, rng: random.Random, round_: int) -> list[str]:
    notes = [f"note-{round_}-{n}" for n in range(rng.randint(2, 4))]
    mode = rng.choice(("sigterm", "kill-9"))
    tally.modes[mode] += 1
    home.hold = True
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        turns, stops = home.turns, home.sent().count("Stopped.")
        last = 0
        for note in notes:
            last = home.telegram.user_says(OWNER, note)
        await wait_for(lambda: home.turns > turns, STEP_TIMEOUT)
        await wait_for(lambda: home.telegram.confirmed_offset > last, STEP_TIMEOUT)
        home.telegram.user_says(OWNER, "/stop")
        tally.commands_sent += 1
        await wait_for(lambda: home.sent().count("Stopped.") > stops, STEP_TIMEOUT)
        await wait_for(lambda: home.turns > turns + 1, STEP_TIMEOUT)  # the next queued turn
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        gateway.send_signal(signal.SIGTERM if mode == "sigterm" else signal.SIGKILL)
        code = await gateway.wait(STOP_TIMEOUT)
        if mode == "sigterm" and code != 0:
            tally.problems_seen.append(f"round {round_}: SIGTERM exit {code}")
        tally.tracebacks += gateway.stderr.count("Traceback")
    tally.rounds += 1
    return notes


async def run_stop_lane(rounds: int, seed: int, deadline: float, base: Path) -> StopTally:
    tally = StopTally("stop")
    rng = random.Random(seed * 1000 + 501)
    (base / "stop").mkdir()
    notes: list[str] = []
    async with FakeTelegram() as telegram, FakeLLM() as llm:
        home = Home(base / "stop", telegram, llm)
        for round_ in range(rounds):
            if time.monotonic() > deadline:
                print(f"stop lane: time budget reached after {tally.rounds} rounds", flush=True)
                break
            notes += await stop_round(home, tally, rng, round_)
            print(f"stop lane round {tally.rounds:2d}: {len(notes)} notes said", flush=True)

        def settled() -> bool:
            answered, stopped = Counter(home.sent()), stopped_notes(home)
            return all(answered[f"re: {n}"] + stopped[n] for n in notes)

        await home.finish(tally, settled)
        answered, stopped = Counter(home.sent()), stopped_notes(home)
        tally.sent = len(notes)
        for note in notes:
            outcome = (answered[f"re: {note}"], stopped[note])
            if outcome == (1, 0):
                tally.answered_once += 1
            elif outcome == (0, 1):
                tally.stopped += 1
            elif outcome == (0, 0):
                tally.lost += 1
                tally.problems_seen.append(f"{note} neither answered nor stopped")
            else:
                tally.answered_twice += 1
                tally.problems_seen.append(f"{note}: answered {outcome[0]}, stopped {outcome[1]}")
        tally.command_replies = answered["Stopped."]
        tally.commands_run_twice = max(0, tally.command_replies - tally.commands_sent)
    return tally


def stopped_notes(home: Home) -> Counter[str]:
    """How often each note's turn was recorded as stopped."""
    lines = home.lines()
    by_id = {x["message_id"]: x["content"] for x in lines if x.get("role") == "user"}
    return Counter(by_id.get(x["message_id"], "?") for x in lines if x.get("type") == "stopped")


# -- a double /new under a rate-limit wait ------------------------------------------------------


async def double_new_round(home: Home, tally: StopTally, round_: int, live: list[str]) -> None:
    home.hold = False
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        if live:  # the last round's stored reply goes out before the next 429
            await wait_for(lambda: f"re: {live[-1]}" in home.sent(), STEP_TIMEOUT)
        home.telegram.fail_next("sendMessage", 429, "Too Many Requests: retry after 60", 60)
        home.telegram.user_says(OWNER, f"note-{round_}-held")
        await gateway.wait_for_log("retry 1 in 60 s", STEP_TIMEOUT)
        for _ in range(2):
            archives = home.archives()
            home.telegram.user_says(OWNER, "/new")
            tally.commands_sent += 1
            await wait_for(lambda: home.archives() > archives, STEP_TIMEOUT)  # noqa: B023
        note = f"note-{round_}-live"
        last = home.telegram.user_says(OWNER, note)
        live.append(note)
        await wait_for(
            lambda: any(x.get("content") == f"re: {note}" for x in home.lines()), STEP_TIMEOUT
        )
        await wait_for(lambda: home.telegram.confirmed_offset > last, STEP_TIMEOUT)
        gateway.send_signal(signal.SIGKILL)
        await gateway.wait(STOP_TIMEOUT)
        tally.tracebacks += gateway.stderr.count("Traceback")
    tally.modes["kill-9"] += 1
    tally.rounds += 1


async def run_double_new_lane(rounds: int, seed: int, deadline: float, base: Path) -> StopTally:
    del seed  # no random choice in this lane: each round is the same sequence
    tally = StopTally("double new")
    (base / "double-new").mkdir()
    live: list[str] = []
    async with FakeTelegram() as telegram, FakeLLM() as llm:
        home = Home(base / "double-new", telegram, llm)
        for round_ in range(rounds):
            if time.monotonic() > deadline:
                print(f"double-new lane: time budget reached after {tally.rounds}", flush=True)
                break
            await double_new_round(home, tally, round_, live)
            print(
                f"double-new lane round {tally.rounds:2d}: {home.archives()} archives", flush=True
            )
        await home.finish(tally, lambda: all(f"re: {n}" in home.sent() for n in live))
        answered = Counter(home.sent())
        held = [f"note-{r}-held" for r in range(tally.rounds)]
        stored = {x.get("content") for x in home.lines()}
        tally.sent = len(live) + len(held)
        for note in [*live, *held]:
            count = answered[f"re: {note}"]
            if count == 1:
                tally.answered_once += 1
            elif count > 1:
                tally.answered_twice += 1
                tally.problems_seen.append(f"{note} answered {count} times")
            elif note in held and f"re: {note}" in stored:
                tally.lost_in_send += 1
            else:
                tally.lost += 1
                tally.problems_seen.append(f"{note} never answered")
        tally.command_replies = answered[NEW_NOTICE]
        # Each /new archives one transcript; one run again would archive (and notify) more.
        tally.commands_run_twice = max(0, home.archives() - tally.commands_sent) + max(
            0, tally.command_replies - tally.commands_sent
        )
    return tally


def report_stop(tally: StopTally) -> bool:
    print()
    print(f"{tally.lane} lane: {tally.rounds} rounds  modes: {dict(tally.modes)}")
    print(f"notes sent by the owner:          {tally.sent}")
    print(f"answered exactly once:            {tally.answered_once}")
    if tally.lane == "stop":
        print(f"stopped by /stop (never run again): {tally.stopped}")
    print(f"answered twice (or answered and stopped): {tally.answered_twice}   (must be 0)")
    print(f"lost:                             {tally.lost}   (must be 0)")
    if tally.lane != "stop":
        print(
            f"  reply stored, its send held by a 429 and cut by a kill (at most once: not "
            f"re-sent): {tally.lost_in_send}"
        )
    print(f"commands sent / their replies:    {tally.commands_sent} / {tally.command_replies}")
    print(f"commands run twice:               {tally.commands_run_twice}   (must be 0)")
    print(f"journal entries still pending:    {tally.journal_pending}   (must be 0)")
    print(f"memory audit exit:                {tally.audit_exit}   (must be 0)")
    print(f"tracebacks on stderr:             {tally.tracebacks}")
    print(f"final graceful exit:              {tally.final_exit}")
    for problem in tally.problems_seen[:10]:
        print(f"    {problem}")
    failed = bool(tally.problems())
    print(f"{tally.lane.upper()} RESULT:", "FAIL" if failed else "ok")
    return not failed

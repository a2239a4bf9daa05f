"""bench/soak.py's clock-jump lane (issue #24, its last "Required" item): the real
`clawgate gateway` under libfaketime (its wall clock moves, its monotonic and boot clocks do
not, as on a machine whose clock is set while it runs), FakeTelegram and FakeLLM.

The workspace holds MEMORY.md versions, downloads and archived transcripts (retention 1 day,
`keep_newest = 0`: only the jump rule can keep them) and a one-shot reminder due 25 s after
the first start. The offset is a FAKETIME_TIMESTAMP_FILE the lane rewrites (re-read every
second), so each jump lands while the gateway runs. Each round: start at the current offset,
send notes, jump (+25 h, then +400 days, then +2 days more), send more notes, run
`clawgate housekeeping` at the jumped clock (the daemon's own sweep waits a minute after start,
longer than a round), then SIGTERM or kill -9. A graceful run answers what is left.

Pass: every note answered exactly once, every jumped sweep "deleted nothing: the clock
moved", every seeded file still there, the reminder delivered late (not dropped as missed),
nothing pending in the journal, `clawgate memory audit` clean.
"""

from __future__ import annotations

import asyncio
import glob
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.soak_stop import READY, START_TIMEOUT, STEP_TIMEOUT, STOP_TIMEOUT, Home, wait_for
from clawgate.gateway.cron.store import CronStore
from tests.fakes.llm import FakeLLM, Reply, text
from tests.fakes.telegram import FakeTelegram
from tests.memory_helpers import is_consolidation, save
from tests.process import (
    CLAWGATE,
    ClawgateProcess,
    child_env,
    fake_model,
    fake_telegram,
    run_clawgate,
    write_config,
)

OWNER = 1001
JUMPS = ("+25h", "+400d", "+402d")  # each a jump of more than a day from the one before
REMINDER = "Call the bank!"
JUMPED = "deleted nothing: the clock moved"


@dataclass
class ClockTally:
    rounds: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    answered_once: int = 0
    answered_twice: int = 0
    lost: int = 0
    jumped_sweeps: int = 0
    sweeps_that_deleted: int = 0
    files_seeded: int = 0
    files_gone: int = 0
    reminder_sent: int = 0
    journal_pending: int = 0
    audit_exit: int | None = None
    final_exit: int | None = None
    tracebacks: int = 0
    problems_seen: list[str] = field(default_factory=list)

    def problems(self) -> dict[str, int]:
        checks = {
            "answered twice": self.answered_twice,
            "lost": self.lost,
            "a jumped sweep deleted": self.sweeps_that_deleted,
            "seeded files gone": self.files_gone,
            "reminder not sent exactly once": int(self.reminder_sent != 1),
            "journal still pending": self.journal_pending,
            "audit not clean": int(self.audit_exit != 0),
            "final exit not 0": int(self.final_exit != 0),
        }
        return {name: value for name, value in checks.items() if value}


class ClockHome(Home):
    """A Home whose gateway runs under libfaketime at the offset in `spec`."""

    def __init__(self, path: Path, telegram: FakeTelegram, llm: FakeLLM) -> None:
        super().__init__(path, telegram, llm)
        llm.handler = self._clock_model
        self.config = write_config(
            path,
            agent={**fake_model(llm, request_timeout=60), "shutdown_grace_seconds": 3},
            telegram=fake_telegram(telegram, [OWNER]),
            extra=(
                "[limits]\nmessages_per_minute = 0\n"
                "[cron]\nmissed_grace_minutes = 0\n"
                "[housekeeping]\nmedia_days = 1\narchive_days = 1\nversions_days = 1\n"
                "keep_newest = 0"
            ),
        )
        self.spec = path / "faketime"
        self.spec.write_text("+0\n")
        self.env = {
            "LD_PRELOAD": sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))[0],
            "FAKETIME_TIMESTAMP_FILE": str(self.spec),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }
        self.cron = CronStore(path / "workspace" / "cron")

    def _clock_model(self, body: dict[str, Any]) -> Reply:
        users = [m for m in body["messages"] if m.get("role") == "user"]
        if not is_consolidation(body) and users and "call the bank" in str(users[-1]["content"]):
            return text(REMINDER)
        return self._model(body) if not is_consolidation(body) else save("Ann talked.")

    def gateway(self) -> ClawgateProcess:
        return ClawgateProcess(self.path, "--config", str(self.config), "gateway", env=self.env)

    async def housekeeping(self) -> str:
        """`clawgate housekeeping` at the current offset: what it printed."""
        child = await asyncio.create_subprocess_exec(
            str(CLAWGATE),
            *("--config", str(self.config), "housekeeping"),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(self.path, self.env),
            cwd=self.path,
        )
        out, err = await asyncio.wait_for(child.communicate(), STEP_TIMEOUT)
        return out.decode() + err.decode()

    def job_id(self) -> str:
        return next(job.id for job in self.cron.load().jobs if job.name == "bank")

    def reminders(self) -> int:
        return sum(1 for x in self.sent() if x.endswith(REMINDER))


async def seed(home: ClockHome, notes: list[str]) -> list[Path]:
    """Three of each kind a sweep may delete, an hour old: fresh until the clock jumps. The
    archived transcripts come from real /new (so the audit finds their consolidations)."""
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        for index in range(3):
            await say(home, notes, f"seed{index}", 1)
            archives = home.archives()
            home.telegram.user_says(OWNER, "/new")
            await wait_for(lambda: home.archives() > archives, STEP_TIMEOUT)  # noqa: B023
        gateway.send_signal(signal.SIGTERM)
        await gateway.wait(STOP_TIMEOUT)
    workspace = home.path / "workspace"
    files = sorted((workspace / "sessions" / "archive").glob("*.jsonl"))
    for index in range(3):
        media = workspace / "media" / "telegram" / str(OWNER) / f"photo{index}.jpg"
        media.parent.mkdir(parents=True, exist_ok=True)
        media.write_bytes(b"x" * 100)
        version = workspace / "memory" / ".versions" / f"MEMORY.{index}.md"
        version.parent.mkdir(parents=True, exist_ok=True)
        version.write_text(f"fact {index}")
        files += [media, version]
    then = time.time() - 3600
    for path in files:
        os.utime(path, (then, then))
    # Due after the first round's gateway has started and scheduled it, before its jump.
    due = datetime.now(UTC) + timedelta(seconds=25)
    code, said = await run_clawgate(
        home.path,
        *("--config", str(home.config), "cron", "add", "--name", "bank"),
        *("--message", "Remind me to call the bank", "--at", due.isoformat()),
        *("--to", f"telegram:{OWNER}"),
    )
    assert code == 0, said
    return files


async def say(home: ClockHome, notes: list[str], tag: str, count: int) -> None:
    batch = [f"note-{tag}-{n}" for n in range(count)]
    for note in batch:
        home.telegram.user_says(OWNER, note)
    notes += batch
    await wait_for(lambda: all(f"re: {n}" in home.sent() for n in batch), STEP_TIMEOUT)


async def clock_round(
    home: ClockHome, tally: ClockTally, rng: random.Random, round_: int, notes: list[str]
) -> None:
    mode = "kill-9" if round_ % 2 == 0 else rng.choice(("sigterm", "kill-9"))
    tally.modes[mode] += 1
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await say(home, notes, f"{round_}-before", rng.randint(1, 3))
        if round_ == 0:  # the reminder is scheduled before its clock jumps past it
            await wait_for(
                lambda: (
                    home.cron.state_path.exists() and home.job_id() in home.cron.load_state().jobs
                ),
                START_TIMEOUT,
            )
        jump = JUMPS[round_ % len(JUMPS)] if round_ < len(JUMPS) else f"+{402 + 2 * round_}d"
        home.spec.write_text(jump + "\n")
        await say(home, notes, f"{round_}-after", rng.randint(1, 3))
        if round_ == 0:
            await wait_for(lambda: home.reminders() > 0, STEP_TIMEOUT)
        printed = await home.housekeeping()
        if JUMPED in printed:
            tally.jumped_sweeps += 1
        else:
            tally.sweeps_that_deleted += 1
            tally.problems_seen.append(f"round {round_} ({jump}): {printed.strip()}")
        gateway.send_signal(signal.SIGTERM if mode == "sigterm" else signal.SIGKILL)
        code = await gateway.wait(STOP_TIMEOUT)
        if mode == "sigterm" and code != 0:
            tally.problems_seen.append(f"round {round_}: SIGTERM exit {code}")
        tally.tracebacks += gateway.stderr.count("Traceback")
    tally.rounds += 1


async def run_clock_lane(rounds: int, seed_: int, deadline: float, base: Path) -> ClockTally:
    tally = ClockTally()
    rng = random.Random(seed_ * 1000 + 701)
    (base / "clock").mkdir()
    notes: list[str] = []
    async with FakeTelegram() as telegram, FakeLLM() as llm:
        home = ClockHome(base / "clock", telegram, llm)
        files = await seed(home, notes)
        tally.files_seeded = len(files)
        print("clock lane: first sweep:", (await home.housekeeping()).strip(), flush=True)
        for round_ in range(rounds):
            if time.monotonic() > deadline:
                print(f"clock lane: time budget reached after {tally.rounds} rounds", flush=True)
                break
            await clock_round(home, tally, rng, round_, notes)
            print(
                f"clock lane round {tally.rounds:2d}: clock at {home.spec.read_text().strip()}",
                flush=True,
            )
        await home.finish(tally, lambda: all(f"re: {n}" in home.sent() for n in notes))  # type: ignore[arg-type]
        answered = Counter(home.sent())
        tally.sent = len(notes)
        for note in notes:
            count = answered[f"re: {note}"]
            if count == 1:
                tally.answered_once += 1
            elif count == 0:
                tally.lost += 1
                tally.problems_seen.append(f"{note} never answered")
            else:
                tally.answered_twice += 1
                tally.problems_seen.append(f"{note} answered {count} times")
        if tally.audit_exit != 0:  # finish() keeps only the exit code: say what it found
            _, said = await run_clawgate(home.path, "--config", str(home.config), "memory", "audit")
            tally.problems_seen.append(f"memory audit: {said.strip()[-600:]}")
        tally.reminder_sent = home.reminders()
        tally.files_gone = sum(1 for path in files if not path.exists())
        job = home.cron.load().get(home.job_id())
        state = home.cron.load_state().jobs.get(job.id)
        for sent in (x for x in home.sent() if x.endswith(REMINDER)):
            print(f"clock lane: reminder sent: {sent!r}", flush=True)
        print(f"clock lane: reminder job enabled={job.enabled} state={state}", flush=True)
    return tally


def report_clock(tally: ClockTally) -> bool:
    print()
    print(f"clock lane: {tally.rounds} rounds  modes: {dict(tally.modes)}")
    print(f"notes sent by the owner:          {tally.sent}")
    print(f"answered exactly once:            {tally.answered_once}")
    print(f"answered twice:                   {tally.answered_twice}   (must be 0)")
    print(f"lost:                             {tally.lost}   (must be 0)")
    print(f"jumped sweeps that deleted nothing: {tally.jumped_sweeps} of {tally.rounds}")
    print(
        f"seeded files gone:                {tally.files_gone} of {tally.files_seeded}   (must be 0)"
    )
    print(f"reminder deliveries:              {tally.reminder_sent}   (must be 1)")
    print(f"journal entries still pending:    {tally.journal_pending}   (must be 0)")
    print(f"memory audit exit:                {tally.audit_exit}   (must be 0)")
    print(f"tracebacks on stderr:             {tally.tracebacks}")
    print(f"final graceful exit:              {tally.final_exit}")
    for problem in tally.problems_seen[:10]:
        print(f"    {problem}")
    failed = bool(tally.problems())
    print("CLOCK RESULT:", "FAIL" if failed else "ok")
    return not failed

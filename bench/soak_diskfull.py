"""bench/soak.py's "a full disk on Discord" lane: the Discord journal's folder on a small
tmpfs (tests/small_disk.py: the kernel itself says ENOSPC) filled and freed again and again
under the real `clawgate gateway`, notes streaming in all the while, then account.

One home (tests/discord_world.py `GatewayHome`: the owner's DM and #general on FakeDiscord,
FakeLLM answering "re: <note>" after 0.1-0.5 s). Each round starts the gateway, streams
notes for 0-3 s, fills the disk and streams on for 0.5-4 s, and then:

  freed         frees the disk, streams 0-2 s more, stops gracefully (SIGTERM)
  kill-9 full   kill -9 while the disk is still full (notes held unstored), freed after
  sigterm full  SIGTERM while the disk is still full, freed after

Then one graceful run answers what is left, and the tally: every note answered exactly
once (a reply stored but cut off in its send by a kill counts apart: at most once), nothing
pending in the journal, and no "can't store" notice beyond one per chat per outage.
Needs root for the mount; without it the lane says so and is skipped.
"""

from __future__ import annotations

import asyncio
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from bench.soak_discord import DiscordTally, account, wait_for
from clawgate.channels.unstored import UNSTORED_NOTICE
from tests.discord_world import READY, GatewayHome
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.small_disk import MountRefused, SmallDisk

MODES = ("freed", "freed", "kill-9 full", "sigterm full")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
FINAL_TIMEOUT = 180.0


@dataclass
class FullDiskTally(DiscordTally):
    outages: int = 0
    notices: int = 0
    skipped: str | None = None


async def stream(home: GatewayHome, rng: random.Random, tag: str, seconds: float) -> None:
    """Notes from the owner's DM and #general at random intervals for `seconds`."""
    stop_at = time.monotonic() + seconds
    n = 0
    while time.monotonic() < stop_at:
        await home.say(rng.choice((home.owner_dm, home.general)), f"note-{tag}-{n}")
        n += 1
        await asyncio.sleep(rng.uniform(0.05, 0.5))


async def one_round(
    home: GatewayHome, disk: SmallDisk, tally: FullDiskTally, rng: random.Random, round_: int
) -> str:
    mode = rng.choice(MODES)
    tally.modes[mode] += 1
    home.slow = rng.uniform(0.1, 0.5)
    async with home.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        await stream(home, rng, f"{round_}-before", rng.uniform(0.0, 3.0))
        disk.fill()
        tally.outages += 1
        await stream(home, rng, f"{round_}-full", rng.uniform(0.5, 4.0))
        if mode == "freed":
            disk.free()
            await stream(home, rng, f"{round_}-after", rng.uniform(0.0, 2.0))
        stop = signal.SIGKILL if mode.startswith("kill") else signal.SIGTERM
        gateway.send_signal(stop)
        code = await gateway.wait(STOP_TIMEOUT)
        if stop == signal.SIGTERM and code != 0:
            tally.problems_seen.append(f"round {round_}: SIGTERM exit {code}")
        tally.tracebacks += gateway.stderr.count("Traceback")
    disk.free()
    tally.stops += 1
    return mode


async def run_diskfull_lane(rounds: int, seed: int, deadline: float, base: Path) -> FullDiskTally:
    """`rounds` rounds (or until `deadline`), then the graceful run and the tally."""
    tally = FullDiskTally()
    rng = random.Random(seed * 1000 + 998)
    home_dir = base / "diskfull"
    home_dir.mkdir()
    async with FakeDiscord() as fake, FakeLLM() as llm:
        home = GatewayHome(home_dir, fake, llm)
        # Room for the journal of every round (the test's 64k would fill with notes alone).
        disk = SmallDisk(home_dir / "data" / "channels" / "discord", size="4m")
        try:
            disk.mount()
        except MountRefused as exc:
            tally.skipped = str(exc)
            return tally
        try:
            for round_ in range(rounds):
                if time.monotonic() > deadline:
                    print(f"full disk: time budget reached after {tally.stops} rounds", flush=True)
                    break
                started = time.monotonic()
                mode = await one_round(home, disk, tally, rng, round_)
                answered = home.answered()
                waiting = sum(1 for s in home.said if not answered[s.note])
                print(
                    f"full disk round {tally.stops:2d}: {mode:12s} {time.monotonic() - started:5.1f} s; "
                    f"{len(home.said)} notes said, {waiting} not answered yet",
                    flush=True,
                )
            home.slow = 0.0
            async with home.gateway() as gateway:
                await gateway.wait_for_log(READY, START_TIMEOUT)
                await wait_for(home.all_answered, FINAL_TIMEOUT)
                await asyncio.sleep(1.0)  # room for a late duplicate to show
                gateway.send_signal(signal.SIGTERM)
                tally.final_exit = await gateway.wait(STOP_TIMEOUT)
                tally.tracebacks += gateway.stderr.count("Traceback")
            await account(home, tally)
        finally:
            disk.unmount()
    # Told of a full disk: not a reply to a note, and at most once per chat per outage.
    notices = [m for m in fake.sent if m.content == UNSTORED_NOTICE]
    tally.notices = len(notices)
    tally.unexpected_replies -= tally.notices
    if tally.notices > 2 * tally.outages:
        tally.problems_seen.append(f"{tally.notices} notices for {tally.outages} outages")
        tally.unexpected_replies += tally.notices - 2 * tally.outages
    return tally


def report_diskfull(tally: FullDiskTally) -> bool:
    print()
    if tally.skipped is not None:
        print(f"Full-disk lane: skipped ({tally.skipped})")
        return True
    print(f"Full-disk lane (Discord): {tally.stops} rounds  modes: {dict(tally.modes)}")
    print(f"disk filled (outages):            {tally.outages}")
    print(f"notes sent by users (DM and #general mentions): {tally.sent}")
    print(f"answered exactly once:            {tally.answered_once}")
    print(f"answered twice or more:           {tally.answered_twice}   (must be 0)")
    print(f"lost (never answered):            {tally.lost}   (must be 0)")
    print(
        f"  reply stored, its send cut by a kill (at most once: not re-sent): {tally.lost_in_send}"
    )
    print(f"'cannot store' notices:           {tally.notices}   (at most 2 per outage)")
    print(f"replies nobody asked for:         {tally.unexpected_replies}   (must be 0)")
    print(f"journal entries still pending:    {tally.journal_pending}   (must be 0)")
    print(f"tracebacks on stderr:             {tally.tracebacks}")
    print(f"final graceful exit:              {tally.final_exit}")
    for problem in tally.problems_seen[:10]:
        print(f"    {problem}")
    failed = bool(tally.problems())
    print("FULL-DISK RESULT:", "FAIL" if failed else "ok")
    return not failed

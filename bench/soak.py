"""Soak: kill -9 the real `clawgate gateway` at random moments, 50+ times, then account.

The scenario of tests/test_crash.py (`CrashWorld`: three Telegram chats on FakeTelegram,
FakeLLM answering "re: <text>" and save_memory, memory_window = 6) in a loop. Each round
starts the gateway, streams messages from the chats at random intervals and kills it:

  random         the model answers at once; the kill comes 0-10 s after "ready" (so some
                 land during litellm's import, some mid-turn, some mid-send)
  turns          every model call hangs: killed once updates are handed out, unanswered
  consolidation  consolidations hang at the model: killed once one is held

Then one graceful run answers what is left, and the tallies are printed: every update
handed out must be in its session file and answered exactly once, every file must load,
HISTORY.md/MEMORY.md must be well-formed, consolidation records must equal HISTORY.md
entries (one each: a kill between an entry and its record is healed at the next start) and
`clawgate memory audit` (both directions) must find nothing.
Lanes (independent homes and fakes) run side by side to use the cores; the seed fixes the
choices, not the timing.

Beside them, a Discord lane (bench/soak_discord.py) stops its own gateway with kill -9 and
SIGTERM during long turns with messages queued behind them, and reports its own tally; and
"a full disk on Discord" (bench/soak_diskfull.py) fills and frees the Discord journal's own
small filesystem under a running gateway, stopping it now and then while full.

Two streaming lanes (bench/soak_stream.py), one per chat platform, kill -9 the gateway while
replies stream into a DM and a group: no note lost or answered twice, every partial reply
finished or marked cut; they print edits per reply and first token -> first visible text.

And two lanes of bench/soak_stop.py: /stop with messages queued behind the stopped turn
(SIGTERM or kill -9 after it), and a double /new under a rate-limit wait (kill -9, replayed).

Run: python bench/soak.py [--kills 52] [--lanes 2] [--seed 7] [--budget 540] [--discord-stops 12]
     [--diskfull-rounds 8] [--stop-rounds 6] [--clock-rounds 3] [--stream-rounds 8]
     python bench/soak.py --cluster 3 --kills 20   (bench/soak_cluster.py, that lane alone)
Exit status 1 if any tally that must be zero is not.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.soak_clock import ClockTally, report_clock, run_clock_lane
from bench.soak_cluster import report_cluster, run_cluster_lane
from bench.soak_discord import report_discord, run_discord_lane
from bench.soak_diskfull import FullDiskTally, report_diskfull, run_diskfull_lane
from bench.soak_stop import StopTally, report_stop, run_double_new_lane, run_stop_lane
from bench.soak_stream import StreamTally, report_stream, run_stream_lane
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import run_clawgate
from tests.test_crash import READY, CrashWorld, Tally

MODES = ("random", "random", "turns", "consolidation")
START_TIMEOUT = 60.0
HOLD_TIMEOUT = 40.0  # litellm's import on a loaded machine, and then some
FINAL_TIMEOUT = 180.0
RECOVERED = "recorded the HISTORY.md entry"  # consolidate.py logs it per entry recorded late


@dataclass
class LaneResult:
    lane: int
    kills: int = 0
    modes: Counter[str] = field(default_factory=Counter)
    unanswered_at_kill: int = 0  # updates handed out (confirmed) but unanswered, summed
    held_saves_at_kill: int = 0
    tracebacks: int = 0
    recovered_entries: int = 0  # HISTORY.md entries recorded at a start (RECOVERED lines)
    final_exit: int | None = None
    audit_exit: int | None = None
    tally: Tally | None = None


async def feed(world: CrashWorld, rng: random.Random, lane: int, round_: int, most: int) -> None:
    """Messages from random chats at random intervals (at most `most`)."""
    for n in range(most):
        chat = rng.choice(world.chats)
        world.say(chat, f"lane {lane} round {round_} chat {chat} message {n}")
        await asyncio.sleep(rng.uniform(0.05, 0.6))


def unanswered_handed_out(world: CrashWorld) -> int:
    replies = world.replies()
    return sum(
        1
        for s in world.sent
        if s.update_id < world.telegram.confirmed_offset and not replies[f"re: {s.text}"]
    )


async def wait_for(predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    try:
        async with asyncio.timeout(timeout):
            while not predicate():  # noqa: ASYNC110 - polling fakes owned by this loop
                await asyncio.sleep(0.02)
    except TimeoutError:
        return False
    return True


async def one_round(world: CrashWorld, result: LaneResult, rng: random.Random, round_: int) -> None:
    mode = rng.choice(MODES)
    world.hold_turns = mode == "turns"
    world.hold_saves = mode == "consolidation"
    result.modes[mode] += 1
    chat_requests, saves = world.chat_requests(), world.saves()
    feeder_rng = random.Random(f"{rng.random()}")
    async with world.gateway() as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        if round_ == 0:  # MEMORY.md as onboarding wrote it: facts may only be added below
            world.remember_template()
        most = rng.randint(3, 8) if mode == "turns" else 40
        feeder = asyncio.create_task(feed(world, feeder_rng, result.lane, round_, most))
        started = time.monotonic()
        try:
            if mode == "random":
                await asyncio.sleep(rng.uniform(0.0, 10.0))
            elif mode == "turns":
                await wait_for(
                    lambda: world.chat_requests() > chat_requests and world.all_handed_out(),
                    HOLD_TIMEOUT,
                )
                await asyncio.sleep(rng.uniform(0.0, 0.5))
            else:
                await wait_for(lambda: world.saves() > saves, HOLD_TIMEOUT)
        finally:
            feeder.cancel()
            await asyncio.gather(feeder, return_exceptions=True)
        result.unanswered_at_kill += unanswered_handed_out(world)
        result.held_saves_at_kill += world.saves() - saves if mode == "consolidation" else 0
        gateway.send_signal(signal.SIGKILL)
        await gateway.wait(30)
        result.tracebacks += gateway.stderr.count("Traceback")
        result.recovered_entries += gateway.stderr.count(RECOVERED)
    result.kills += 1
    print(
        f"lane {result.lane} kill {result.kills:2d}: {mode:13s} {time.monotonic() - started:5.1f} s "
        f"after ready; {len(world.sent)} sent, {unanswered_handed_out(world)} handed out "
        f"and unanswered",
        flush=True,
    )


async def run_lane(lane: int, kills: int, seed: int, deadline: float, base: Path) -> LaneResult:
    result = LaneResult(lane)
    rng = random.Random(seed * 1000 + lane)
    home = base / f"lane{lane}"
    home.mkdir()
    async with FakeTelegram() as telegram, FakeLLM() as llm:
        world = CrashWorld(home, telegram, llm)
        for round_ in range(kills):
            if time.monotonic() > deadline:
                print(f"lane {lane}: time budget reached after {result.kills} kills", flush=True)
                break
            await one_round(world, result, rng, round_)
        # The final, graceful run: everything left is answered, then SIGTERM.
        world.hold_turns = world.hold_saves = False
        async with world.gateway() as gateway:
            await gateway.wait_for_log(READY, START_TIMEOUT)
            await wait_for(world.all_answered, FINAL_TIMEOUT)
            await asyncio.sleep(1.0)  # room for a late duplicate to show
            gateway.send_signal(signal.SIGTERM)
            result.final_exit = await gateway.wait(40)
            result.tracebacks += gateway.stderr.count("Traceback")
            result.recovered_entries += gateway.stderr.count(RECOVERED)
        result.tally = await world.check()
        result.audit_exit, _ = await run_clawgate(
            home, "--config", str(world.config), "memory", "audit"
        )
    return result


def report(results: list[LaneResult], elapsed: float) -> bool:
    total = Tally()
    for r in results:
        assert r.tally is not None
        for name in (
            "sent handed_out answered_once answered_twice unanswered unexpected_replies "
            "missing_from_session stored_twice unreadable_files consolidations "
            "history_entries bad_history_entries journal_pending"
        ).split():
            setattr(total, name, getattr(total, name) + getattr(r.tally, name))
        total.audit_problems += r.tally.audit_problems
        total.memory_ok = total.memory_ok and r.tally.memory_ok
    kills = sum(r.kills for r in results)
    modes = sum((r.modes for r in results), Counter())
    print()
    print(f"kill -9: {kills} in {elapsed:.0f} s ({len(results)} lanes)  modes: {dict(modes)}")
    print(
        f"  handed out and unanswered at the moment of a kill (summed): "
        f"{sum(r.unanswered_at_kill for r in results)}"
    )
    print(
        f"  consolidations held at the model at a kill: "
        f"{sum(r.held_saves_at_kill for r in results)}"
    )
    print(f"updates sent by users:            {total.sent}")
    print(f"updates handed out to the bot:    {total.handed_out}")
    print(f"answered exactly once:            {total.answered_once}")
    print(f"answered twice or more:           {total.answered_twice}   (must be 0)")
    print(
        f"  of which one stored reply sent twice (kill after Telegram took it, before the "
        f"journal heard): {sum(r.tally.resent for r in results if r.tally)}"
    )
    print(f"unanswered after the final run:   {total.unanswered}   (must be 0)")
    print(
        f"  reply stored, its send cut by a kill (at most once: not re-sent): "
        f"{sum(r.tally.lost_in_send for r in results if r.tally)}"
    )
    print(f"replies nobody asked for:         {total.unexpected_replies}   (must be 0)")
    print(f"missing from their session file:  {total.missing_from_session}   (must be 0)")
    print(f"stored twice:                     {total.stored_twice}   (must be 0)")
    print(f"session files failing to load:    {total.unreadable_files}   (must be 0)")
    print(f"audit problems:                   {len(total.audit_problems)}   (must be 0)")
    for problem in total.audit_problems[:10]:
        print(f"    {problem}")
    print(
        f"consolidation records / HISTORY entries: {total.consolidations} / "
        f"{total.history_entries}   (must be equal)"
    )
    print(
        f"  entries a kill left without their record, recorded at the next start: "
        f"{sum(r.recovered_entries for r in results)}"
    )
    print(f"malformed HISTORY entries:        {total.bad_history_entries}   (must be 0)")
    print(f"MEMORY.md well-formed:            {total.memory_ok}")
    print(f"journal entries still pending:    {total.journal_pending}   (must be 0)")
    print(f"tracebacks on stderr:             {sum(r.tracebacks for r in results)}")
    print(
        f"final graceful exits / memory audit exits: "
        f"{[r.final_exit for r in results]} / {[r.audit_exit for r in results]}"
    )
    failed = (
        bool(total.problems())
        or total.consolidations != total.history_entries
        or any(r.final_exit != 0 or r.audit_exit != 0 for r in results)
    )
    print("RESULT:", "FAIL" if failed else "ok")
    return not failed


async def main() -> int:
    # The fakes' own "client went away" tracebacks (a kill mid-request) are not findings.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=52, help="kills in all, over the lanes")
    parser.add_argument("--lanes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for the kills")
    parser.add_argument(
        "--discord-stops", type=int, default=12, help="Discord lane stops (0: no Discord lane)"
    )
    parser.add_argument(
        "--diskfull-rounds", type=int, default=8, help="full-disk lane rounds (0: no such lane)"
    )
    parser.add_argument(
        "--stop-rounds", type=int, default=6, help="rounds of each soak_stop lane (0: none)"
    )
    parser.add_argument(
        "--clock-rounds", type=int, default=3, help="clock-jump lane rounds (0: no such lane)"
    )
    parser.add_argument(
        "--stream-rounds", type=int, default=8, help="rounds of each streaming lane (0: none)"
    )
    parser.add_argument(
        "--cluster",
        type=int,
        default=0,
        help="instead of the other lanes: N cluster workers on PostgreSQL, --kills of them",
    )
    args = parser.parse_args()
    if args.cluster:
        with tempfile.TemporaryDirectory(prefix="clawgate-soak-") as tmp:
            tally = await run_cluster_lane(args.cluster, args.kills, args.seed, Path(tmp))
            clean = report_cluster(tally)
            if not clean:
                # The sessions and logs of a run that lost or reordered something, to read.
                kept = Path(tempfile.mkdtemp(prefix="clawgate-soak-kept-"))
                shutil.copytree(Path(tmp) / "cluster", kept / "cluster", symlinks=True)
                print(f"  kept for reading: {kept / 'cluster'}")
        return 0 if clean else 1
    started = time.monotonic()
    deadline = started + args.budget
    per_lane = -(-args.kills // args.lanes)
    with tempfile.TemporaryDirectory(prefix="clawgate-soak-") as tmp:
        lanes = [
            run_lane(lane, per_lane, args.seed, deadline, Path(tmp)) for lane in range(args.lanes)
        ]
        if args.discord_stops:
            lanes.append(run_discord_lane(args.discord_stops, args.seed, deadline, Path(tmp)))
        if args.diskfull_rounds:
            lanes.append(run_diskfull_lane(args.diskfull_rounds, args.seed, deadline, Path(tmp)))
        if args.stop_rounds:
            lanes.append(run_stop_lane(args.stop_rounds, args.seed, deadline, Path(tmp)))
            lanes.append(run_double_new_lane(args.stop_rounds, args.seed, deadline, Path(tmp)))
        if args.clock_rounds:
            lanes.append(run_clock_lane(args.clock_rounds, args.seed, deadline, Path(tmp)))
        for platform in ("telegram", "discord") if args.stream_rounds else ():
            lanes.append(
                run_stream_lane(platform, args.stream_rounds, args.seed, deadline, Path(tmp))
            )
        done = await asyncio.gather(*lanes)
    telegram_ok = report(done[: args.lanes], time.monotonic() - started)
    others_ok = all(
        [
            report_diskfull(tally)
            if isinstance(tally, FullDiskTally)
            else report_stop(tally)
            if isinstance(tally, StopTally)
            else report_clock(tally)
            if isinstance(tally, ClockTally)
            else report_stream(tally)
            if isinstance(tally, StreamTally)
            else report_discord(tally)
            for tally in done[args.lanes :]
        ]
    )
    return 0 if telegram_ok and others_ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

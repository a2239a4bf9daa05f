"""Soak lane of a cluster (`python bench/soak.py --cluster N`): N real `clawgate gateway`
workers on one private PostgreSQL (tests/postgres.py), three agents each with its own bot (two
Telegram bots and a Discord bot on the loopback fakes), steady traffic from the three owners,
and `--kills` rounds of kill -9 on a random worker (restarted after its agents moved).

Printed: how long each takeover took (until every agent was held by a live worker again),
messages sent, lost (never answered), answered twice, replies out of order within a chat, and
`clawgate memory audit` of every agent after a graceful stop. Exit status 1 if any of those
that must be zero is not, or a takeover took longer than lease_seconds + 5 s."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import statistics
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from tests.cluster_helpers import (
    AGENT_LEASES,
    GATEWAY_LEASE,
    MAIN_USER,
    WORK_TOKEN,
    WORK_USER,
    Leases,
    agent_started,
    cluster_home,
    echo,
    eventually,
    worker,
)
from tests.discord_world import OWNER
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.postgres import PrivatePostgres
from tests.process import run_clawgate

FINAL_TIMEOUT = 180.0
START_TIMEOUT = 90.0
NUMBER = re.compile(r"(\d+)$")


@dataclass
class ClusterTally:
    workers: int
    kills: int = 0
    takeovers: list[float] = field(default_factory=list)
    sent: int = 0
    lost: int = 0
    twice: int = 0
    out_of_order: int = 0
    audits_failed: list[str] = field(default_factory=list)


async def run_cluster_lane(workers: int, kills: int, seed: int, tmp: Path) -> ClusterTally:
    rng = random.Random(seed)
    tally = ClusterTally(workers=workers)
    server = PrivatePostgres()
    await asyncio.to_thread(server.start)
    try:
        async with (
            FakeTelegram() as telegram,
            FakeTelegram(token=WORK_TOKEN) as work_telegram,
            FakeDiscord() as discord,
            FakeLLM() as llm,
        ):
            llm.handler = echo
            url = await asyncio.to_thread(server.create_database)
            home = tmp / "cluster"
            home.mkdir()
            config, owner_dm = cluster_home(home, url, telegram, work_telegram, discord, llm)
            names = [f"w{i}" for i in range(1, workers + 1)]
            running = {name: worker(home, config, name) for name in names}
            leases = await Leases.open(url)
            sent: dict[str, list[int]] = {"main": [], "work": [], "home": []}
            try:
                for process in running.values():
                    await process.start()
                await eventually(lambda: _held(leases, set(names)), START_TIMEOUT)
                # Discord does not catch up on a channel before its first connection.
                await eventually(lambda: agent_started(running.values(), "home"), START_TIMEOUT)
                await _first_answers(telegram, work_telegram, discord, owner_dm)

                async def feed() -> None:
                    n = 0
                    while True:
                        n += 1
                        telegram.user_says(MAIN_USER, f"main {n}")
                        work_telegram.user_says(WORK_USER, f"work {n}")
                        await discord.user_says(
                            owner_dm, f"home {n}", author_id=OWNER, username="ann"
                        )
                        for chat in sent.values():
                            chat.append(n)
                        await asyncio.sleep(rng.uniform(0.2, 0.8))

                feeder = asyncio.create_task(feed())
                try:
                    for _ in range(kills):
                        await asyncio.sleep(rng.uniform(2.0, 6.0))
                        victim = rng.choice(names)
                        running[victim].send_signal(signal.SIGKILL)
                        await running[victim].wait(30)
                        others = set(names) - {victim}
                        tally.takeovers.append(
                            await eventually(lambda o=others: _held(leases, o), GATEWAY_LEASE + 60)
                        )
                        tally.kills += 1
                        await running[victim].close()
                        running[victim] = worker(home, config, victim)
                        await running[victim].start()
                finally:
                    feeder.cancel()
                    await asyncio.gather(feeder, return_exceptions=True)
                total = sum(len(chat) for chat in sent.values())
                tally.sent = total
                await _wait_answered(telegram, work_telegram, discord, owner_dm, sent)
            finally:
                for process in running.values():
                    if process.process.returncode is None:
                        process.send_signal(signal.SIGTERM)
                        await process.wait(60)
                    await process.close()
                await leases.close()
            replies = {
                "main": [m["text"] for m in telegram.messages_to(MAIN_USER)],
                "work": [m["text"] for m in work_telegram.messages_to(WORK_USER)],
                "home": [m.content for m in discord.sent_to(owner_dm)],
            }
            for chat, numbers in sent.items():
                got = [int(m.group(1)) for r in replies[chat] if (m := NUMBER.search(r))]
                counts = Counter(got)
                tally.lost += sum(1 for n in numbers if counts[n] == 0)
                tally.twice += sum(1 for c in counts.values() if c > 1)
                tally.out_of_order += sum(1 for a, b in pairwise(got) if b < a)
            for agent in ("main", "work", "home"):
                code, out = await run_clawgate(
                    home, "--config", str(config), "memory", "audit", "--agent", agent, timeout=120
                )
                if code != 0:
                    tally.audits_failed.append(f"{agent}: {out.strip()[-300:]}")
    finally:
        await asyncio.to_thread(server.remove)
    return tally


async def _held(leases: Leases, workers: set[str]) -> bool:
    holders = await leases.holders()
    return set(holders) == AGENT_LEASES and set(holders.values()) <= workers


async def _first_answers(
    telegram: FakeTelegram, work: FakeTelegram, discord: FakeDiscord, owner_dm: str
) -> None:
    """One exchange per agent before the traffic starts (each bot connected)."""
    telegram.user_says(MAIN_USER, "main 0")
    work.user_says(WORK_USER, "work 0")
    await discord.user_says(owner_dm, "home 0", author_id=OWNER, username="ann")
    await telegram.next_message(MAIN_USER, START_TIMEOUT)
    await work.next_message(WORK_USER, START_TIMEOUT)
    await discord.next_message(owner_dm, START_TIMEOUT)


async def _wait_answered(
    telegram: FakeTelegram,
    work: FakeTelegram,
    discord: FakeDiscord,
    owner_dm: str,
    sent: dict[str, list[int]],
) -> None:
    wanted = {chat: len(numbers) + 1 for chat, numbers in sent.items()}  # + the first exchange

    async def done() -> bool:
        return (
            len(telegram.messages_to(MAIN_USER)) >= wanted["main"]
            and len(work.messages_to(WORK_USER)) >= wanted["work"]
            and len(discord.sent_to(owner_dm)) >= wanted["home"]
        )

    try:
        await eventually(done, FINAL_TIMEOUT)
    except AssertionError:
        pass  # counted as lost below


def report_cluster(tally: ClusterTally) -> bool:
    takeovers = tally.takeovers or [0.0]
    limit = GATEWAY_LEASE + 5
    print(f"\ncluster lane: {tally.workers} workers, 3 agents (2 Telegram bots, 1 Discord bot)")
    print(
        f"  kill -9: {tally.kills}; takeover p50 {statistics.median(takeovers):.1f} s, "
        f"max {max(takeovers):.1f} s (limit lease_seconds {GATEWAY_LEASE:g} + 5 = {limit:g} s)"
    )
    print(
        f"  messages sent {tally.sent}: lost {tally.lost}, answered twice {tally.twice}, "
        f"out of order {tally.out_of_order}"
    )
    print(f"  memory audit: {'clean' if not tally.audits_failed else tally.audits_failed}")
    return (
        tally.lost == 0
        and tally.twice == 0
        and tally.out_of_order == 0
        and not tally.audits_failed
        and max(takeovers) <= limit
    )

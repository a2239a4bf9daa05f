"""Soak lane of a cluster (`python bench/soak.py --cluster N`): N real `clawgate gateway`
workers on one private PostgreSQL (tests/postgres.py), six agents on three bots - the shared
Telegram bot serves three (two through bindings), a second Telegram bot is one agent's own,
the shared Discord bot serves two more (bindings on DM channels) and the default agent's
owner DM - steady traffic in seven chats, and `--kills` rounds of kill -9 on a random worker
(restarted once its agents and bots moved). Bots and agents are leased separately, so a
message usually crosses from one worker to another through the inbound and outbound tables.

Printed: how long each takeover took (until every agent and bot was held by a live worker
again), messages sent, lost (never answered), answered twice, replies out of order within a
chat, and `clawgate memory audit` of every agent after a graceful stop. Exit status 1 if any
of those that must be zero is not, or a takeover took longer than lease_seconds + 5 s."""

from __future__ import annotations

import asyncio
import random
import re
import signal
import statistics
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.cluster_helpers import GATEWAY_LEASE, WORK_TOKEN, Leases, echo, eventually, worker
from tests.discord_world import OWNER
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.postgres import PrivatePostgres
from tests.process import fake_model, fake_telegram, run_clawgate, toml_value, write_config

FINAL_TIMEOUT = 180.0
START_TIMEOUT = 90.0
NUMBER = re.compile(r"(\d+)$")
AGENTS = ("main", "t2", "t3", "work", "d2", "d3")
BOTS = 3
TELEGRAM_USERS = {"main": 1001, "t2": 1002, "t3": 1003}
WORK_USER = 2002
DISCORD_USERS = {"main": OWNER, "d2": "310000000000000002", "d3": "310000000000000003"}


@dataclass
class Chat:
    """One person writing to one agent through one bot."""

    name: str
    say: Callable[[str], Awaitable[None]]
    replies: Callable[[], list[str]]
    sent: list[int] = field(default_factory=list)


@dataclass
class ClusterTally:
    workers: int
    kills: int = 0
    takeovers: list[float] = field(default_factory=list)
    sent: int = 0
    lost: int = 0
    twice: int = 0
    out_of_order: int = 0
    audits: dict[str, str] = field(default_factory=dict)
    lost_in: Counter[str] = field(default_factory=Counter)
    # Replies a kill -9 cut off between their `sending` mark and the platform's answer: failed
    # by the next holder of the bot, never sent again (at most once).
    interrupted: int = 0
    # Of those, the ones the platform never got: the message is unanswered by the delivery
    # contract's at-most-once rule (as on one machine), not lost.
    cut: int = 0
    disorder: list[str] = field(default_factory=list)  # "<chat>: <n> after <m>"
    # Where each lost message stopped: its inbound row (stored? consumed?), its reply's row.
    traces: list[str] = field(default_factory=list)


def soak_home(
    home: Path,
    url: str,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    discord: FakeDiscord,
    llm: FakeLLM,
) -> tuple[Path, dict[str, str]]:
    """The config, and each Discord user's DM channel by agent."""
    dms = {agent: discord.dm_channel(user, agent) for agent, user in DISCORD_USERS.items()}

    def section(name: str, values: dict[str, Any]) -> list[str]:
        return [f"[{name}]", *(f"{k} = {toml_value(v)}" for k, v in values.items())]

    def bound(agent: str, platform: str, chat: str) -> list[str]:
        return [f"[agents.{agent}]", f'bindings = [{{channel = "{platform}", chat = "{chat}"}}]']

    config = write_config(
        home,
        agent=fake_model(llm, request_timeout=30),
        telegram=fake_telegram(telegram, TELEGRAM_USERS.values()),
    )
    lines = [
        *section(
            "channels.discord",
            {
                "enabled": True,
                "token": discord.token,
                "api_base": discord.api_url,
                "gateway_url": discord.gateway_url,
                "allow_from": list(DISCORD_USERS.values()),
                "streaming": "off",
                "reactions": False,
            },
        ),
        *section("limits", {"messages_per_minute": 0}),
        *section(
            "cluster", {"database_url": url, "worker_name": "unset", "lease_seconds": GATEWAY_LEASE}
        ),
        *bound("t2", "telegram", str(TELEGRAM_USERS["t2"])),
        *bound("t3", "telegram", str(TELEGRAM_USERS["t3"])),
        *section("agents.work", {}),
        *section(
            "agents.work.channels.telegram",
            {**fake_telegram(work_telegram, (WORK_USER,)), "token": WORK_TOKEN},
        ),
        *bound("d2", "discord", dms["d2"]),
        *bound("d3", "discord", dms["d3"]),
    ]
    with config.open("a", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return config, dms


def chats_of(
    telegram: FakeTelegram, work: FakeTelegram, discord: FakeDiscord, dms: dict[str, str]
) -> list[Chat]:
    chats = []
    for agent, user in TELEGRAM_USERS.items():

        async def say_tg(text: str, user: int = user) -> None:
            telegram.user_says(user, text)

        chats.append(
            Chat(
                f"telegram {agent}",
                say_tg,
                lambda u=user: [m["text"] for m in telegram.messages_to(u)],
            )
        )

    async def say_work(text: str) -> None:
        work.user_says(WORK_USER, text)

    chats.append(
        Chat(
            "telegram@work work", say_work, lambda: [m["text"] for m in work.messages_to(WORK_USER)]
        )
    )
    for agent, dm in dms.items():

        async def say_dc(text: str, dm: str = dm, agent: str = agent) -> None:
            await discord.user_says(dm, text, author_id=DISCORD_USERS[agent], username=agent)

        chats.append(
            Chat(f"discord {agent}", say_dc, lambda d=dm: [m.content for m in discord.sent_to(d)])
        )
    return chats


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
            config, dms = soak_home(home, url, telegram, work_telegram, discord, llm)
            chats = chats_of(telegram, work_telegram, discord, dms)
            names = [f"w{i}" for i in range(1, workers + 1)]
            running = {name: worker(home, config, name) for name in names}
            leases = await Leases.open(url)
            try:
                for process in running.values():
                    await process.start()
                await eventually(lambda: _held(leases, set(names)), START_TIMEOUT)

                async def discord_connected() -> bool:
                    lines = (line for p in running.values() for line in p.stderr_lines)
                    return any("discord: connected as" in line for line in lines)

                await eventually(discord_connected, START_TIMEOUT)
                await _first_answers(chats)

                async def feed() -> None:
                    n = 0
                    while True:
                        n += 1
                        for chat in chats:
                            await chat.say(f"{chat.name} {n}")
                            chat.sent.append(n)
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
                tally.sent = sum(len(chat.sent) for chat in chats)
                await _wait_answered(chats)
                tally.interrupted = await leases.pool.fetchval(
                    "SELECT count(*) FROM outbound WHERE error = 'interrupted'"
                )
                stored = {
                    row["text"]: (row["seq"], row["consumed_at"] is not None, row["message_id"])
                    for row in await leases.pool.fetch(
                        "SELECT seq, message->>'text' AS text, consumed_at, message_id FROM inbound"
                    )
                }
                # What answered each message, whatever it said (an error notice is no "re: ").
                answers = {
                    row["reply_to"]: f"{row['status']}: {row['text'][:80]!r}"
                    for row in await leases.pool.fetch(
                        "SELECT message->>'reply_to' AS reply_to, message->>'text' AS text,"
                        " status FROM outbound WHERE message->>'reply_to' IS NOT NULL"
                    )
                }
                queued = {
                    row["text"]: f"{row['status']}{'/' + row['error'] if row['error'] else ''}"
                    for row in await leases.pool.fetch(
                        "SELECT message->>'text' AS text, status, error FROM outbound"
                    )
                }
                cut_texts = [
                    row["text"]
                    for row in await leases.pool.fetch(
                        "SELECT message->>'text' AS text FROM outbound WHERE error = 'interrupted'"
                    )
                ]
            finally:
                for process in running.values():
                    if process.process.returncode is None:
                        process.send_signal(signal.SIGTERM)
                        await process.wait(60)
                    await process.close()
                await leases.close()
            for chat in chats:
                got = [int(m.group(1)) for r in chat.replies() if (m := NUMBER.search(r))]
                counts = Counter(got)
                unanswered = [n for n in chat.sent if counts[n] == 0]
                cut = [n for n in unanswered if f"re: {chat.name} {n}" in cut_texts]
                tally.cut += len(cut)
                lost = len(unanswered) - len(cut)
                tally.lost += lost
                if lost:
                    tally.lost_in[chat.name] = lost
                for n in unanswered:
                    if n in cut:
                        continue
                    said = stored.get(f"{chat.name} {n}")
                    where = "never stored" if said is None else f"inbound seq {said[0]}"
                    if said is not None:
                        where += ", consumed" if said[1] else ", not consumed"
                    reply = queued.get(f"re: {chat.name} {n}", "no reply queued")
                    if said is not None and said[2] in answers:
                        reply += f"; answered by {answers[said[2]]}"
                    tally.traces.append(f"{chat.name} {n}: {where}; reply {reply}")
                tally.twice += sum(1 for c in counts.values() if c > 1)
                late = [(a, b) for a, b in pairwise(got) if b < a]
                tally.out_of_order += len(late)
                tally.disorder += [f"{chat.name}: {b} after {a}" for a, b in late]
            for agent in AGENTS:
                code, out = await run_clawgate(
                    home, "--config", str(config), "memory", "audit", "--agent", agent, timeout=120
                )
                tally.audits[agent] = "clean" if code == 0 else out.strip()[-300:]
    finally:
        await asyncio.to_thread(server.remove)
    return tally


async def _held(leases: Leases, workers: set[str]) -> bool:
    holders = await leases.holders("")
    return len(holders) == len(AGENTS) + BOTS and set(holders.values()) <= workers


async def _first_answers(chats: list[Chat]) -> None:
    """One exchange per chat before the traffic starts (each bot connected: Discord does not
    catch up on a channel before its first connection)."""
    for chat in chats:
        await chat.say(f"{chat.name} 0")

    async def answered() -> bool:
        return all(chat.replies() for chat in chats)

    try:
        await eventually(answered, START_TIMEOUT)
    except AssertionError:
        silent = [chat.name for chat in chats if not chat.replies()]
        raise AssertionError(f"no first answer in {', '.join(silent)}") from None


async def _wait_answered(chats: list[Chat]) -> None:
    async def done() -> bool:
        # + the first exchange
        return all(len(chat.replies()) >= len(chat.sent) + 1 for chat in chats)

    try:
        await eventually(done, FINAL_TIMEOUT)
    except AssertionError:
        pass  # counted as lost below


def report_cluster(tally: ClusterTally) -> bool:
    takeovers = tally.takeovers or [0.0]
    limit = GATEWAY_LEASE + 5
    print(
        f"\ncluster lane: {tally.workers} workers, {len(AGENTS)} agents on {BOTS} bots "
        "(2 Telegram, 1 Discord; bots and agents leased apart)"
    )
    print(
        f"  kill -9: {tally.kills}; takeover p50 {statistics.median(takeovers):.1f} s, "
        f"max {max(takeovers):.1f} s (limit lease_seconds {GATEWAY_LEASE:g} + 5 = {limit:g} s)"
    )
    print(
        f"  messages sent {tally.sent}: lost {tally.lost}, answered twice {tally.twice}, "
        f"out of order {tally.out_of_order}"
    )
    if tally.lost:
        print(f"  lost in: {dict(tally.lost_in)}")
    for trace in tally.traces:
        print(f"    lost: {trace}")
    if tally.disorder:
        print(f"  out of order: {', '.join(tally.disorder)}")
    print(
        f"  replies cut off mid-send by a kill (failed, not sent again): {tally.interrupted}, "
        f"of which the platform never got {tally.cut} (unanswered by the at-most-once rule)"
    )
    for agent, audit in tally.audits.items():
        print(f"  memory audit {agent}: {audit}")
    return (
        tally.lost == 0
        and tally.twice == 0
        and tally.out_of_order == 0
        and all(audit == "clean" for audit in tally.audits.values())
        and max(takeovers) <= limit
    )

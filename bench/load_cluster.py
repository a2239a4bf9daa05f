"""Load across cluster workers (`python bench/load.py --cluster 3`): turns per second and CPU
per turn with 1, 2, ... N `clawgate gateway` workers on one private PostgreSQL, six agents each
with its own Telegram bot on the loopback fakes, FakeLLM answering at once. Bots and agents
are leased apart, so a message goes bot worker -> `inbound` -> agent worker -> `outbound` ->
bot worker.

Printed: the end-to-end throughput, the workers' CPU time per turn (from /proc: expect it
flat as workers are added, and no gain in turns/s on a 2-core machine), the time the
database hops of one turn take (p50 of the statements a turn runs, in order: the message
stored, read, consumed with its reply queued, the reply read, claimed and finished - the
latency a cluster adds to a turn, wake-ups aside), and the checks: every message answered
once, in order.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from itertools import pairwise
from pathlib import Path

from pydantic import SecretStr

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.leases import acquire
from clawgate.gateway.cluster.queues import (
    bot_resource,
    claim,
    consume_answered,
    finish,
    pending_outbound,
    put_inbound,
    put_outbound,
    waiting_inbound,
)
from clawgate.gateway.cluster.schema import migrate
from clawgate.kernel.bus import InboundMessage, OutboundMessage
from clawgate.kernel.config_cluster import ClusterConfig
from tests.cluster_helpers import Leases, agent_started, echo, eventually, worker
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.postgres import PrivatePostgres
from tests.process import fake_model, fake_telegram, toml_value, write_config

AGENTS = ["main", "a1", "a2", "a3", "a4", "a5"]
USERS = [1001, 1002, 1003, 1004, 1005]
NUMBER = re.compile(r"(\d+)$")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def write_cluster_config(home: Path, url: str, bots: list[FakeTelegram], llm: FakeLLM) -> Path:
    config = write_config(
        home, agent=fake_model(llm, request_timeout=60), telegram=fake_telegram(bots[0], USERS)
    )
    lines = [
        "[limits]",
        "messages_per_minute = 0",
        "[cluster]",
        f"database_url = {toml_value(url)}",
        'worker_name = "unset"',
        "lease_seconds = 15",
    ]
    for name, bot in zip(AGENTS[1:], bots[1:], strict=True):
        section = {**fake_telegram(bot, USERS), "token": bot.token}
        lines += [f"[agents.{name}]", f"[agents.{name}.channels.telegram]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in section.items()]
    with config.open("a", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return config


async def run(workers: int, messages: int, server: PrivatePostgres, tmp: Path) -> dict:
    home = tmp / f"w{workers}"
    home.mkdir()
    url = await asyncio.to_thread(server.create_database)
    async with FakeLLM() as llm:
        llm.handler = echo
        # main's bot has the fakes' default token, the one fake_telegram() configures.
        bots = [FakeTelegram()] + [
            FakeTelegram(token=f"{100 + i}:BOT-token") for i in range(1, len(AGENTS))
        ]
        for bot in bots:
            await bot.__aenter__()
        leases = await Leases.open(url)
        processes = [
            worker(home, write_cluster_config(home, url, bots, llm), f"w{i}")
            for i in range(1, workers + 1)
        ]
        try:
            for process in processes:
                await process.start()
            try:
                for name in AGENTS:
                    await eventually(lambda n=name: agent_started(processes, n), 120)
            except AssertionError:
                print("\n".join(processes[0].stderr_lines[-40:]))
                raise
            await eventually(lambda: _spread(leases, workers), 120)
            cpu0 = sum(cpu_seconds(p.process.pid) for p in processes)
            started = time.monotonic()
            for n in range(1, messages + 1):
                for bot in bots:
                    for user in USERS:
                        bot.user_says(user, f"m {n}")
            turns = messages * len(bots) * len(USERS)

            async def done() -> bool:
                return sum(len(b.sent) for b in bots) >= turns

            await eventually(done, 120)
            elapsed = time.monotonic() - started
            cpu = sum(cpu_seconds(p.process.pid) for p in processes) - cpu0
            lost = twice = disorder = 0
            for bot in bots:
                for user in USERS:
                    got = [
                        int(m.group(1))
                        for r in bot.messages_to(user)
                        if (m := NUMBER.search(r["text"]))
                    ]
                    counts = Counter(got)
                    lost += sum(1 for k in range(1, messages + 1) if counts[k] == 0)
                    twice += sum(1 for c in counts.values() if c > 1)
                    disorder += sum(1 for a, b in pairwise(got) if b < a)
            hops = await _turn_hops_ms(url)
        finally:
            for process in processes:
                await process.close()
            await leases.close()
            for bot in bots:
                await bot.__aexit__(None, None, None)
    return {
        "workers": workers,
        "turns": turns,
        "seconds": elapsed,
        "cpu_ms_per_turn": cpu / turns * 1000,
        "turn_hops_ms": hops,
        "lost": lost,
        "twice": twice,
        "out_of_order": disorder,
    }


async def _spread(leases: Leases, workers: int) -> bool:
    holders = await leases.holders()
    return len(holders) == len(AGENTS) and len(set(holders.values())) == workers


async def _turn_hops_ms(url: str) -> float:
    """p50 of the database hops of one turn, run as the workers run them (queues.py)."""
    config = ClusterConfig(database_url=SecretStr(url), worker_name="bench")
    pool = await open_pool(config)
    try:
        await migrate(pool)
        bot_name = bot_resource("telegram", "bench-token")
        async with pool.acquire() as conn:
            bot = await acquire(conn, bot_name, "bench", 60)
            agent = await acquire(conn, "agent:bench", "bench", 60)
        assert bot is not None and agent is not None
        times = []
        for n in range(1, 201):
            said = InboundMessage(
                channel="telegram", chat_id="1", message_id=f"{n}:{n}", text="m", agent="bench"
            )
            reply = OutboundMessage(
                channel="telegram", chat_id="1", text="re: m", reply_to=said.message_id
            )
            started = time.perf_counter()
            async with pool.acquire() as conn:
                await put_inbound(conn, bot, bot_name, said)
            async with pool.acquire() as conn:
                await waiting_inbound(conn, "bench", n - 1)
            async with pool.acquire() as conn, conn.transaction():
                await consume_answered(
                    conn, agent, "bench", bot_name, "1", said.message_id, through=True
                )
                row = await put_outbound(conn, agent, bot_name, reply)
            async with pool.acquire() as conn:
                await pending_outbound(conn, bot_name)
                await claim(conn, bot, row)
                await finish(conn, bot, row, None)
            times.append((time.perf_counter() - started) * 1000)
        return statistics.median(times)
    finally:
        await pool.close()


async def bench(max_workers: int, messages: int) -> int:
    server = PrivatePostgres()
    await asyncio.to_thread(server.start)
    failed = False
    try:
        with tempfile.TemporaryDirectory(prefix="clawgate-load-cluster-") as tmp:
            for workers in range(1, max_workers + 1):
                r = await run(workers, messages, server, Path(tmp))
                print(
                    f"{r['workers']} worker(s): {r['turns']} turns in {r['seconds']:.1f} s = "
                    f"{r['turns'] / r['seconds']:.1f} turns/s; workers' CPU {r['cpu_ms_per_turn']:.1f} ms/turn; "
                    f"database hops of a turn {r['turn_hops_ms']:.2f} ms p50 (target <= 5 ms); "
                    f"lost {r['lost']}, twice {r['twice']}, out of order {r['out_of_order']}",
                    flush=True,
                )
                failed |= bool(r["lost"] or r["twice"] or r["out_of_order"])
    finally:
        await asyncio.to_thread(server.remove)
    print(f"RESULT: {'FAIL' if failed else 'ok'}")
    return 1 if failed else 0

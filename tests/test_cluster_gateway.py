"""Real `clawgate gateway` workers with `[cluster]` on one private PostgreSQL: three agents
(two Telegram bots and a Discord bot on the loopback fakes) spread over two workers; every
agent answers; a worker killed with -9 hands its agents to the other within the lease, and
what was sent meanwhile is answered once; `clawgate cluster status` and `drain` (which moves
the bots too)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from tests.cluster_helpers import AGENT_LEASES as AGENTS
from tests.cluster_helpers import GATEWAY_LEASE as LEASE
from tests.cluster_helpers import (
    MAIN_USER,
    WORK_TOKEN,
    WORK_USER,
    Leases,
    cluster_home,
    echo,
    eventually,
    worker,
)
from tests.discord_world import OWNER
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import (
    ClawgateProcess,
    run_clawgate,
)

START_TIMEOUT = 60.0
REPLY_TIMEOUT = 60.0


@pytest.fixture
async def work_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=WORK_TOKEN) as server:
        yield server


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


async def test_workers_share_the_agents_and_a_killed_one_loses_nothing(
    tmp_path: Path,
    database_url: str,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    discord: FakeDiscord,
    fake_llm: FakeLLM,
) -> None:
    fake_llm.handler = echo
    config, owner_dm = cluster_home(
        tmp_path, database_url, telegram, work_telegram, discord, fake_llm
    )
    leases = await Leases.open(database_url)
    workers = {name: worker(tmp_path, config, name) for name in ("w1", "w2")}
    try:
        for process in workers.values():
            await process.start()
        await eventually(lambda: _spread(leases), START_TIMEOUT)
        # A Discord message sent before its bot connected is not caught up on (a new session).
        # A worker that started first may have taken every agent and bot and handed some back,
        # so each agent runs under whatever generation its lease has now, and the Discord bot
        # may have moved once: its holder must have connected since.
        await eventually(lambda: _running(workers.values(), leases), START_TIMEOUT)
        await eventually(lambda: _discord_settled(workers, leases), START_TIMEOUT)

        async def everyone_answers(word: str) -> None:
            telegram.user_says(MAIN_USER, f"main {word}")
            work_telegram.user_says(WORK_USER, f"work {word}")
            await discord.user_says(owner_dm, f"home {word}", author_id=OWNER, username="ann")
            assert (await telegram.next_message(MAIN_USER, REPLY_TIMEOUT))[
                "text"
            ] == f"re: main {word}"
            assert (await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT))[
                "text"
            ] == f"re: work {word}"
            assert (
                await discord.next_message(owner_dm, REPLY_TIMEOUT)
            ).content == f"re: home {word}"

        await everyone_answers("one")

        victim_name = (await leases.holders())["agent:work"]
        survivor = next(n for n in workers if n != victim_name)
        workers[victim_name].send_signal(signal.SIGKILL)
        # Sent while nobody runs the agent: waits at the platform, answered by the survivor.
        work_telegram.user_says(WORK_USER, "work meanwhile")
        moved = await eventually(lambda: _all_held_by(leases, survivor), LEASE + 5)
        assert moved <= LEASE + 5
        assert (await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT))[
            "text"
        ] == "re: work meanwhile"
        await everyone_answers("two")

        # Answered once each.
        for fake, user in ((telegram, MAIN_USER), (work_telegram, WORK_USER)):
            texts = [m["text"] for m in fake.messages_to(user)]
            assert len(texts) == len(set(texts)), texts
        assert len(discord.sent_to(owner_dm)) == 2

        code, out = await run_clawgate(
            tmp_path, "--config", str(config), "cluster", "status", "--json"
        )
        assert code == 0, out
    finally:
        for process in workers.values():
            await process.close()
        await leases.close()


async def test_drain_hands_a_worker_s_agents_to_the_others(
    tmp_path: Path,
    database_url: str,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    discord: FakeDiscord,
    fake_llm: FakeLLM,
) -> None:
    fake_llm.handler = echo
    config, _ = cluster_home(tmp_path, database_url, telegram, work_telegram, discord, fake_llm)
    leases = await Leases.open(database_url)
    workers = [worker(tmp_path, config, name) for name in ("w1", "w2")]
    try:
        for process in workers:
            await process.start()
        await eventually(lambda: _spread(leases), START_TIMEOUT)
        code, out = await run_clawgate(tmp_path, "--config", str(config), "cluster", "drain", "w1")
        assert code == 0, out
        assert set((await leases.holders()).values()) <= {"w2"}
        await eventually(lambda: _all_held_by(leases, "w2"), LEASE + 5)
        # The bots went with the agents.
        await eventually(lambda: _bots_held_by(leases, "w2"), LEASE + 5)
        code, out = await run_clawgate(tmp_path, "--config", str(config), "cluster", "status")
        assert code == 0, out
        work_telegram.user_says(WORK_USER, "after the drain")
        assert (await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT))[
            "text"
        ] == "re: after the drain"
        code, out = await run_clawgate(
            tmp_path, "--config", str(config), "cluster", "drain", "nobody"
        )
        assert code == 1 and "no worker named 'nobody'" in out
    finally:
        for process in workers:
            await process.close()
        await leases.close()


async def _running(workers: Iterable[ClawgateProcess], leases: Leases) -> bool:
    """Every agent's gateway started, under the lease generation it holds now."""
    lines = [line for w in workers for line in w.stderr_lines]
    current = await leases.generations()
    started = {
        f"agent:{name}"
        for name in ("main", "work", "home")
        if f"agent:{name}" in current
        and any(
            f"agent {name} running here (lease generation {current[f'agent:{name}']})" in x
            for x in lines
        )
    }
    return started == AGENTS


async def _discord_settled(workers: dict[str, ClawgateProcess], leases: Leases) -> bool:
    """The bots spread over both workers (within its fair share, no worker hands one back
    again) and the Discord bot connected on its holder since it took the bot there."""
    bots = await leases.holders("bot")
    if len(bots) != 3 or set(bots.values()) != {"w1", "w2"}:
        return False
    holder = next(w for r, w in bots.items() if r.startswith("bot:discord:"))
    lines = workers[holder].stderr_lines
    taken = [i for i, line in enumerate(lines) if "bot discord@home running here" in line]
    return bool(taken) and any("discord: connected as" in x for x in lines[taken[-1] :])


async def _spread(leases: Leases) -> bool:
    holders = await leases.holders()
    return set(holders) == AGENTS and set(holders.values()) == {"w1", "w2"}


async def _all_held_by(leases: Leases, worker: str) -> bool:
    holders = await leases.holders()
    return set(holders) == AGENTS and set(holders.values()) == {worker}


async def _bots_held_by(leases: Leases, worker: str) -> bool:
    holders = await leases.holders("bot")
    return len(holders) == 3 and set(holders.values()) == {worker}

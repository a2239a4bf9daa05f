"""A bot and the agents it serves on different workers of a cluster (real `clawgate gateway`
workers, the fake Telegram and the fake LLM, the private PostgreSQL): one shared bot serves
two agents (a binding sends one chat to the second), the agents are spread over two workers,
so the bot's worker and at least one agent's worker differ. Every message is answered once,
by the agent its chat is bound to, and a kill -9 of the bot's worker or of an agent's worker
loses nothing and answers nothing twice."""

from __future__ import annotations

import signal
from collections.abc import Iterable
from pathlib import Path

from tests.cluster_helpers import MAIN_USER, WORK_USER, Leases, echo, eventually, worker
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, toml_value, write_config

LEASE = 5.0
START_TIMEOUT = 60.0
REPLY_TIMEOUT = 60.0


def shared_bot_home(home: Path, url: str, telegram: FakeTelegram, llm: FakeLLM) -> Path:
    config = write_config(
        home,
        agent=fake_model(llm, request_timeout=30),
        telegram=fake_telegram(telegram, (MAIN_USER, WORK_USER)),
    )
    with config.open("a", encoding="utf-8") as file:
        file.write(
            "[limits]\nmessages_per_minute = 0\n"
            f'[cluster]\ndatabase_url = {toml_value(url)}\nworker_name = "unset"\n'
            f"lease_seconds = {LEASE}\n"
            "[agents.work]\n"
            f'bindings = [{{channel = "telegram", chat = "{WORK_USER}"}}]\n'
        )
    return config


async def test_a_bot_and_its_agents_on_different_workers_lose_nothing_to_a_kill(
    tmp_path: Path, database_url: str, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    config = shared_bot_home(tmp_path, database_url, telegram, fake_llm)
    leases = await Leases.open(database_url)
    workers = {name: worker(tmp_path, config, name) for name in ("w1", "w2")}
    expected: dict[int, list[str]] = {MAIN_USER: [], WORK_USER: []}

    def say(user: int, text: str) -> None:
        telegram.user_says(user, text)
        expected[user].append(f"re: {text}")

    async def answered() -> bool:
        return all(
            [m["text"] for m in telegram.messages_to(user)] == texts
            for user, texts in expected.items()
        )

    async def ready(names: set[str]) -> bool:
        """Both agents on different workers, the bot held, all of it running."""
        agents = await leases.holders("agent")
        bots = await leases.holders("bot")
        if len(agents) != 2 or set(agents.values()) != names or len(bots) != 1:
            return False
        return _running(workers.values(), "agent main", "agent work", "bot telegram")

    try:
        for process in workers.values():
            await process.start()
        await eventually(lambda: ready({"w1", "w2"}), START_TIMEOUT)
        say(MAIN_USER, "main one")
        say(WORK_USER, "work one")
        await eventually(answered, REPLY_TIMEOUT)
        # The binding held: the work agent's own session has the work chat.
        sessions = [p.relative_to(tmp_path) for p in _sessions(tmp_path, WORK_USER)]
        assert [p.parts[:3] for p in sessions] == [("data", "agents", "work")], sessions

        # The bot's worker dies: what is sent meanwhile waits at Telegram.
        bot_worker = next(iter((await leases.holders("bot")).values()))
        workers[bot_worker].send_signal(signal.SIGKILL)
        survivor = next(n for n in workers if n != bot_worker)
        say(MAIN_USER, "main while the bot moves")
        say(WORK_USER, "work while the bot moves")
        await eventually(lambda: _all_held_by(leases, survivor), LEASE + 5)
        await eventually(answered, REPLY_TIMEOUT)

        # Back to two workers; then the work agent's worker dies.
        await workers[bot_worker].close()
        workers[bot_worker] = worker(tmp_path, config, bot_worker)
        await workers[bot_worker].start()
        await eventually(lambda: ready({"w1", "w2"}), START_TIMEOUT)
        work_worker = (await leases.holders("agent"))["agent:work"]
        workers[work_worker].send_signal(signal.SIGKILL)
        other = next(n for n in workers if n != work_worker)
        say(WORK_USER, "work while the agent moves")
        say(MAIN_USER, "main while the agent moves")
        await eventually(lambda: _all_held_by(leases, other), LEASE + 5)
        await eventually(answered, REPLY_TIMEOUT)
        # Nothing more comes: every message answered exactly once, in order.
        say(MAIN_USER, "main last")
        say(WORK_USER, "work last")
        await eventually(answered, REPLY_TIMEOUT)
    finally:
        for process in workers.values():
            await process.close()
        await leases.close()


def _sessions(home: Path, user: int) -> list[Path]:
    return list(home.rglob(f"telegram_{user}.jsonl"))


def _running(workers: Iterable[ClawgateProcess], *names: str) -> bool:
    """Whether each of `names` ("agent work", "bot telegram") was logged running."""
    lines = [line for w in workers for line in w.stderr_lines]
    return all(any(f"{name} running here" in line for line in lines) for name in names)


async def _all_held_by(leases: Leases, name: str) -> bool:
    held = await leases.holders("")
    return len(held) == 3 and set(held.values()) == {name}

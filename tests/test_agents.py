"""Several agents in one real `clawgate gateway` process, on loopback fakes.

    main   the top-level keys: the shared Telegram bot, and Discord chats nobody binds
    work   its own Telegram bot and model; the Discord #general channel is bound to it
    home   the owner's Discord DM is bound to it; it may search main's memory, read-only

Each agent has its own fake model, so what each model was sent shows what each agent knew.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from clawgate.channels.manager import ChannelStates
from clawgate.gateway.app import build_runtimes
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.routing import AccountBus, Router
from clawgate.kernel.bus import ChatFacts, InboundMessage, MessageBus, Trust
from clawgate.kernel.config import AgentConfig, AgentSpec, Config, load_config
from tests.discord_world import MEMBER, OWNER
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, Reply, error, gate, hang, text, tool_call
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import RecordingChannel
from tests.process import ClawgateProcess, fake_model, fake_telegram, toml_value, write_config

MAIN_USER = 1001
WORK_USER = 2002
WORK_TOKEN = "654321:WORK-token"
# A word, not digits: Discord ids and tool-call ids in the requests are long random-looking
# numbers, and a four-digit secret turned up inside one of them once (a false leak).
SECRET = "quokkaspire"
FACT = f"locker code {SECRET}"
START_TIMEOUT = 60.0
REPLY_TIMEOUT = 90.0
EXIT_TIMEOUT = 40.0


@pytest.fixture
async def work_telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=WORK_TOKEN) as server:
        yield server


@pytest.fixture
async def work_llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
async def home_llm() -> AsyncIterator[FakeLLM]:
    async with FakeLLM() as server:
        yield server


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def user_text(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"]) if users else ""


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def answering(name: str, tools: dict[str, Callable[[], Reply]] | None = None) -> Any:
    """A model that runs the tool a message names ("do <key>") once, then says what the
    tool returned; else answers "<name>: <message>"."""

    def model(body: dict[str, Any]) -> Reply:
        said = user_text(body)
        if body["messages"][-1].get("role") == "tool":
            return text(f"{name} tool: {tool_results(body)[-1]}")
        for key, reply in (tools or {}).items():
            if f"do {key}" in said:
                return reply()
        return text(f"{name}: {said.split('] ')[-1]}")

    return model


class Homes:
    """The three agents' config, on the fakes."""

    def __init__(
        self,
        home: Path,
        main_tg: FakeTelegram,
        work_tg: FakeTelegram,
        discord: FakeDiscord,
        main_llm: FakeLLM,
        work_llm: FakeLLM,
        home_llm: FakeLLM,
    ) -> None:
        self.home = home
        self.guild = discord.add_guild("Home")
        self.general = discord.add_text_channel(self.guild, "general")
        self.owner_dm = discord.dm_channel(OWNER, "ann")
        discord_section = {
            "enabled": True,
            "token": discord.token,
            "api_base": discord.api_url,
            "gateway_url": discord.gateway_url,
            "allow_from": [OWNER],
            "group_allow": [self.guild],
            "streaming": "off",  # whole replies: each answer is read as one message
            "reactions": False,
        }
        work_telegram = {
            "token": WORK_TOKEN,
            "base_url": work_tg.base_url,
            "base_file_url": work_tg.base_file_url,
            "allow_from": [str(WORK_USER)],
            "streaming": "off",
            "reactions": False,
        }

        def section(name: str, values: dict[str, Any]) -> list[str]:
            return [f"[{name}]", *(f"{k} = {toml_value(v)}" for k, v in values.items())]

        lines = [
            "[limits]",
            "messages_per_minute = 0",
            *section("channels.discord", discord_section),
            *section(
                "agents.work",
                {**fake_model(work_llm, request_timeout=60), "max_concurrent_turns": 1},
            ),
            f'bindings = [{{channel = "discord", chat = "{self.general}"}}]',
            *section("agents.work.channels.telegram", work_telegram),
            *section("agents.home", {**fake_model(home_llm, request_timeout=60)}),
            'share_memory_from = ["main"]',
            f'bindings = [{{channel = "discord", chat = "{self.owner_dm}"}}]',
        ]
        self.config = write_config(
            home,
            agent={**fake_model(main_llm, request_timeout=60), "memory_window": 1000},
            telegram=fake_telegram(main_tg, (MAIN_USER,)),
        )
        # The [agents.*] tables go after every top-level table the helper writes.
        with self.config.open("a", encoding="utf-8") as file:
            file.write("\n".join(lines) + "\n")
        self.work_data = home / "data" / "agents" / "work"

    def gateway(self) -> ClawgateProcess:
        return ClawgateProcess(self.home, "--config", str(self.config), "gateway")

    async def started(self, gateway: ClawgateProcess) -> None:
        for account in ("telegram", "telegram@work", "discord"):
            await gateway.wait_for_log(f"channel {account} ready", START_TIMEOUT)


@pytest.fixture
def homes(
    tmp_path: Path,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    discord: FakeDiscord,
    fake_llm: FakeLLM,
    work_llm: FakeLLM,
    home_llm: FakeLLM,
) -> Homes:
    return Homes(tmp_path, telegram, work_telegram, discord, fake_llm, work_llm, home_llm)


def files_containing(root: Path, needle: str) -> list[Path]:
    return [
        path for path in root.rglob("*") if path.is_file() and needle.encode() in path.read_bytes()
    ]


async def test_each_agent_answers_its_own_chats_and_keeps_its_memory_to_itself(
    homes: Homes,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    discord: FakeDiscord,
    fake_llm: FakeLLM,
    work_llm: FakeLLM,
    home_llm: FakeLLM,
) -> None:
    main_memory = homes.home / "workspace" / "memory" / "MEMORY.md"
    fake_llm.handler = answering(
        "main",
        {"remember": lambda: tool_call("append_file", path="memory/MEMORY.md", content=FACT)},
    )
    work_llm.handler = answering(
        "work",
        {
            "search": lambda: tool_call("memory_search", query="locker code"),
            "relative": lambda: tool_call(
                "read_file", path="../../../../workspace/memory/MEMORY.md"
            ),
            "absolute": lambda: tool_call("read_file", path=str(main_memory)),
        },
    )
    home_llm.handler = answering(
        "home", {"search": lambda: tool_call("memory_search", query="locker code")}
    )

    async with homes.gateway() as gateway:
        await homes.started(gateway)

        # main, on the shared bot, writes a fact to its memory.
        telegram.user_says(MAIN_USER, "do remember")
        reply = await telegram.next_message(MAIN_USER, REPLY_TIMEOUT)
        assert reply["text"].startswith("main tool:")
        assert FACT in main_memory.read_text(encoding="utf-8"), reply["text"]

        # work answers on its own bot only, with its own model.
        work_telegram.user_says(WORK_USER, "hello")
        assert (await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT))["text"] == "work: hello"
        assert telegram.messages_to(WORK_USER) == []

        # Discord: #general is bound to work, the owner's DM to home.
        await discord.user_says(
            homes.general, "in general", author_id=MEMBER, username="bob", mentions_bot=True
        )
        assert (await discord.next_message(homes.general, REPLY_TIMEOUT)).content == (
            "work: in general"
        )
        # An attachment posted in a chat bound to work lands in work's workspace only.
        await discord.user_says(
            homes.general,
            "a file",
            author_id=MEMBER,
            username="bob",
            mentions_bot=True,
            attachments={"plan.txt": b"the plan"},
        )
        assert (await discord.next_message(homes.general, REPLY_TIMEOUT)).content.startswith(
            "work: "
        )
        assert [p.name for p in homes.work_data.rglob("*plan.txt")] != []
        assert list((homes.home / "workspace").rglob("*plan.txt")) == []
        await discord.user_says(homes.owner_dm, "in my dm", author_id=OWNER, username="ann")
        assert (await discord.next_message(homes.owner_dm, REPLY_TIMEOUT)).content == (
            "home: in my dm"
        )

        # work cannot find main's fact, nor read main's file by a path out of its workspace.
        for ask in ("do search", "do relative", "do absolute"):
            work_telegram.user_says(WORK_USER, ask)
            answer = (await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT))["text"]
            assert answer.startswith("work tool:"), answer
            assert SECRET not in answer
        found = [b for b in work_llm.requests if b["messages"][-1].get("role") == "tool"]
        assert "No memory matches" in tool_results(found[0])[-1]
        for refused in found[1:]:
            assert "outside" in tool_results(refused)[-1].lower(), tool_results(refused)

        # home shares main's memory, read-only and labelled.
        await discord.user_says(homes.owner_dm, "do search", author_id=OWNER, username="ann")
        shared = (await discord.next_message(homes.owner_dm, REPLY_TIMEOUT)).content
        assert "[agent main, read-only]" in shared and SECRET in shared

        # /status lists every agent with its channels.
        work_telegram.user_says(WORK_USER, "/status")
        listed = (await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT))["text"]
        assert "telegram@work (agent work): running" in listed, listed
        assert "discord (agent main, work, home): running" in listed, listed

        status = json.loads((homes.home / "data" / "status.json").read_text(encoding="utf-8"))
        agents = {a["name"]: a for a in status["agents"]}
        assert set(agents) == {"main", "work", "home"}
        assert agents["work"]["channels"] == ["telegram@work", "discord"]
        assert agents["work"]["workspace"] == str(homes.work_data / "workspace")

        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr

    # Nothing of main's fact reached work: not its model, not any file of its own.
    leaked = [body for body in work_llm.requests if SECRET in json.dumps(body)]
    assert not leaked, json.dumps(leaked[0])[:4000]
    assert files_containing(homes.work_data, SECRET) == []
    # home read it (its model saw the search result) but wrote nothing of main's.
    home_data = homes.home / "data" / "agents" / "home"
    assert not (home_data / "workspace" / "memory" / "MEMORY.md").exists()
    # main's model never saw the other agents' chats.
    assert all("in general" not in json.dumps(body) for body in fake_llm.requests)
    assert (homes.work_data / "workspace" / "sessions" / "telegram_2002.jsonl").exists()
    assert not (homes.home / "workspace" / "sessions" / "telegram_2002.jsonl").exists()


@pytest.mark.long
async def test_a_failing_agent_never_holds_up_another_and_kill_9_loses_nothing(
    homes: Homes,
    telegram: FakeTelegram,
    work_telegram: FakeTelegram,
    fake_llm: FakeLLM,
    work_llm: FakeLLM,
) -> None:
    release = asyncio.Event()
    # work's model holds every call, then fails it with a 500; main's answers at once.
    work_llm.handler = lambda body: gate(release, error(500))
    fake_llm.handler = answering("main")

    async with homes.gateway() as gateway:
        await homes.started(gateway)
        work_telegram.user_says(WORK_USER, "first")
        await work_llm.wait_for_requests(1, timeout=REPLY_TIMEOUT)
        # work's only turn slot is held by its failing model: main still answers, twice.
        for said in ("one", "two"):
            telegram.user_says(MAIN_USER, said)
            reply = await telegram.next_message(MAIN_USER, REPLY_TIMEOUT)
            assert reply["text"] == f"main: {said}"
        assert work_telegram.sent == []
        release.set()
        failed = await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT)
        assert failed["text"] != "work: first"
        # Both agents use one model name: the log line names the agent that failed.
        logged = await gateway.wait_for_log("model openai/fake-model failed", REPLY_TIMEOUT)
        assert "[work] model openai/fake-model failed" in logged, logged
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr

    # Both agents mid-turn when the process is killed.
    work_llm.handler = lambda body: hang()
    fake_llm.handler = lambda body: hang()
    requests = (len(fake_llm.requests), len(work_llm.requests))
    async with homes.gateway() as crashed:
        await homes.started(crashed)
        telegram.user_says(MAIN_USER, "main while crashing")
        work_telegram.user_says(WORK_USER, "work while crashing")
        await fake_llm.wait_for_requests(requests[0] + 1, timeout=REPLY_TIMEOUT)
        await work_llm.wait_for_requests(requests[1] + 1, timeout=REPLY_TIMEOUT)
        crashed.send_signal(signal.SIGKILL)
        assert await crashed.wait(EXIT_TIMEOUT) == -signal.SIGKILL

    fake_llm.handler = answering("main")
    work_llm.handler = answering("work")
    async with homes.gateway() as restarted:
        await homes.started(restarted)
        main_reply = await telegram.next_message(MAIN_USER, REPLY_TIMEOUT)
        work_reply = await work_telegram.next_message(WORK_USER, REPLY_TIMEOUT)
        restarted.send_signal(signal.SIGTERM)
        assert await restarted.wait(EXIT_TIMEOUT) == 0, restarted.stderr

    assert main_reply["text"] == "main: main while crashing"
    assert work_reply["text"] == "work: work while crashing"
    # Answered once each, through its own bot.
    assert [m["text"] for m in telegram.messages_to(MAIN_USER)][-1:] == [main_reply["text"]]
    assert len(work_telegram.messages_to(WORK_USER)) == 2
    assert telegram.messages_to(WORK_USER) == [] and work_telegram.messages_to(MAIN_USER) == []


# -- routing, without a process ---------------------------------------------------------------


def routed(router: Router, account: str, chat: str, groups: tuple[str, ...] = ()) -> str:
    facts = ChatFacts(private=not groups, user_id="1", group_ids=groups)
    message = InboundMessage(channel=account.split("@")[0], chat_id=chat, facts=facts)
    return router.agent_for(account, message)


def test_router_order_own_bot_then_chat_then_guild_then_whole_channel_then_default(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
data_dir = "{tmp_path}/data"
workspace = "{tmp_path}/ws"
default_agent = "fam"
[channels.telegram]
enabled = true
token = "{TOKEN}"
[channels.discord]
enabled = true
token = "dc"
[agents.work]
bindings = [{{channel = "discord", guild = "900"}}]
[agents.work.channels.telegram]
token = "{WORK_TOKEN}"
[agents.fam]
bindings = [{{channel = "discord", chat = "55"}}, {{channel = "telegram", chat = "-7"}}]
[agents.any]
bindings = [{{channel = "discord"}}]
""",
        encoding="utf-8",
    )
    router = Router(load_config(path, environ={}))

    assert set(router.accounts) == {"telegram", "telegram@work", "discord"}
    assert routed(router, "telegram@work", "123") == "work"
    assert routed(router, "telegram", "-7", ("-7",)) == "fam"
    assert routed(router, "telegram", "-7/12", ("-7",)) == "fam"  # a forum topic
    assert routed(router, "telegram", "123") == "fam"  # the default agent
    assert routed(router, "discord", "55", ("55", "900")) == "fam"  # chat beats guild
    assert routed(router, "discord", "56", ("56", "900")) == "work"
    assert routed(router, "discord", "57", ("57", "901")) == "any"
    assert router.account_for("work", "telegram") == "telegram@work"
    assert router.account_for("work", "discord") == "discord"
    assert router.account_for("fam", "telegram") == "telegram"
    assert router.accounts_of("work") == ["telegram@work", "discord"]


def test_router_of_a_single_agent_config_is_todays_gateway(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[channels.telegram]\nenabled = true\ntoken = "{TOKEN}"\n', encoding="utf-8")
    config = load_config(path, environ={})
    router = Router(config)

    assert list(router.accounts) == ["telegram"]
    assert router.accounts["telegram"].config is config
    assert routed(router, "telegram", "5") == "main"
    assert router.account_for("main", "telegram") == "telegram"


async def test_a_preset_agent_is_honoured_and_an_unknown_one_refused(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = answering("model")
    config = Config(
        workspace=tmp_path / "ws",
        data_dir=tmp_path / "data",
        agent=agent_config,
        agents={"work": AgentSpec()},
    )
    bus = MessageBus()
    router = Router(config)
    channel = RecordingChannel(AccountBus(bus, "test", router))
    gateway = Gateway(
        build_runtimes(router, bus, ChannelStates()), {"test": channel}, bus, router=router
    )
    await gateway.start()
    try:
        for chat, agent in (("1", "work"), ("2", None), ("3", "ghost")):
            await bus.publish_inbound(
                InboundMessage(
                    channel="test", chat_id=chat, text=f"to {agent}", trust=Trust.OWNER, agent=agent
                )
            )
        to_work, to_default, to_ghost = [await channel.next_reply(c) for c in ("1", "2", "3")]
    finally:
        await gateway.stop()

    assert (to_work.agent, to_default.agent) == ("work", "main")
    assert to_ghost.is_error and "No agent named 'ghost' here (known: main, work)" in to_ghost.text
    work_sessions = tmp_path / "data" / "agents" / "work" / "workspace" / "sessions"
    assert [p.name for p in work_sessions.glob("*.jsonl")] == ["test_1.jsonl"]
    assert [p.name for p in (tmp_path / "ws" / "sessions").glob("*.jsonl")] == ["test_2.jsonl"]

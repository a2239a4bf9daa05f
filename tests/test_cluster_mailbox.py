"""The agent's side of the cluster's tables in process: a new holder of an agent starting its
gateway over what the last holder left, against the private PostgreSQL and the fake model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clawgate.agent.runtime import AgentRuntime
from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.leases import acquire
from clawgate.gateway.cluster.mailbox import Inbox, Outbox
from clawgate.gateway.cluster.queues import bot_resource, put_inbound
from clawgate.gateway.cluster.schema import migrate
from clawgate.gateway.cluster.tables import TableWriter
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.kernel.bus import ChatFacts, InboundMessage, MessageBus, Trust
from clawgate.kernel.config import AgentConfig, ChannelsConfig, TelegramConfig
from tests.cluster_helpers import cluster_config, echo, eventually
from tests.fakes.llm import FakeLLM
from tests.harness import make_config

BOT = bot_resource("telegram", "123:secret-token")
STAMP = "2026-12-06T04:31:51.000Z"
OWNER = "1001"


def left_session(workspace: Path) -> None:
    """What a holder killed mid-chat leaves: "first" answered but its reply never queued,
    then "second" stored with its turn cut."""
    lines = [
        {"type": "session", "key": "telegram:1001", "version": 1, "created_at": STAMP},
        {"type": "state", "trust": "owner", "chat": {"private": True, "user_id": OWNER}},
        {"seq": 1, "role": "user", "content": "first", "message_id": "1:1", "timestamp": STAMP},
        {"seq": 2, "role": "assistant", "content": "re: first", "timestamp": STAMP},
        {"seq": 3, "role": "user", "content": "second", "message_id": "2:2", "timestamp": STAMP},
    ]
    sessions = workspace / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line) + "\n" for line in lines)
    (sessions / "telegram_1001.jsonl").write_text(text, encoding="utf-8")


def said(n: int, text: str) -> InboundMessage:
    return InboundMessage(
        channel="telegram",
        chat_id="1001",
        message_id=f"{n}:{n}",
        text=text,
        agent="main",
        sender_id=OWNER,
        trust=Trust.OWNER,
        facts=ChatFacts(private=True, user_id=OWNER),
    )


async def test_a_new_holder_answers_what_the_last_one_left_in_the_chat_s_order(
    tmp_path: Path, database_url: str, fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    """The soak once saw a reply out of order: the gateway's pass over messages the last run
    left unanswered answered "second" at start, before the inbox fed "first" (whose reply was
    stored, never queued). A cluster agent's inbox feeds both again, in order."""
    fake_llm.handler = echo
    # The bot itself runs on another worker: here only its access rules (the owner's chat).
    telegram = TelegramConfig(token="123:secret-token", allow_from=[OWNER])
    config = make_config(tmp_path, agent_config, channels=ChannelsConfig(telegram=telegram))
    left_session(config.workspace)
    pool = await open_pool(cluster_config(database_url))
    await migrate(pool)
    inbox: asyncio.Task[None] | None = None
    gateway: Gateway | None = None
    try:
        async with pool.acquire() as conn:
            bot = await acquire(conn, BOT, "w1", 30)
            agent = await acquire(conn, "agent:main", "w2", 30)
            assert bot is not None and agent is not None
            for n, text in ((1, "first"), (2, "second")):
                await put_inbound(conn, bot, BOT, said(n, text))
        tables = TableWriter(pool, agent)
        bus = MessageBus()
        runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
        gateway = Gateway([(runtime, bus)], [Outbox("telegram", BOT, "main", tables)], bus)
        await gateway.start()
        inbox = asyncio.create_task(Inbox("main", tables, bus, None).run())

        async def queued() -> list[str]:
            rows = await pool.fetch("SELECT message->>'text' AS text FROM outbound ORDER BY id")
            return [row["text"] for row in rows]

        async def both() -> bool:
            return len(await queued()) >= 2

        await eventually(both, 30)
        assert await queued() == ["re: first", "re: second"]
    finally:
        if inbox is not None:
            inbox.cancel()
            await asyncio.gather(inbox, return_exceptions=True)
        if gateway is not None:
            await gateway.stop(grace=2)
        await pool.close()

"""The inbound and outbound tables against the private PostgreSQL: every write fenced by the
writer's lease (a stale generation changes nothing), a message stored once however often
its platform or a replayed journal hands it out, a send cut off by a takeover never made
again, and what `clawgate cluster status` counts as backlog."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from clawgate.gateway.cluster.db import open_pool
from clawgate.gateway.cluster.leases import Lease, acquire
from clawgate.gateway.cluster.queues import (
    bot_resource,
    claim,
    consume_answered,
    finish,
    give_up_interrupted,
    pending_outbound,
    put_inbound,
    put_outbound,
    waiting_inbound,
)
from clawgate.gateway.cluster.schema import migrate
from clawgate.gateway.cluster.status import read_status
from clawgate.kernel.bus import InboundMessage, OutboundMessage
from clawgate.kernel.errors import Fenced
from tests.cluster_helpers import cluster_config, eventually

BOT = bot_resource("telegram", "123:secret-token")


def said(n: int, chat: str = "1001") -> InboundMessage:
    return InboundMessage(
        channel="telegram", chat_id=chat, message_id=f"{n}:{n}", text=f"m{n}", agent="a"
    )


def reply(n: int, chat: str = "1001") -> OutboundMessage:
    return OutboundMessage(
        channel="telegram", chat_id=chat, text=f"re: m{n}", reply_to=f"{n}:{n}", agent="a"
    )


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    pool = await open_pool(cluster_config(database_url))
    await migrate(pool)
    async with pool.acquire() as conn:
        yield conn
    await pool.close()


async def taken_over(conn: asyncpg.Connection, resource: str) -> tuple[Lease, Lease]:
    """A lease held by w1 that expired and was taken by w2: (the stale one, the current)."""
    old = await acquire(conn, resource, "w1", 0.05)
    await asyncio.sleep(0.1)
    new = await acquire(conn, resource, "w2", 30)
    assert old is not None and new is not None
    return old, new


async def test_a_stale_generation_writes_nothing(conn: asyncpg.Connection) -> None:
    old_bot, bot = await taken_over(conn, BOT)
    old_agent, agent = await taken_over(conn, "agent:a")
    assert old_bot.generation + 1 == bot.generation

    with pytest.raises(Fenced):
        await put_inbound(conn, old_bot, BOT, said(1))
    assert await waiting_inbound(conn, "a", 0) == []
    seq = await put_inbound(conn, bot, BOT, said(1))
    assert seq is not None

    with pytest.raises(Fenced):
        await put_outbound(conn, old_agent, BOT, reply(1))
    await consume_answered(conn, old_agent, "a", BOT, "1001", "1:1", through=True)
    assert [w.seq for w in await waiting_inbound(conn, "a", 0)] == [seq]
    row = await put_outbound(conn, agent, BOT, reply(1))

    with pytest.raises(Fenced):
        await claim(conn, old_bot, row)
    assert await claim(conn, bot, row)
    await finish(conn, old_bot, row, None)
    assert await conn.fetchval("SELECT status FROM outbound WHERE id = $1", row) == "sending"
    await finish(conn, bot, row, None)
    assert await conn.fetchval("SELECT status FROM outbound WHERE id = $1", row) == "sent"


async def test_a_message_handed_out_twice_is_stored_once(conn: asyncpg.Connection) -> None:
    bot = await acquire(conn, BOT, "w1", 30)
    assert bot is not None
    first = await put_inbound(conn, bot, BOT, said(7))
    assert await put_inbound(conn, bot, BOT, said(7)) is None
    assert [w.seq for w in await waiting_inbound(conn, "a", 0)] == [first]


async def test_a_reply_consumes_its_chat_so_far_and_a_cut_send_is_never_made_again(
    conn: asyncpg.Connection,
) -> None:
    old_bot, bot = await taken_over(conn, BOT)
    agent = await acquire(conn, "agent:a", "w2", 30)
    assert agent is not None
    for n in (1, 2, 3):
        await put_inbound(conn, bot, BOT, said(n))
    await put_inbound(conn, bot, BOT, said(4, chat="2002"))
    await consume_answered(conn, agent, "a", BOT, "1001", "2:2", through=True)
    left = await waiting_inbound(conn, "a", 0)
    assert [w.message.message_id for w in left] == ["3:3", "4:4"]

    cut = await put_outbound(conn, agent, BOT, reply(2))
    later = await put_outbound(conn, agent, BOT, reply(3))
    assert await claim(conn, bot, cut)  # and the holder dies mid-send
    newest = await acquire(conn, BOT, "w2", 30)  # w2 restarted: a new generation
    assert newest is not None
    assert await give_up_interrupted(conn, newest, BOT) == (1, 0)
    assert [p.id for p in await pending_outbound(conn, BOT)] == [later]
    status, error = await conn.fetchrow("SELECT status, error FROM outbound WHERE id = $1", cut)
    assert (status, error) == ("failed", "interrupted")
    assert old_bot.generation < newest.generation

    # On a platform that deduplicates a retried send, a recent cut send is tried again
    # first (under its key), an old one failed.
    assert await claim(conn, newest, later)
    old_cut = await put_outbound(conn, agent, BOT, reply(4))
    assert await claim(conn, newest, old_cut)
    await conn.execute(
        "UPDATE outbound SET created_at = now() - interval '10 minutes' WHERE id = $1", old_cut
    )
    assert await give_up_interrupted(conn, newest, BOT, 120.0) == (1, 1)
    assert [p.id for p in await pending_outbound(conn, BOT)] == [later]
    status, error = await conn.fetchrow("SELECT status, error FROM outbound WHERE id = $1", old_cut)
    assert (status, error) == ("failed", "interrupted")


async def test_status_counts_what_waits_per_agent_and_per_bot(
    conn: asyncpg.Connection, database_url: str
) -> None:
    bot = await acquire(conn, BOT, "w1", 30)
    agent = await acquire(conn, "agent:a", "w1", 30)
    assert bot is not None and agent is not None
    for n in (1, 2):
        await put_inbound(conn, bot, BOT, said(n))
    await consume_answered(conn, agent, "a", BOT, "1001", "1:1", through=True)
    await put_outbound(conn, agent, BOT, reply(1))
    pool = await open_pool(cluster_config(database_url))
    try:
        status = await read_status(pool, 15)
    finally:
        await pool.close()
    backlog = {row.name: (row.inbound, row.outbound) for row in status.backlog}
    assert backlog == {"agent:a": (1, 1), BOT: (1, 1)}
    assert status.schema_version == 2


async def test_a_reader_following_seq_never_skips_a_row_that_committed_late(
    database_url: str,
) -> None:
    """Two bots store messages for one agent at once: the row with the lower seq may commit
    after the higher one. The agent's inbox reads on from the highest seq it fed, so such a
    row must never be visible after a higher one (a soak lost a message this way: skipped,
    then consumed by the reply to a later message in its chat)."""
    pool = await open_pool(cluster_config(database_url))
    await migrate(pool)
    try:
        async with pool.acquire() as first, pool.acquire() as second, pool.acquire() as reader:
            bot = await acquire(reader, BOT, "w1", 30)
            assert bot is not None
            slow = first.transaction()
            await slow.start()
            early = await put_inbound(first, bot, BOT, said(1))  # its seq taken, not committed
            later = asyncio.create_task(put_inbound(second, bot, BOT, said(2, chat="1002")))
            # The second store runs to its commit, or waits: whichever it does, it does now.
            waiting = "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1"

            async def settled() -> bool:
                return later.done() or bool(await reader.fetchval(waiting, second.get_server_pid()))

            await eventually(settled, 30)
            if not later.done():  # waiting its turn: it must not have drawn a seq yet
                assert await reader.fetchval("SELECT last_value FROM inbound_seq_seq") == early
            read = [w.seq for w in await waiting_inbound(reader, "a", 0)]
            await slow.commit()
            stored = {early, await later}
            read += [w.seq for w in await waiting_inbound(reader, "a", max(read, default=0))]
            assert set(read) == stored, f"stored {stored}, a reader got {read}"
    finally:
        await pool.close()

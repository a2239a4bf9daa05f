"""The inbound and outbound tables between a bot's worker and its agents' workers.

    inbound   one row per platform message, written by the worker that holds the bot (before
              the platform is told it arrived), read in `seq` order by the worker that holds
              the agent, marked consumed once its reply is on its way (or it has none)
    outbound  one row per reply, written by the agent's worker, sent by the bot's worker:
              pending -> sending -> sent | failed. At most once: a row still `sending` when
              a new holder takes the bot is marked failed ("interrupted"), never sent again,
              as the session's delivery rules treat a send cut by a crash - unless the
              platform deduplicates a retried send (Discord's nonce) and the row is recent:
              then it is pending again (give_up_interrupted)

Every write is fenced: the statement itself carries the writer's lease (resource, worker,
generation) and changes nothing unless that lease is still current in `leases` - one
statement, never a check and then a write, so a holder that lost its lease while it was
paused cannot write after the next holder started. A fenced write that changes nothing
raises `Fenced`. A trigger NOTIFYs the reader of a new row (INBOUND_CHANNEL with the agent,
OUTBOUND_CHANNEL with the bot), which also polls."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.gateway.cluster.leases import Lease
from clawgate.kernel.bus import InboundMessage, OutboundMessage
from clawgate.kernel.errors import Fenced

if TYPE_CHECKING:
    import asyncpg

INBOUND_CHANNEL = "clawgate_inbound"
OUTBOUND_CHANNEL = "clawgate_outbound"

# The first key of the per-agent lock that orders inbound stores (put_inbound); the
# migration lock (schema.py) is a one-key lock, a different space.
_INBOUND_LOCK = 0x636C6177

# $1, $2, $3: the writer's lease.
_FENCE = """EXISTS (
    SELECT 1 FROM leases
    WHERE resource = $1 AND worker = $2 AND generation = $3 AND expires_at > now()
)"""


def bot_resource(platform: str, token: str) -> str:
    """A bot's lease and table name: its platform and a hash of its token (stable across
    workers and config edits that keep the token, and never the secret itself)."""
    digest = hashlib.sha256(token.encode("utf-8")).hexdigest()[:16]
    return f"bot:{platform}:{digest}"


def _lease(lease: Lease) -> tuple[str, str, int]:
    return lease.resource, lease.worker, lease.generation


async def _fenced(conn: asyncpg.Connection, lease: Lease) -> None:
    """Raise Fenced unless `lease` is current: asked after a fenced write changed nothing, to
    tell a refusal from a row that was already there."""
    if not await conn.fetchval(f"SELECT {_FENCE}", *_lease(lease)):
        raise Fenced(f"{lease.resource}: the lease of generation {lease.generation} is gone")


# -- inbound ---------------------------------------------------------------------------------


async def put_inbound(
    conn: asyncpg.Connection, lease: Lease, bot: str, message: InboundMessage
) -> int | None:
    """Store one message for its agent (`message.agent`) under the bot's lease; its seq, or
    None when the platform handed it out before (the same bot and message id).

    An agent's rows become visible in seq order: the agent's inbox reads on from the last
    seq it fed, so a row that took a lower seq and committed after a higher one (two bots,
    or two workers, storing for one agent at once) would be skipped, then consumed unanswered
    by the reply to a later message in its chat. Each agent's stores therefore take turns:
    the seq is drawn and committed under a per-agent transaction lock."""
    agent = message.agent or ""
    # One statement, so its own transaction: the lock is taken before the seq is drawn, and
    # released only once the row is committed.
    seq = await conn.fetchval(
        f"""
        WITH turn AS (SELECT pg_advisory_xact_lock($9, hashtext($4)))
        INSERT INTO inbound (agent, bot, message_id, chat_id, message)
        SELECT $4, $5, $6, $7, $8::jsonb FROM turn WHERE {_FENCE}
        ON CONFLICT (bot, message_id) WHERE message_id <> '' DO NOTHING
        RETURNING seq
        """,
        *_lease(lease),
        agent,
        bot,
        message.message_id,
        message.chat_id,
        message.model_dump_json(),
        _INBOUND_LOCK,
    )
    if seq is None:
        await _fenced(conn, lease)
    return seq


@dataclass(frozen=True)
class Waiting:
    seq: int
    bot: str
    message: InboundMessage


async def waiting_inbound(
    conn: asyncpg.Connection, agent: str, after: int, limit: int = 100
) -> list[Waiting]:
    """The agent's unconsumed messages after `after`, in order."""
    rows = await conn.fetch(
        """
        SELECT seq, bot, message FROM inbound
        WHERE agent = $1 AND seq > $2 AND consumed_at IS NULL ORDER BY seq LIMIT $3
        """,
        agent,
        after,
        limit,
    )
    return [
        Waiting(row["seq"], row["bot"], InboundMessage.model_validate_json(row["message"]))
        for row in rows
    ]


async def consume(conn: asyncpg.Connection, lease: Lease, agent: str, seqs: list[int]) -> None:
    """Mark messages consumed under the agent's lease (already consumed: nothing changes)."""
    done = await conn.execute(
        f"""
        UPDATE inbound SET consumed_at = now()
        WHERE agent = $4 AND seq = ANY($5::bigint[]) AND consumed_at IS NULL AND {_FENCE}
        """,
        *_lease(lease),
        agent,
        seqs,
    )
    if done == "UPDATE 0":
        await _fenced(conn, lease)


async def consume_answered(
    conn: asyncpg.Connection,
    lease: Lease,
    agent: str,
    bot: str,
    chat_id: str,
    message_id: str,
    *,
    through: bool,
) -> None:
    """Under the agent's lease: `message_id` (on `bot`) is answered, and with `through` the
    chat's earlier messages on that bot too (a chat's turns run in order, one at a time: the
    journal's rule). Nothing to mark is no error: the message may be consumed already."""
    await conn.execute(
        f"""
        UPDATE inbound SET consumed_at = now()
        WHERE agent = $4 AND bot = $5 AND chat_id = $6 AND consumed_at IS NULL
          AND CASE WHEN $8
                THEN seq <= (SELECT seq FROM inbound WHERE bot = $5 AND message_id = $7)
                ELSE message_id = $7 END
          AND {_FENCE}
        """,
        *_lease(lease),
        agent,
        bot,
        chat_id,
        message_id,
        through,
    )


# -- outbound --------------------------------------------------------------------------------


async def put_outbound(
    conn: asyncpg.Connection, lease: Lease, bot: str, message: OutboundMessage
) -> int:
    """Queue one reply for the bot under the writer's lease (the agent's, or the bot's own
    for its notices); its id."""
    row_id = await conn.fetchval(
        f"""
        INSERT INTO outbound (bot, agent, chat_id, message)
        SELECT $4, $5, $6, $7::jsonb WHERE {_FENCE}
        RETURNING id
        """,
        *_lease(lease),
        bot,
        message.agent,
        message.chat_id,
        message.model_dump_json(),
    )
    if row_id is None:
        await _fenced(conn, lease)
        raise Fenced(f"{lease.resource}: the reply was not queued")  # the lease just went
    return int(row_id)


@dataclass(frozen=True)
class Pending:
    id: int
    message: OutboundMessage


async def pending_outbound(conn: asyncpg.Connection, bot: str, limit: int = 100) -> list[Pending]:
    rows = await conn.fetch(
        """
        SELECT id, message FROM outbound WHERE bot = $1 AND status = 'pending'
        ORDER BY id LIMIT $2
        """,
        bot,
        limit,
    )
    return [Pending(row["id"], OutboundMessage.model_validate_json(row["message"])) for row in rows]


async def claim(conn: asyncpg.Connection, lease: Lease, row_id: int) -> bool:
    """pending -> sending under the bot's lease, just before the first request of the send
    goes out; False when the row was not pending any more."""
    done = await conn.execute(
        f"""
        UPDATE outbound SET status = 'sending'
        WHERE id = $4 AND status = 'pending' AND {_FENCE}
        """,
        *_lease(lease),
        row_id,
    )
    if done == "UPDATE 0":
        await _fenced(conn, lease)
        return False
    return True


async def finish(conn: asyncpg.Connection, lease: Lease, row_id: int, error: str | None) -> None:
    """sending -> sent, or failed with its error."""
    await conn.execute(
        f"""
        UPDATE outbound SET status = $5, error = $6, done_at = now()
        WHERE id = $4 AND status = 'sending' AND {_FENCE}
        """,
        *_lease(lease),
        row_id,
        "sent" if error is None else "failed",
        error,
    )


async def give_up_interrupted(
    conn: asyncpg.Connection, lease: Lease, bot: str, resume_within: float = 0.0
) -> tuple[int, int]:
    """A new holder of the bot: sends the last one started and never finished are failed
    (the platform may or may not have the reply; sending it again could post it twice),
    except those queued less than `resume_within` seconds ago on a platform that
    deduplicates a send tried again (Discord's nonce, kept for a few minutes): pending
    again, to be sent under the same key. (failed, resumed)."""
    async with conn.transaction():
        return await _give_up(conn, lease, bot, resume_within)


async def _give_up(
    conn: asyncpg.Connection, lease: Lease, bot: str, resume_within: float
) -> tuple[int, int]:
    resumed = await conn.execute(
        f"""
        UPDATE outbound SET status = 'pending'
        WHERE bot = $4 AND status = 'sending' AND created_at > now() - make_interval(secs => $5)
          AND {_FENCE}
        """,
        *_lease(lease),
        bot,
        resume_within,
    )
    done = await conn.execute(
        f"""
        UPDATE outbound SET status = 'failed', error = 'interrupted', done_at = now()
        WHERE bot = $4 AND status = 'sending' AND {_FENCE}
        """,
        *_lease(lease),
        bot,
    )
    return int(done.split()[-1]), int(resumed.split()[-1])

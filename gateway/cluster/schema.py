"""The cluster's tables, created and migrated by clawgate itself. Each migration is applied
once, in order, in one transaction under an advisory lock, so workers starting together do
not race; `clawgate_schema` records the version reached. Append new steps, never edit one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawgate.kernel.errors import ClusterError

if TYPE_CHECKING:
    import asyncpg

# Any constant that no other application's advisory lock is likely to use.
_MIGRATION_LOCK = 0x6C617767617465

MIGRATIONS: tuple[str, ...] = (
    # 1: workers and leases.
    """
    CREATE TABLE workers (
        name        text PRIMARY KEY,
        started_at  timestamptz NOT NULL DEFAULT now(),
        seen_at     timestamptz NOT NULL DEFAULT now(),
        draining    boolean NOT NULL DEFAULT false
    );
    CREATE TABLE leases (
        resource    text PRIMARY KEY,          -- 'agent:<name>'
        worker      text,                      -- NULL: released
        generation  bigint NOT NULL,           -- +1 on every change of holder
        expires_at  timestamptz NOT NULL
    );
    """,
    # 2: the inbound and outbound tables between bots and agents (queues.py).
    """
    CREATE TABLE inbound (
        seq          bigserial PRIMARY KEY,
        agent        text NOT NULL,
        bot          text NOT NULL,                -- 'bot:<platform>:<token hash>'
        message_id   text NOT NULL,                -- the platform's, '' when it has none
        chat_id      text NOT NULL,
        message      jsonb NOT NULL,               -- an InboundMessage
        received_at  timestamptz NOT NULL DEFAULT now(),
        consumed_at  timestamptz
    );
    CREATE UNIQUE INDEX inbound_once ON inbound (bot, message_id) WHERE message_id <> '';
    CREATE INDEX inbound_waiting ON inbound (agent, seq) WHERE consumed_at IS NULL;
    CREATE TABLE outbound (
        id          bigserial PRIMARY KEY,
        bot         text NOT NULL,
        agent       text,
        chat_id     text NOT NULL,
        message     jsonb NOT NULL,                -- an OutboundMessage
        status      text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
        error       text,
        created_at  timestamptz NOT NULL DEFAULT now(),
        done_at     timestamptz
    );
    CREATE INDEX outbound_waiting ON outbound (bot, id) WHERE status IN ('pending', 'sending');
    CREATE FUNCTION clawgate_inbound_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('clawgate_inbound', NEW.agent); RETURN NULL; END $$;
    CREATE TRIGGER inbound_notify AFTER INSERT ON inbound
        FOR EACH ROW EXECUTE FUNCTION clawgate_inbound_notify();
    CREATE FUNCTION clawgate_outbound_notify() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('clawgate_outbound', NEW.bot); RETURN NULL; END $$;
    CREATE TRIGGER outbound_notify AFTER INSERT ON outbound
        FOR EACH ROW EXECUTE FUNCTION clawgate_outbound_notify();
    """,
)


async def migrate(pool: asyncpg.Pool) -> int:
    """Bring the schema to the newest version; the version reached. A database newer than this
    clawgate is refused: an older worker must not write tables it does not know."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute("CREATE TABLE IF NOT EXISTS clawgate_schema (version int NOT NULL)")
        version = await conn.fetchval("SELECT max(version) FROM clawgate_schema") or 0
        if version > len(MIGRATIONS):
            raise ClusterError(
                f"the cluster database is at schema {version}, newer than this clawgate "
                f"({len(MIGRATIONS)}): upgrade this worker"
            )
        for number, sql in enumerate(MIGRATIONS[version:], start=version + 1):
            await conn.execute(sql)
            await conn.execute("INSERT INTO clawgate_schema (version) VALUES ($1)", number)
        return len(MIGRATIONS)

"""After a fresh gateway session (not a resume, which replays what was missed), read each
known channel's history after its watermark and handle it like live traffic, oldest first.

Every page after the watermark is read (discord.py pages with `after`, 100 a request), so a
mention behind a hundred messages of chatter is answered now, not at some later restart.
What bounds the work is age, not count: nothing older than `max_age` is read, since answers
to last week's messages would only confuse.

When the watermarks are lost (state.json damaged, or missing though the journal shows the
channel ran before), `recover` rebuilds them before catch-up, for every channel it knows:
the chats named in the journal, the owners' DMs and the allowed guild channels (and threads)
it can list. Each starts where the journal says everything handled lies
(`Journal.seen_through`: a message to answer is journaled before it is answered), so what
arrived while the gateway was down is answered and nothing answered before is read again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import aiohttp
import discord

from clawgate.channels.access import AccessPolicy
from clawgate.channels.discord.state import Watermarks
from clawgate.channels.journal import Journal

log = logging.getLogger(__name__)


async def catch_up(
    client: discord.Client,
    watermarks: Watermarks,
    handle: Callable[[discord.Message], Awaitable[None]],
    *,
    max_age: timedelta,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    oldest = discord.utils.time_snowflake(now() - max_age)
    for chat_id, last_seen in watermarks.items():
        after = max(last_seen, oldest)
        handled = 0
        try:
            channel = client.get_channel(int(chat_id)) or await client.fetch_channel(int(chat_id))
            assert isinstance(channel, discord.abc.Messageable)
            # One message at a time, as it is read: a failure part-way keeps what was
            # handled, and the watermark says where the next catch-up starts.
            async for message in channel.history(
                after=discord.Object(after), limit=None, oldest_first=True
            ):
                await handle(message)
                handled += 1
        except (discord.NotFound, discord.Forbidden) as exc:
            log.info("discord: channel %s is gone or closed to us (%s)", chat_id, exc.text)
            watermarks.forget(chat_id)
            continue
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.warning("discord: could not read the history of %s: %s", chat_id, exc)
            continue
        finally:
            if handled:
                log.info("discord: %d messages in %s since last seen", handled, chat_id)
    await watermarks.flush()


async def recover(
    client: discord.Client,
    watermarks: Watermarks,
    journal: Journal,
    policy: AccessPolicy,
    *,
    dms: bool = True,
) -> None:
    """Seed a watermark for each channel known, from the journal (see the module's doc); the
    owners' DMs only with `dms` (a shard other than 0 never hears a DM)."""
    chats = set(journal.chats())
    for user_id in policy.owner_ids() if dms else ():
        try:
            chats.add(str((await client.create_dm(discord.Object(int(user_id)))).id))
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.warning("discord: could not open the DM of owner %s: %s", user_id, exc)
    for guild in client.guilds:
        for channel in (*guild.text_channels, *guild.threads):
            parent = getattr(channel, "parent_id", None)
            if policy.group(str(channel.id), str(guild.id), str(parent) if parent else ""):
                chats.add(str(channel.id))
    for chat_id in sorted(chats):
        watermarks.seed(chat_id, journal.seen_through(chat_id))
    watermarks.rebuilt()
    log.info("discord: watermarks rebuilt from the journal for %d channels", len(chats))

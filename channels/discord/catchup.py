"""After a fresh gateway session (not a resume, which replays what was missed), read each
known channel's history after its watermark and handle it like live traffic.

One page per channel: after a long outage, old mentions matter less than not flooding a
channel with answers to yesterday.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import aiohttp
import discord

from clawgate.channels.discord.state import Watermarks

log = logging.getLogger(__name__)

CATCH_UP_LIMIT = 100


async def catch_up(
    client: discord.Client,
    watermarks: Watermarks,
    handle: Callable[[discord.Message], Awaitable[None]],
) -> None:
    for chat_id, after in watermarks.items():
        try:
            channel = client.get_channel(int(chat_id)) or await client.fetch_channel(int(chat_id))
            assert isinstance(channel, discord.abc.Messageable)
            missed = [
                m
                async for m in channel.history(
                    after=discord.Object(after), limit=CATCH_UP_LIMIT, oldest_first=True
                )
            ]
        except (discord.NotFound, discord.Forbidden) as exc:
            log.info("discord: channel %s is gone or closed to us (%s)", chat_id, exc.text)
            watermarks.forget(chat_id)
            continue
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            log.warning("discord: could not read the history of %s: %s", chat_id, exc)
            continue
        if missed:
            log.info("discord: %d messages in %s since last seen", len(missed), chat_id)
        for message in missed:
            await handle(message)
    await watermarks.flush()

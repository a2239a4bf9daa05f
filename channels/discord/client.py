"""discord.py plumbing: where the client points, the intents we need, the event hooks we
use, and the library's exceptions as one line a person can act on."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
import yarl

from clawgate.kernel.errors import ChannelError, CredentialsRejected

if TYPE_CHECKING:
    from clawgate.kernel.config import DiscordConfig

# Put on the inbox when a fresh gateway session starts: read what was missed.
CATCH_UP = object()


def point_at(api_base: str, gateway_url: str) -> None:
    """Aim discord.py at an API base and gateway (class-wide: one Discord bot per process)."""
    discord.http.Route.BASE = api_base.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)


def intents() -> discord.Intents:
    wanted = discord.Intents.default()
    wanted.message_content = True
    wanted.dm_messages = True
    wanted.guild_messages = True
    return wanted


def bot_token(config: DiscordConfig) -> str:
    token = config.token.get_secret_value() if config.token else ""
    if not token:
        raise ChannelError(
            "channels.discord has no token: set [channels.discord] token "
            "or CLAWGATE_CHANNELS__DISCORD__TOKEN"
        )
    return token


class EventClient(discord.Client):
    """Puts the events we use on one inbox, in the order the gateway sent them."""

    def __init__(self, inbox: asyncio.Queue[object], ready: asyncio.Event, **options: Any) -> None:
        # The bot never joins voice: without these two flags discord.py warns at every start
        # that PyNaCl and davey (its voice libraries) are missing. Its other warnings stay.
        discord.VoiceClient.warn_nacl = False
        discord.VoiceClient.warn_dave = False
        super().__init__(**options)
        self._inbox = inbox
        self._ready_event = ready

    async def on_connect(self) -> None:
        # A fresh session (READY): nothing from the downtime will be replayed.
        self._inbox.put_nowait(CATCH_UP)

    async def on_ready(self) -> None:
        self._ready_event.set()

    async def on_message(self, message: discord.Message) -> None:
        self._inbox.put_nowait(message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        # A button pressed under an approval card; answered first, so Discord shows no
        # "interaction failed" while the gateway decides what the press means.
        if interaction.type is discord.InteractionType.component:
            await interaction.response.defer()
            self._inbox.put_nowait(interaction)


class ShardedEventClient(EventClient, discord.AutoShardedClient):
    """On one machine, a bot split into shards: every shard connected by this one client."""


def gateway_client(
    inbox: asyncio.Queue[object],
    ready: asyncio.Event,
    *,
    shard: tuple[int, int] | None,
    shards: int,
    **options: Any,
) -> EventClient:
    """The client of a bot's whole connection (shards = 1, as Discord needs below 2500
    guilds), of one shard [id, count] leased to a cluster worker, or of every shard of the
    bot in this process. A shard hears only its guilds' events (`(guild_id >> 22) % count`),
    and shard 0 the DMs too."""
    if shard is not None:
        shard_id, count = shard
        return EventClient(inbox, ready, shard_id=shard_id, shard_count=count, **options)
    if shards > 1:
        return ShardedEventClient(inbox, ready, shard_count=shards, **options)
    return EventClient(inbox, ready, **options)


def short(exc: BaseException) -> str:
    if isinstance(exc, discord.HTTPException):
        return f"{exc.status} {exc.text or exc.response.reason}".strip()
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__


def explain(exc: BaseException, api_base: str) -> BaseException:
    """A ChannelError a person can act on, or the exception itself if it is a bug."""
    if isinstance(exc, discord.LoginFailure):
        return CredentialsRejected("Discord rejected the bot token: check [channels.discord] token")
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return ChannelError(
            "Discord refused the message content intent: enable it for the bot in the "
            "Developer Portal (Bot -> Privileged Gateway Intents)"
        )
    if isinstance(exc, discord.ConnectionClosed):
        if exc.code == 4004:
            return CredentialsRejected(
                "Discord rejected the bot token: check [channels.discord] token"
            )
        return ChannelError(f"Discord closed the gateway connection (code {exc.code})")
    if isinstance(exc, discord.GatewayNotFound):
        return ChannelError("Discord's gateway could not be found")
    if isinstance(exc, discord.HTTPException):
        return ChannelError(f"Discord API error: {short(exc)}")
    if isinstance(exc, aiohttp.ClientError | OSError):
        host = yarl.URL(api_base).host
        return ChannelError(f"cannot reach Discord at {host}: {exc}")
    return exc

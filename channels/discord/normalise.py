"""A Discord message -> an InboundMessage, or None when it is not for the model.

Session key `discord:<channel id>`: a DM, a guild channel or a thread. A group message that
was examined but not addressed to us (or carried nothing to pass on) still moves the
channel's watermark, so catch-up does not read it again; one refused by the access rules
does not.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import discord

from clawgate.channels.access import AccessPolicy
from clawgate.channels.chatter import RecentChatter
from clawgate.channels.discord.media import MediaSaver
from clawgate.channels.discord.state import Watermarks
from clawgate.kernel.bus import ChatFacts, InboundMessage, Trust
from clawgate.kernel.errors import ChannelError

if TYPE_CHECKING:
    from clawgate.kernel.config import DiscordConfig

log = logging.getLogger(__name__)

QUOTE_MAX_CHARS = 500

_SPEAKING_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})

Reply = Callable[[str, str], Awaitable[None]]


class Normaliser:
    def __init__(
        self,
        config: DiscordConfig,
        policy: AccessPolicy,
        watermarks: Watermarks,
        media: MediaSaver,
        reply: Reply,
    ) -> None:
        self.config = config
        self.policy = policy
        self._watermarks = watermarks
        self._media = media
        self._reply = reply
        self._chatter = RecentChatter(config.group_context)
        # Channels seen as guild channels: replies there quote the message they answer.
        self.group_chats: set[str] = set()
        self._parents: dict[int, int | None] = {}

    async def normalise(
        self, message: discord.Message, client: discord.Client
    ) -> InboundMessage | None:
        me = client.user
        if me is None:
            return None
        if message.author.id == me.id or message.author.bot or message.webhook_id:
            return None
        if message.type not in _SPEAKING_TYPES:
            return None
        chat_id = str(message.channel.id)
        if message.id <= self._watermarks.last_seen(chat_id):
            return None  # handled already: catch-up and the live stream overlap
        facts = await self._facts(message, client)
        decision = self.policy.admit(facts, name=message.author.name)
        if decision.reply is not None:
            try:
                await self._reply(chat_id, decision.reply)
            except ChannelError as exc:
                log.warning("discord: pairing reply to %s not sent: %s", chat_id, exc)
        if decision.trust is None:
            if not facts.private and _addresses_me(message, me):
                guild = message.guild
                title = f"{guild.name if guild else '?'} #{getattr(message.channel, 'name', '')}"
                self.policy.unknown_group(
                    chat_id,
                    title,
                    str(message.author.id),
                    message.author.display_name,
                    guild_id=facts.group_ids[1] if len(facts.group_ids) > 1 else None,
                )
            return None
        trust, mentioned = decision.trust, True
        if not facts.private:
            mentioned = _addresses_me(message, me)
            self.group_chats.add(chat_id)
            if self.config.require_mention and not mentioned:
                self._chatter.keep(chat_id, message.author.display_name, message.content)
                self._watermarks.note_seen(chat_id, message.id)
                return None
        text = _text(message, me)
        media, notes = await self._media.download(message, trust)
        text = "\n".join(part for part in (text, *notes) if part)
        if not text:
            self._watermarks.note_seen(chat_id, message.id)
            return None
        if trust is Trust.GROUP and not text.startswith("/"):
            text = self._chatter.with_context(chat_id, text)
        reply_to = message.reference.message_id if message.reference else None
        return InboundMessage(
            channel="discord",
            chat_id=chat_id,
            message_id=str(message.id),
            sender_id=str(message.author.id),
            sender_name=message.author.display_name,
            text=text,
            media=tuple(media),
            trust=trust,
            facts=facts,
            mentioned=mentioned,
            reply_to=str(reply_to) if reply_to else None,
            timestamp=message.created_at,
        )

    async def _facts(self, message: discord.Message, client: discord.Client) -> ChatFacts:
        """From the payload, not the guild cache: discord.py builds a DMChannel only for an
        event without guild_id; a guild it has not cached leaves `message.guild` None but a
        channel that still carries the guild_id. Senders are matched by id only."""
        if isinstance(message.channel, discord.DMChannel):
            return ChatFacts(private=True, user_id=str(message.author.id))
        return ChatFacts(
            private=False,
            user_id=str(message.author.id),
            group_ids=await self._group_ids(message, client),
        )

    async def _group_ids(self, message: discord.Message, client: discord.Client) -> tuple[str, ...]:
        """(channel, guild, parent channel for threads): any of them may be in group_allow."""
        channel = message.channel
        guild = message.guild.id if message.guild else getattr(channel, "guild_id", None)
        guild_id = str(guild) if guild else ""
        parent: int | None
        if isinstance(channel, discord.Thread):
            parent = channel.parent_id
        elif isinstance(channel, discord.PartialMessageable):
            # Not in the cache (a thread we have not seen created): ask once what it is.
            if channel.id not in self._parents:
                fetched = await client.fetch_channel(channel.id)
                self._parents[channel.id] = getattr(fetched, "parent_id", None)
            parent = self._parents.get(channel.id)
        else:
            parent = None
        return (str(channel.id), guild_id, str(parent) if parent else "")


def _addresses_me(message: discord.Message, me: discord.ClientUser) -> bool:
    if any(user.id == me.id for user in message.mentions):
        return True
    role = message.guild.self_role if message.guild else None
    if role is not None and role.id in message.raw_role_mentions:
        return True
    resolved = message.reference.resolved if message.reference else None
    return isinstance(resolved, discord.Message) and resolved.author.id == me.id


def _text(message: discord.Message, me: discord.ClientUser) -> str:
    text = re.sub(rf"<@!?{me.id}>", "", message.content)
    for user in message.mentions:
        if user.id != me.id:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    text = text.strip()
    resolved = message.reference.resolved if message.reference else None
    if isinstance(resolved, discord.Message) and resolved.content:
        quoted = resolved.content
        if len(quoted) > QUOTE_MAX_CHARS:
            quoted = quoted[:QUOTE_MAX_CHARS] + "…"
        quote = "\n".join(f"> {line}" for line in quoted.splitlines())
        text = f"{quote}\n{text}"
    return text


def pressed(interaction: discord.Interaction) -> InboundMessage:
    """A pressed button: who pressed which, in which channel (`custom_id` is the choice)."""
    user = interaction.user
    data: dict[str, object] = dict(interaction.data or {})
    private = interaction.guild_id is None
    chat_id = str(interaction.channel_id)
    return InboundMessage(
        channel="discord",
        chat_id=chat_id,
        message_id=f"interaction:{interaction.id}",
        sender_id=str(user.id),
        sender_name=user.display_name,
        facts=ChatFacts(
            private=private,
            user_id=str(user.id),
            group_ids=() if private else (chat_id, str(interaction.guild_id)),
        ),
        choice=str(data.get("custom_id", "")) or None,
    )

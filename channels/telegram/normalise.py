"""A Telegram update -> an InboundMessage, or None when it is not for the model.

Decides, in order: is it a person's message at all; may this sender or group talk to us (the
access policy; a stranger may get the pairing reply); in a group, are we addressed; then
fetches its media and builds the text the model sees (edit marker, quoted reply, notes).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.channels.access import AccessPolicy
from clawgate.channels.chatter import RecentChatter
from clawgate.channels.telegram import ids
from clawgate.channels.telegram.media import MediaFetcher
from clawgate.kernel.bus import ChatFacts, InboundMessage, Trust

if TYPE_CHECKING:
    from telegram import Message, Update

    from clawgate.kernel.config import TelegramConfig

QUOTE_MAX_CHARS = 1000

Reply = Callable[[int, str], Awaitable[None]]
Notify = Callable[[str], Awaitable[None]]


@dataclass
class BotIdentity:
    """Who the bot is, from getMe once it answers; until then only replies and commands
    address it in a group."""

    id: int | None = None
    username: str = ""


class Normaliser:
    def __init__(
        self,
        settings: TelegramConfig,
        policy: AccessPolicy,
        identity: BotIdentity,
        media: MediaFetcher,
        reply: Reply,
        notify_owners: Notify,
    ) -> None:
        """`notify_owners`: sends a text to each owner's private chat (through the bus)."""
        self.settings = settings
        self.policy = policy
        self.identity = identity
        self._media = media
        self._reply = reply
        self._notify_owners = notify_owners
        self._chatter = RecentChatter(settings.group_context)

    async def normalise(self, update: Update) -> InboundMessage | None:
        if update.callback_query is not None:
            return pressed(update)
        msg = update.message or update.edited_message
        if msg is None or msg.from_user is None or msg.from_user.is_bot:
            return None  # channel posts, service messages, other bots
        user = msg.from_user
        chat = msg.chat
        topic = msg.message_thread_id if msg.is_topic_message else None
        chat_id = ids.chat_id(chat.id, topic)
        text = msg.text or msg.caption or ""
        if chat.type == "private":
            facts = ChatFacts(private=True, user_id=str(user.id), username=user.username)
        elif chat.type in ("group", "supergroup"):
            facts = ChatFacts(
                private=False,
                user_id=str(user.id),
                username=user.username,
                group_ids=(str(chat.id), chat_id),
            )
        else:
            return None
        decision = self.policy.admit(facts)
        if decision.reply:
            await self._reply(chat.id, decision.reply)
        if decision.owner_notice:
            await self._notify_owners(decision.owner_notice)
        if decision.trust is None:
            if not facts.private and self._addressed(msg, text):
                name = user.full_name or user.username or str(user.id)
                self.policy.unknown_group(str(chat.id), chat.title or "", str(user.id), name)
            return None
        trust, mentioned = decision.trust, True
        if not facts.private:
            mentioned = self._addressed(msg, text)
            if self.settings.require_mention and not mentioned:
                self._chatter.keep(chat_id, user.full_name or user.username or str(user.id), text)
                return None
        media, notes = await self._media.fetch(msg, chat_id, trust)
        if not text and not media:
            return None  # stickers, polls, locations: nothing we pass on yet
        body = text
        if update.edited_message is not None:
            body = f"[edited] {body}"
        quote = quoted(msg)
        if quote and not text.startswith("/"):
            body = f"{quote}\n{body}"
        if notes:
            body = "\n".join([body, *notes]) if body else "\n".join(notes)
        if trust is Trust.GROUP and not text.startswith("/"):
            body = self._chatter.with_context(chat_id, body)
        reply = msg.reply_to_message
        return InboundMessage(
            channel="telegram",
            chat_id=chat_id,
            message_id=ids.message_id(update.update_id, msg.message_id),
            sender_id=str(user.id),
            sender_name=user.full_name or user.username or str(user.id),
            text=body,
            media=tuple(media),
            trust=trust,
            facts=facts,
            mentioned=mentioned,
            reply_to=str(reply.message_id) if reply is not None else None,
            timestamp=msg.edit_date or msg.date,
        )

    def _addressed(self, msg: Message, text: str) -> bool:
        """In a group: a mention, a reply to us, or a command not meant for another bot."""
        name = self.identity.username.lower()
        bot_id = self.identity.id
        entities = msg.parse_entities() if msg.text else msg.parse_caption_entities()
        for entity, value in entities.items():
            if entity.type == "mention" and name and value[1:].lower() == name:
                return True
            if entity.type == "text_mention" and entity.user and entity.user.id == bot_id:
                return True
        if text.startswith("/"):
            target = text.split(maxsplit=1)[0].partition("@")[2].lower()
            return not target or target == name
        if name and re.search(rf"(?<![\w@])@?{re.escape(name)}(?!\w)", text, re.IGNORECASE):
            return True
        replied = msg.reply_to_message
        return bool(replied and replied.from_user and replied.from_user.id == bot_id)


def pressed(update: Update) -> InboundMessage | None:
    """A tap on an inline button: who pressed which, in which chat. Whether it counts is the
    gateway's to decide (the one trust function), not who could see the button."""
    query = update.callback_query
    if query is None or not query.data or query.from_user.is_bot:
        return None
    user = query.from_user
    message = query.message
    chat_id = str(message.chat.id) if message is not None else str(user.id)
    private = message is None or message.chat.type == "private"
    return InboundMessage(
        channel="telegram",
        chat_id=chat_id,
        message_id=f"callback:{query.id}",
        sender_id=str(user.id),
        sender_name=user.full_name or user.username or str(user.id),
        facts=ChatFacts(
            private=private,
            user_id=str(user.id),
            username=user.username,
            group_ids=() if private else (chat_id,),
        ),
        choice=query.data,
    )


def quoted(msg: Message) -> str:
    """The replied-to text as a Markdown quote, so the model sees what is being answered."""
    replied = msg.reply_to_message
    source = msg.quote.text if msg.quote is not None else None
    if source is None and replied is not None:
        source = replied.text or replied.caption
    if not source:
        return ""
    if len(source) > QUOTE_MAX_CHARS:
        source = source[:QUOTE_MAX_CHARS] + "…"
    return "\n".join(f"> {line}" for line in source.splitlines())

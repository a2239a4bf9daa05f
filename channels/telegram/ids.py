"""Our ids for Telegram things, built by the normaliser and read back when replying.

- chat id: `"<chat>"`, or `"<chat>:<topic>"` for a forum topic, so each topic is a session.
- message id: `"<update_id>:<telegram message id>"`: the update id finds the journal entry,
  the message id is what a reply in a group quotes.
"""

from __future__ import annotations

from clawgate.kernel.errors import ChannelError


def chat_id(chat: int, topic: int | None) -> str:
    return f"{chat}:{topic}" if topic else str(chat)


def message_id(update_id: int, telegram_message_id: int) -> str:
    return f"{update_id}:{telegram_message_id}"


def split_chat_id(value: str) -> tuple[int, int | None]:
    """`"-100123:7"` -> (-100123, 7): a forum topic's session id names its thread."""
    chat, _, thread = value.partition(":")
    try:
        return int(chat), int(thread) if thread else None
    except ValueError:
        raise ChannelError(f"telegram: {value!r} is not a Telegram chat id") from None


def parse_message_id(value: str | None) -> tuple[int | None, int | None]:
    """(update id, Telegram message id) from our InboundMessage.message_id."""
    if not value:
        return None, None
    update, _, message = value.partition(":")
    try:
        return int(update), int(message) if message else None
    except ValueError:
        return None, None

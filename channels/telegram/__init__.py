"""Telegram: a durable inbound journal, our own polling loop, access rules, media, and
delivery that neither drops nor doubles a reply.

    adapter.py    TelegramChannel: start/stop, the getUpdates loop, the order of a send
    journal.py    InboundJournal: fetched updates on disk before they are confirmed
    normalise.py  an Update -> an InboundMessage (access, addressing, quotes, media notes)
    media.py      inbound attachments saved into the workspace
    sender.py     Bot API retry rules, formatted parts, files, the typing indicator, live
                  replies' posts and edits (channels/live.py), status reactions
    raw_request.py  the getUpdates request that keeps its raw body
    format.py     Markdown -> Telegram HTML, and Telegram's UTF-16 lengths
    ids.py        our chat ids (forum topics) and message ids (update id + message id)
    library.py    python-telegram-bot imported without Passport (and so cryptography)

The daemon imports this package by its channel name and calls `create_channel`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import clawgate.channels.telegram.library  # noqa: F401  (first: before `telegram`)
from clawgate.channels.access import AccessPolicy
from clawgate.channels.groups import SeenGroups
from clawgate.channels.pairing import PairingStore
from clawgate.channels.telegram.adapter import TelegramChannel

if TYPE_CHECKING:
    from clawgate.kernel.bus import MessageBus
    from clawgate.kernel.config import Config, TelegramConfig

__all__ = ["TelegramChannel", "create_channel"]


def create_channel(
    channel_config: TelegramConfig, bus: MessageBus, config: Config, **options: Any
) -> TelegramChannel:
    # httpx logs every request URL at INFO, and a Bot API URL contains the token.
    httpx_log = logging.getLogger("httpx")
    if httpx_log.level == logging.NOTSET:
        httpx_log.setLevel(logging.WARNING)
    store = PairingStore(config.pairing_file)
    groups = SeenGroups(config.data_dir / "groups.json")
    policy = AccessPolicy("telegram", channel_config, store, seen_groups=groups)
    return TelegramChannel(
        channel_config,
        bus,
        policy=policy,
        workspace=config.workspace,
        state_dir=config.data_dir / "channels" / "telegram",
        **options,
    )

"""Telegram: a durable inbound journal, our own polling loop, access rules, media, and
delivery that neither drops nor doubles a reply.

    adapter.py    TelegramChannel: start/stop, the getUpdates loop, the order of a send
    journal.py    InboundJournal: fetched updates on disk before they are confirmed
    normalise.py  an Update -> an InboundMessage (access, addressing, quotes, media notes)
    media.py      inbound attachments saved into the workspace
    sender.py     Bot API retry rules, formatted parts, files, the typing indicator
    format.py     Markdown -> Telegram HTML, and Telegram's UTF-16 lengths
    ids.py        our chat ids (forum topics) and message ids (update id + message id)

The daemon imports this package by its channel name and calls `create_channel`.
"""

from clawgate.channels.telegram.adapter import TelegramChannel, create_channel

__all__ = ["TelegramChannel", "create_channel"]

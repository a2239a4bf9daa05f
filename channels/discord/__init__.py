"""Discord through discord.py: DMs and allowed guild channels in, replies out.

    adapter.py    DiscordChannel: client lifecycle, the one inbound worker, the order of a send
    client.py     where discord.py points, intents, the event hooks, errors as one line
    normalise.py  a discord.Message -> an InboundMessage (access, addressing, quotes)
    media.py      inbound attachments saved into the workspace
    state.py      the per-channel watermark file (state.json)
    catchup.py    after a fresh gateway session, every page of history since each watermark
                  (bounded by catchup_max_age_hours)
    sender.py     split, attach, send at most once (nonce-deduplicated retries); typing

Received messages to answer are kept in journal.jsonl (channels/journal.py) until answered.

The daemon imports this package by its channel name and calls `create_channel`.
"""

from clawgate.channels.discord.adapter import DiscordChannel, create_channel

__all__ = ["DiscordChannel", "create_channel"]

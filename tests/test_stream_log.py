"""The stream log (channels/live.py) that holds a live reply open across a kill -9: a reply
that opens while another finishes is still held open after the log is compacted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clawgate.channels.live import COMPACT_AFTER, StreamLog
from clawgate.kernel.storage import DiskWriter


async def test_a_reply_opening_while_the_last_open_one_finishes_survives_compaction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "streams.jsonl"
    log = StreamLog(path, DiskWriter())
    first, second = ("1", "100"), ("2", "200")
    await log.opened(first)
    for n in range(COMPACT_AFTER):
        await log.shown(first, "m1", f"piece {n}")
    # `done` writes its line holding the log's lock while `opened` waits for it: the
    # compaction that follows must see the second reply open, not empty the file under it.
    finishing = asyncio.create_task(log.done(first))
    await asyncio.sleep(0)
    opening = asyncio.create_task(log.opened(second))
    await asyncio.gather(finishing, opening)

    left_open = await StreamLog(path, DiskWriter()).load()
    assert [(s.chat_id, s.reply_to) for s in left_open] == [second]

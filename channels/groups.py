"""Groups that mentioned the bot without being in `group_allow`: how the owner finds an id.

clawgate reads the bot's updates itself, so the owner cannot ask the platform which groups
the bot is in. Instead a mention in an unknown group is logged once and kept in
`<data_dir>/groups.json`, which `clawgate groups` lists and `clawgate groups allow` turns
into a config entry. The file is small and bounded: strangers can add the bot to any number
of groups, so only the most recently seen ones are kept, and a busy group is written at most
once a minute.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clawgate.kernel.errors import DocumentDamaged
from clawgate.kernel.json_document import JsonDocument
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_GROUPS = 50
WRITE_INTERVAL = 60.0


@dataclass(frozen=True)
class SeenGroup:
    channel: str
    group_id: str
    title: str
    last_seen: float
    # Who mentioned the bot last: "Ann (id 3003)".
    mentioned_by: str
    # Discord: the server, whose id in group_allow lets in every channel of it.
    guild_id: str | None = None


class SeenGroups:
    """Read by the CLI, written by the daemon's channels (under a lock, atomic replace)."""

    def __init__(
        self,
        path: Path,
        *,
        writer: DiskWriter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self._doc: JsonDocument[list[SeenGroup]] = JsonDocument(
            path, default=list, parse=_parse, dump=_dump, writer=writer
        )
        self._clock = clock
        # (channel, group id) -> when this process last wrote it; its first time is logged.
        self._noted: dict[tuple[str, str], float] = {}

    def seen(self) -> list[SeenGroup]:
        """Every remembered group, most recently seen first; a damaged file reads as empty."""
        try:
            groups = self._doc.load()
        except (OSError, DocumentDamaged) as exc:
            log.warning("%s: unreadable (%s); it is rewritten on the next mention", self.path, exc)
            return []
        return sorted(groups, key=lambda g: g.last_seen, reverse=True)

    def note(
        self,
        channel: str,
        group_id: str,
        title: str,
        sender_id: str,
        sender_name: str,
        *,
        guild_id: str | None = None,
    ) -> None:
        """A mention in a group that is not allowed: log it once, remember it for the CLI."""
        key = (channel, group_id)
        now = self._clock()
        last = self._noted.get(key)
        if last is None:
            log.warning(
                "%s: mentioned in group %s (%s) by %s (id %s), which is not in group_allow; "
                "to let it in: clawgate groups allow %s",
                channel,
                group_id,
                title or "no title",
                sender_name,
                sender_id,
                group_id,
            )
        elif now - last < WRITE_INTERVAL:
            return
        self._noted[key] = now
        entry = SeenGroup(
            channel, group_id, title, now, f"{sender_name} (id {sender_id})", guild_id
        )
        try:
            self._save(entry)
        except OSError as exc:
            # Only a convenience for finding ids: the log line above already has it.
            log.warning("%s: cannot record group %s: %s", self.path, group_id, exc)

    def forget(self, channel: str, group_id: str) -> None:
        """Drop a group the owner turned down; it is recorded again if it mentions the bot."""

        def drop(groups: list[SeenGroup]) -> None:
            groups[:] = [g for g in groups if (g.channel, g.group_id) != (channel, group_id)]

        self._doc.update(drop, repair=True)
        self._noted.pop((channel, group_id), None)

    def _save(self, entry: SeenGroup) -> None:
        def put_first(groups: list[SeenGroup]) -> None:
            others = [
                g for g in groups if (g.channel, g.group_id) != (entry.channel, entry.group_id)
            ]
            others.sort(key=lambda g: g.last_seen, reverse=True)
            groups[:] = [entry, *others][:MAX_GROUPS]

        self._doc.update(put_first, repair=True)


def _dump(groups: list[SeenGroup]) -> dict[str, Any]:
    return {"version": FORMAT_VERSION, "groups": [asdict(g) for g in groups]}


def _parse(data: Any) -> list[SeenGroup]:
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
        raise ValueError("not a groups file of version 1")
    return [
        SeenGroup(
            channel=str(item["channel"]),
            group_id=str(item["group_id"]),
            title=str(item.get("title", "")),
            last_seen=float(item["last_seen"]),
            mentioned_by=str(item.get("mentioned_by", "")),
            guild_id=None if item.get("guild_id") is None else str(item["guild_id"]),
        )
        for item in data["groups"]
    ]

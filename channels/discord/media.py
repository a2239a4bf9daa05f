"""Attachments of an inbound message, saved under `media/discord/<channel>/` (owner) or
`public/media/discord/<channel>/` (everyone else; see `base.media_folder`)."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import aiohttp
import discord

from clawgate.channels.base import as_seen_by, media_folder
from clawgate.kernel.bus import Trust
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 25 * 1024 * 1024
DOWNLOAD_TIMEOUT = 60.0

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class MediaSaver:
    def __init__(self, workspace: Path, writer: DiskWriter) -> None:
        self.workspace = workspace
        self._writer = writer

    async def download(self, message: discord.Message, trust: Trust) -> tuple[list[str], list[str]]:
        """Save the message's attachments; (workspace paths, notes for the text)."""
        saved: list[str] = []
        notes: list[str] = []
        folder = Path(media_folder(trust, "discord", str(message.channel.id)))
        for attachment in message.attachments:
            if attachment.size > MAX_DOWNLOAD_BYTES:
                notes.append(
                    f"[attachment {attachment.filename} not downloaded: "
                    f"{attachment.size} bytes is over the limit]"
                )
                continue
            relative = folder / f"{message.id}_{_safe_name(attachment.filename)}"
            try:
                async with asyncio.timeout(DOWNLOAD_TIMEOUT):
                    data = await attachment.read()
                await asyncio.to_thread(self._save, relative, data)
            except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("discord: attachment %s not saved: %s", attachment.filename, exc)
                notes.append(f"[attachment {attachment.filename} could not be downloaded]")
                continue
            saved.append(relative.as_posix())
            kind = attachment.content_type or "file"
            seen = as_seen_by(trust, relative.as_posix())
            notes.append(f"[attachment saved to {seen} ({kind}, {len(data)} bytes)]")
        return saved, notes

    def _save(self, relative: Path, data: bytes) -> None:
        path = self.workspace / relative
        self._writer.mkdir(path.parent)
        self._writer.replace(path, data, mode=0o600)


def _safe_name(filename: str) -> str:
    cleaned = _UNSAFE_NAME.sub("_", filename).strip("._") or "file"
    return cleaned[-100:]

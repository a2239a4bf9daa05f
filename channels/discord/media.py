"""Attachments of an inbound message, saved under `media/discord/<channel>/` (owner) or the
chat's own area `public/<chat>/media/` (everyone else; see `base.media_folder`). File names
are made safe (`kernel.areas.safe_file_name`) and confined to that folder."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
import discord

from clawgate.channels.base import as_seen_by, media_folder
from clawgate.kernel.areas import safe_file_name
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import DiskWriter, confine

log = logging.getLogger(__name__)

MAX_DOWNLOAD_BYTES = 25 * 1024 * 1024
DOWNLOAD_TIMEOUT = 60.0


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
            name = f"{safe_file_name(str(message.id))}_{safe_file_name(attachment.filename)}"
            relative = folder / name
            try:
                async with asyncio.timeout(DOWNLOAD_TIMEOUT):
                    data = await attachment.read()
                await asyncio.to_thread(self._save, folder, name, data)
            except (
                discord.HTTPException,
                aiohttp.ClientError,
                OSError,
                TimeoutError,
                PathOutsideRoot,
            ) as exc:
                log.warning("discord: attachment %s not saved: %s", attachment.filename, exc)
                notes.append(f"[attachment {attachment.filename} could not be downloaded]")
                continue
            saved.append(relative.as_posix())
            kind = attachment.content_type or "file"
            seen = as_seen_by(trust, relative.as_posix())
            notes.append(f"[attachment saved to {seen} ({kind}, {len(data)} bytes)]")
        return saved, notes

    def _save(self, folder: Path, name: str, data: bytes) -> None:
        path = confine(self.workspace / folder, name)
        self._writer.mkdir(path.parent)
        self._writer.replace(path, data, mode=0o600)

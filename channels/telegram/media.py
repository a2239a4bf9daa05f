"""Photos, documents, voice and audio of an inbound message, saved into the workspace.

Owner chats keep theirs under `media/telegram/<chat>/`, everyone else's land under
`public/media/...`, the only folder their sessions' tools reach (`base.media_folder`).
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.channels.base import as_seen_by, media_folder
from clawgate.channels.telegram.sender import ApiCalls
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import one_line
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from telegram import Message

log = logging.getLogger(__name__)

# The Bot API refuses getFile for anything larger.
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


class MediaFetcher:
    def __init__(self, workspace: Path, calls: ApiCalls, writer: DiskWriter) -> None:
        self.workspace = workspace
        self._calls = calls
        self._writer = writer

    async def fetch(self, msg: Message, chat_id: str, trust: Trust) -> tuple[list[str], list[str]]:
        """Fetch the message's attachments; (workspace paths, notes for the text)."""
        wanted: list[tuple[str, Any, str]] = []
        if msg.photo:
            largest = max(msg.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
            wanted.append(("photo", largest, f"{largest.file_unique_id}.jpg"))
        if msg.document:
            name = _safe_name(msg.document.file_name or "file")
            wanted.append(("document", msg.document, f"{msg.document.file_unique_id}_{name}"))
        if msg.voice:
            wanted.append(("voice", msg.voice, f"{msg.voice.file_unique_id}.ogg"))
        if msg.audio:
            name = _safe_name(msg.audio.file_name or "audio.mp3")
            wanted.append(("audio", msg.audio, f"{msg.audio.file_unique_id}_{name}"))
        paths: list[str] = []
        notes: list[str] = []
        folder = Path(media_folder(trust, "telegram", _safe_name(chat_id)))
        for kind, attachment, filename in wanted:
            relative = (folder / filename).as_posix()
            if (attachment.file_size or 0) > MAX_DOWNLOAD_BYTES:
                notes.append(f"[{kind}: {filename} not downloaded, larger than 20 MB]")
                continue
            try:
                await self._download(attachment, self.workspace / relative)
            except Exception as exc:
                log.warning("telegram: %s download failed (%s)", kind, one_line(exc))
                notes.append(f"[{kind}: download failed]")
                continue
            paths.append(relative)
            notes.append(f"[{kind}: {as_seen_by(trust, relative)}]")
        return paths, notes

    async def _download(self, attachment: Any, target: Path) -> None:
        if await asyncio.to_thread(target.exists):
            return  # fetched before a restart
        file = await self._calls.run(attachment.get_file, "getFile")
        data = bytes(await file.download_as_bytearray())
        await asyncio.to_thread(self._save, target, data)

    def _save(self, target: Path, data: bytes) -> None:
        self._writer.mkdir(target.parent)
        self._writer.replace(target, data, mode=0o600)


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", name).strip("._")
    return cleaned[:100] or "file"

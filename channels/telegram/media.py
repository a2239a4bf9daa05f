"""Photos, documents, voice and audio of an inbound message, saved into the workspace.

Owner chats keep theirs under `media/telegram/<chat>/`, everyone else's land in the chat's
own area `public/<chat>/media/`, the only folder its session's tools reach
(`base.media_folder`). No file name comes raw from the Bot API: `file_unique_id` and
`file_name` are made safe (`kernel.areas.safe_file_name`) and the result is confined to the
media folder, so a hostile server cannot aim a download anywhere else.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.channels.base import as_seen_by, media_folder
from clawgate.channels.telegram.sender import ApiCalls
from clawgate.kernel.areas import safe_file_name
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import one_line
from clawgate.kernel.storage import DiskWriter, confine

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
            wanted.append(("photo", largest, _file_name(largest, ".jpg")))
        if msg.document:
            wanted.append(("document", msg.document, _file_name(msg.document, "", "file")))
        if msg.voice:
            wanted.append(("voice", msg.voice, _file_name(msg.voice, ".ogg")))
        if msg.audio:
            wanted.append(("audio", msg.audio, _file_name(msg.audio, "", "audio.mp3")))
        paths: list[str] = []
        notes: list[str] = []
        folder = Path(media_folder(trust, "telegram", chat_id))
        for kind, attachment, filename in wanted:
            relative = (folder / filename).as_posix()
            if (attachment.file_size or 0) > MAX_DOWNLOAD_BYTES:
                notes.append(f"[{kind}: {filename} not downloaded, larger than 20 MB]")
                continue
            try:
                # Belt and braces: the name is already one safe component.
                target = confine(self.workspace / folder, filename)
                await self._download(attachment, target)
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


def _file_name(attachment: Any, suffix: str, default_name: str = "") -> str:
    """`<file_unique_id><suffix>` or `<file_unique_id>_<file name>`, every part made safe."""
    unique = safe_file_name(str(attachment.file_unique_id or ""), "file")
    if not default_name:
        return unique + suffix
    name = safe_file_name(getattr(attachment, "file_name", None) or default_name, default_name)
    return f"{unique}_{name}"

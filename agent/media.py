"""Media a user sent, turned into what the model can take: images as image content, voice
as a transcript. The files themselves stay in the workspace where the channel put them.

A media path is loaded only if it lies in the message's reach (kernel.areas.Reach, the same
check as the file tools): a group's message cannot name another chat's download."""

from __future__ import annotations

import asyncio
import base64
import logging
import mimetypes
from pathlib import Path
from typing import Any

from clawgate.agent.llm import LLMClient
from clawgate.kernel.areas import Reach
from clawgate.kernel.bus import InboundMessage
from clawgate.kernel.errors import ModelUnavailable, PathOutsideRoot

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".webp"}
AUDIO_SUFFIXES = {".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm"}
MAX_IMAGE_BYTES = 5 * 1024 * 1024


def _media_file(workspace: Path, message: InboundMessage, relative: str) -> Path | None:
    """The file a media path names, if it is one and inside the message's reach."""
    try:
        path = Reach.of(workspace, message.trust, message.session_key).workspace_file(relative)
    except PathOutsideRoot:
        log.warning("%s: media %s is outside its chat's reach", message.session_key, relative)
        return None
    return path if path.is_file() else None


def _load_images(workspace: Path, message: InboundMessage) -> list[dict[str, Any]]:
    parts = []
    for relative in message.media:
        path = _media_file(workspace, message, relative)
        if path is None or path.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        if path.stat().st_size > MAX_IMAGE_BYTES:
            log.info("%s: image over 5 MB, passed as a file only", relative)
            continue
        mime = mimetypes.guess_type(path.name)[0] or "image/jpeg"
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{data}"}})
    return parts


async def image_parts(workspace: Path, message: InboundMessage) -> list[dict[str, Any]]:
    """Image content parts for the images among the message's media (workspace-relative)."""
    if not message.media:
        return []
    return await asyncio.to_thread(_load_images, workspace, message)


def attach_images(
    messages: list[dict[str, Any]], parts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A copy of `messages` whose last user message carries `parts` beside its text. Only the
    request gets them: the stored message keeps the text (base64 never reaches the file)."""
    if not parts:
        return messages
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        if out[index].get("role") == "user":
            text = out[index].get("content") or ""
            out[index] = {**out[index], "content": [{"type": "text", "text": text}, *parts]}
            break
    return out


async def transcripts(
    llm: LLMClient, model: str, workspace: Path, message: InboundMessage
) -> list[str]:
    """A note per voice/audio file: its transcript, or why there is none."""
    notes = []
    for relative in message.media:
        path = await asyncio.to_thread(_media_file, workspace, message, relative)
        if path is None or path.suffix.lower() not in AUDIO_SUFFIXES:
            continue
        try:
            text = await llm.transcribe(path, model=model)
        except ModelUnavailable as exc:
            log.warning("%s: transcription failed: %s", relative, exc)
            notes.append(f"[voice {relative}: transcription failed]")
            continue
        notes.append(f"[voice transcript of {relative}]: {text}")
    return notes

"""The one redactor: logs, chat replies, session records, status and doctor output.

A configured secret is matched case-insensitively (python-telegram-bot lowercases parts
of an error description), and values shaped like a credential are caught even when they
were never configured: Telegram bot tokens, `sk-` API keys, Discord bot tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
# Shorter values are placeholders ("none", "ollama"), not secrets: replacing them would
# garble ordinary words in every line.
MIN_SECRET_LENGTH = 8
_SHAPES = (
    r"\b\d{6,12}:[A-Za-z0-9_-]{30,}",  # Telegram bot token
    r"\bsk-[A-Za-z0-9_-]{16,}",  # OpenAI-style API key
    r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",  # Discord bot token
)


class Redactor:
    """Replace every configured secret, in any letter case, and every token-shaped value."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        # Longest first: a secret that contains another is replaced whole.
        parts = [re.escape(s) for s in kept] + list(_SHAPES)
        self._pattern = re.compile("|".join(parts), re.IGNORECASE)

    def __call__(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text)

    redact = __call__

    def data(self, value: Any) -> Any:
        """`value` with every string inside it (dict values, list items) redacted; the very
        same object when nothing changed, so a caller can tell whether anything did."""
        if isinstance(value, str):
            return self._pattern.sub(REDACTED, value)
        if isinstance(value, dict):
            items = {key: self.data(item) for key, item in value.items()}
            changed = any(items[key] is not item for key, item in value.items())
            return items if changed else value
        if isinstance(value, list | tuple):
            parts = [self.data(item) for item in value]
            if all(new is old for new, old in zip(parts, value, strict=True)):
                return value
            return type(value)(parts)
        return value


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """One-off redaction; build a `Redactor` once where it runs on every line."""
    return Redactor(secrets)(text)

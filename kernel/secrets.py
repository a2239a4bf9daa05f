r"""The one redactor: logs, chat replies, session records, status and doctor output.

A configured secret is matched case-insensitively (python-telegram-bot lowercases parts
of an error description), and values shaped like a credential are caught even when they
were never configured: Telegram bot tokens, `sk-` API keys, Discord bot tokens.

A provider or proxy that echoes a secret may have encoded it first, so each configured
secret is also matched in the forms a library produces:

    percent-encoded   any character as %XX (either hex case), a space as "+"
    JSON-escaped      any character as \uXXXX, "/" as "\/", '"' and "\" backslashed
    base64            standard or URL-safe alphabet, with or without padding, itself
                      possibly percent-encoded or JSON-escaped

Each character of the secret may take any of its forms independently, so a mixed encoding
(only "/" and ":" encoded, say) is caught too. Not caught: the secret's base64 inside a
longer base64 string (it then depends on the bytes around it).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from functools import cached_property
from typing import Any

REDACTED = "[REDACTED]"
# Shorter values are placeholders ("none", "ollama"), not secrets: replacing them would
# garble ordinary words in every line.
MIN_SECRET_LENGTH = 8
SHORTEST_SHAPE = 19  # "sk-" and 16 more: the shortest value the shapes below match
_SHAPES = (
    r"\b\d{6,12}:[A-Za-z0-9_-]{30,}",  # Telegram bot token
    r"\bsk-[A-Za-z0-9_-]{16,}",  # OpenAI-style API key
    r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",  # Discord bot token
)

# Further ways a character is written: "+" for a space in a query string or form body;
# the backslash escapes JSON allows besides \uXXXX.
_SPECIAL_FORMS = {" ": [r"\+"], "/": [r"\\/"], '"': [r'\\"'], "\\": [r"\\\\"]}
_URL_SAFE = {"+": "-", "/": "_"}  # the URL-safe base64 alphabet's two letters
_SHAPES_PATTERN = re.compile("|".join(_SHAPES), re.IGNORECASE)


def _compile(forms: list[str]) -> re.Pattern[str]:
    return re.compile("|".join([*forms, *_SHAPES]), re.IGNORECASE) if forms else _SHAPES_PATTERN


class Redactor:
    """Replace every configured secret, in any letter case and any of the encodings above,
    and every token-shaped value."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        self._kept = kept
        # Every encoded form needs a "%" or a backslash in the text (or "+" for a space).
        # Text without them - nearly every reply and record - can hold a secret only as
        # written or as its bare base64, and mostly holds neither: a substring check (letter
        # case and the two base64 alphabets folded) finds out before any pattern runs.
        self._markers = ("%", "\\", "+") if any(" " in s for s in kept) else ("%", "\\")
        self._needles = [
            _fold(form)
            for secret in kept
            for form in (secret, base64.b64encode(secret.encode("utf-8")).decode().rstrip("="))
        ]
        # Nothing shorter can match: every form of a secret is at least as long as the
        # secret (its base64 is longer), and a token shape needs SHORTEST_SHAPE characters.
        self._shortest = min([SHORTEST_SHAPE, *(len(secret) for secret in kept)])

    # The secrets' patterns are compiled on first need: each takes ~10-20 ms to compile, a
    # process builds several redactors at start, and most never see a text that needs them.
    @cached_property
    def _encoded(self) -> re.Pattern[str]:
        # Longest first: a secret that contains another is replaced whole.
        return _compile([_any_form(s) for s in self._kept])

    @cached_property
    def _bare(self) -> re.Pattern[str]:
        return _compile([_any_form(s, encoded=False) for s in self._kept])

    def __call__(self, text: str) -> str:
        if len(text) < self._shortest:
            return text  # most strings of a record (a role, a time stamp, an id)
        if any(marker in text for marker in self._markers):
            return self._encoded.sub(REDACTED, text)
        if self._needles:
            folded = _fold(text)
            if any(needle in folded for needle in self._needles):
                return self._bare.sub(REDACTED, text)
        return _SHAPES_PATTERN.sub(REDACTED, text)

    redact = __call__

    def data(self, value: Any) -> Any:
        """`value` with every string inside it (dict values, list items) redacted; the very
        same object when nothing changed, so a caller can tell whether anything did."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            changed: dict[Any, Any] | None = None  # copied at the first change only
            for key, item in value.items():
                new = self.data(item)
                if new is not item:
                    if changed is None:
                        changed = dict(value)
                    changed[key] = new
            return value if changed is None else changed
        if isinstance(value, list | tuple):
            parts = [self.data(item) for item in value]
            if all(new is old for new, old in zip(parts, value, strict=True)):
                return value
            return type(value)(parts)
        return value


_FOLD = str.maketrans({"-": "+", "_": "/"})


def _fold(text: str) -> str:
    """Lower case, and the URL-safe base64 letters as the standard ones: a prefilter may
    find more than the patterns match, never less."""
    return text.lower().translate(_FOLD)


def _char_forms(char: str, *also: str, encoded: bool = True) -> str:
    """A pattern for one character as written (or as one of `also`) and, when `encoded`,
    percent-encoded or JSON-escaped."""
    forms = [re.escape(form) for form in (char, *also)]
    if encoded:
        forms.append("".join(f"%{byte:02x}" for byte in char.encode("utf-8")))
        units = char.encode("utf-16-be")  # a character past U+FFFF is a surrogate pair in JSON
        forms.append("".join(f"\\\\u{units[i : i + 2].hex()}" for i in range(0, len(units), 2)))
        forms += _SPECIAL_FORMS.get(char, [])
    return forms[0] if len(forms) == 1 else f"(?:{'|'.join(forms)})"


def _base64_forms(secret: str, encoded: bool) -> str:
    """A pattern for the secret's base64: either alphabet, padded or not."""
    encoded_text = base64.b64encode(secret.encode("utf-8")).decode("ascii")
    core = encoded_text.rstrip("=")
    chars = "".join(_char_forms(c, *_URL_SAFE.get(c, ""), encoded=encoded) for c in core)
    padding = len(encoded_text) - len(core)
    pad = _char_forms("=", encoded=encoded)
    return chars + (f"(?:{pad}){{0,{padding}}}" if padding else "")


def _any_form(secret: str, *, encoded: bool = True) -> str:
    """The secret as written and its base64, each also percent-encoded or JSON-escaped when
    `encoded`."""
    written = "".join(_char_forms(c, encoded=encoded) for c in secret)
    return f"{written}|{_base64_forms(secret, encoded)}"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """One-off redaction; build a `Redactor` once where it runs on every line."""
    return Redactor(secrets)(text)

"""The one sanitiser for text an outsider chose (a group's title, a member's display name, a
platform's error description) before it is logged or printed to a terminal.

Anyone can add the bot to a group, so such text may hold CR/LF that forge whole log lines,
ESC/OSC sequences a terminal obeys (OSC 52 writes the clipboard), or bidi overrides that make
a line read differently from what it holds. `sanitise` shows each of these escaped, so the
text stays readable and cannot act:

    C0 controls, DEL, C1 controls   "\\x1b", "\\x9b" (tab, LF and CR as "\\t", "\\n", "\\r")
    U+2028, U+2029                  "\\u2028", "\\u2029" (line and paragraph separators)
    bidi marks, embeddings,         "\\u202e" ... (U+061C, U+200E/F, U+202A-E, U+2066-9)
    overrides, isolates
    lone surrogates                 "\\ud800" (they cannot even be encoded to UTF-8)

Everything else is kept, emoji joiners included. Backslashes are kept as they are: the
escapes are for reading, not for decoding back. Pure, and cheap on the common case of
printable text (one `str.isprintable`). The dashboard does not use it: its HTML escaping is
its own.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def sanitise(text: str) -> str:
    """`text` with every control, line-separator and bidi character shown escaped."""
    # Every character the pattern matches is non-printable, so printable text is done here.
    if text.isprintable():
        return text
    return _UNSAFE.sub(_escaped, text)

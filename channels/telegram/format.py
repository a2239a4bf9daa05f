"""Markdown (as models write it) -> the HTML subset Telegram accepts, and Telegram's lengths.

Telegram's HTML mode knows b, i, s, u, a, code, pre and blockquote; everything else must be
escaped. Emphasis markers that do not pair up stay literal text rather than risking a
mis-nested tag, which Telegram would reject for the whole message.
"""

from __future__ import annotations

import html
import re

from clawgate.channels.split import split_message

MAX_MESSAGE_UNITS = 4096

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"\[([^\]\n]+)\]\(\s*<?([^)\s>]+)>?\s*\)")
_SAFE_URL = re.compile(r"^(https?|tg|mailto):", re.IGNORECASE)
_PLACEHOLDER = re.compile("\x00(\\d+)\x00")
_TAG = re.compile(r"<(/?)([a-z-]+)[^>]*>")

_EMPHASIS = [
    (re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*"), ("b", "i")),
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*"), ("b",)),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)"), ("b",)),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), ("s",)),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), ("i",)),
    # Underscores only at word edges: snake_case_names are not italics.
    (re.compile(r"(?<!\w)_(?=[^\s_])(.+?)(?<=[^\s_])_(?!\w)"), ("i",)),
]


def utf16_len(text: str) -> int:
    """What Telegram counts: UTF-16 code units (an emoji outside the BMP is 2)."""
    return len(text.encode("utf-16-le")) // 2


def escape(text: str) -> str:
    return html.escape(text, quote=False)


def markdown_to_html(text: str) -> str:
    text = text.replace("\x00", "")
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            marker, language = fence.group(1), fence.group(2)
            body: list[str] = []
            i += 1
            while i < len(lines) and not _closes(lines[i], marker):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end of an unclosed block)
            code = escape("\n".join(body))
            if language:
                out.append(f'<pre><code class="language-{escape(language)}">{code}</code></pre>')
            else:
                out.append(f"<pre>{code}</pre>")
            continue
        if _QUOTE.match(line):
            quoted: list[str] = []
            while i < len(lines) and (match := _QUOTE.match(lines[i])):
                quoted.append(_inline(match.group(1)))
                i += 1
            out.append("<blockquote>" + "\n".join(quoted) + "</blockquote>")
            continue
        out.append(_block_line(line))
        i += 1
    return "\n".join(out)


def render_parts(text: str, limit: int = MAX_MESSAGE_UNITS) -> list[tuple[str, str]]:
    """(html, markdown) pairs, each fitting Telegram's limit as HTML *and* as plain text, so
    a part whose HTML is rejected can be sent as plain text without splitting again."""

    def measure(part: str) -> int:
        return max(utf16_len(part), utf16_len(markdown_to_html(part)))

    return [(markdown_to_html(part), part) for part in split_message(text, limit, length=measure)]


def _closes(line: str, marker: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(marker[0] * len(marker)) and not stripped.strip(marker[0])


def _block_line(line: str) -> str:
    if _RULE.match(line):
        return "——————"
    if heading := _HEADING.match(line):
        return f"<b>{_inline(heading.group(1))}</b>"
    if bullet := _BULLET.match(line):
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str) -> str:
    stash: list[str] = []

    def keep(fragment: str) -> str:
        stash.append(fragment)
        return f"\x00{len(stash) - 1}\x00"

    def code(match: re.Match[str]) -> str:
        return keep(f"<code>{escape(match.group(2))}</code>")

    def link(match: re.Match[str]) -> str:
        label, url = match.group(1), match.group(2)
        if not _SAFE_URL.match(url):
            return match.group(0)
        href = html.escape(url, quote=True)
        return keep(f'<a href="{href}">{_emphasis(escape(label))}</a>')

    text = _CODE_SPAN.sub(code, text)
    text = _LINK.sub(link, text)
    text = _emphasis(escape(text))
    # Placeholders can nest (a code span inside a link label), so restore until none remain.
    while _PLACEHOLDER.search(text):
        text = _PLACEHOLDER.sub(lambda m: stash[int(m.group(1))], text)
    return text


def _emphasis(text: str) -> str:
    for pattern, tags in _EMPHASIS:

        def wrap(match: re.Match[str], tags: tuple[str, ...] = tags) -> str:
            inner = match.group(1)
            if not _balanced(inner):
                return match.group(0)
            opening = "".join(f"<{t}>" for t in tags)
            closing = "".join(f"</{t}>" for t in reversed(tags))
            return f"{opening}{inner}{closing}"

        text = pattern.sub(wrap, text)
    return text


def _balanced(fragment: str) -> bool:
    stack: list[str] = []
    for match in _TAG.finditer(fragment):
        closing, name = match.group(1), match.group(2)
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack

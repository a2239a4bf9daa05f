"""The assistant's Markdown as the chat page shows it: rendered on the server, then sanitised.

markdown-it-py (CommonMark, plus GFM tables and strikethrough) turns the text into HTML
with raw HTML switched off, so a `<script>` in a reply comes out as text; nh3 (the Ammonia
sanitiser) then keeps only the tags below, links to http, https and mailto alone (never
`javascript:`, `data:` or a relative link into the dashboard), and no attribute that could
run or style anything. Images are dropped: a reply must not make the browser fetch a URL.
What is left needs no script and no inline style, so the page's CSP stays as it is.

The transcript carries this HTML beside the text for the page's first render, and each
reply event carries it for the live page (gateway/dashboard/web_channel.py); streamed
deltas stay plain text until the reply replaces them.
"""

from __future__ import annotations

from functools import cache

import nh3
from markdown_it import MarkdownIt

TAGS = frozenset(
    {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "del", "s", "code"}
    | {"pre", "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td"}
)
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})


@cache
def _parser() -> MarkdownIt:
    # "commonmark" with html off: raw HTML in the text is escaped, not passed on.
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def to_html(text: str) -> str:
    """Safe HTML for one assistant message written in Markdown."""
    return nh3.clean(
        _parser().render(text),
        tags=set(TAGS),
        attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        url_relative="deny",
        link_rel="noopener noreferrer nofollow",
    )

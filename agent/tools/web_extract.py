"""A fetched body as text the model can read: HTML as Markdown, PDF as its text, text as is.

HTML goes through readability-lxml (the main article, without navigation, ads and
footers; links made absolute against the page's address) and then markdownify (headings,
links, lists and tables as Markdown). A page readability finds no article in is converted
whole. PDFs are read with pypdf, page by page. The libraries load on first use, so no
command that never fetches imports them; the work is CPU-bound and runs in a worker thread
(`extract`).
"""

from __future__ import annotations

import asyncio
import io
import re
from dataclasses import dataclass

from clawgate.kernel.errors import ToolError

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("application/json", "application/xml", "application/javascript")
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Page:
    title: str
    text: str
    kind: str  # "html", "pdf" or "text"


def kind_of(content_type: str, body: bytes) -> str | None:
    """Which reader a body needs, from its declared type (and a PDF's magic bytes)."""
    if content_type == "application/pdf" or body.startswith(b"%PDF-"):
        return "pdf"
    if content_type in HTML_TYPES:
        return "html"
    if content_type.startswith("text/") or content_type in TEXT_TYPES:
        return "text"
    if not content_type and body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "html"
    return None


async def extract(body: bytes, content_type: str, charset: str | None, url: str) -> Page:
    """The body as a Page; ToolError for a type no reader handles or a body that cannot be read."""
    kind = kind_of(content_type, body)
    if kind is None:
        raise ToolError(f"{url} is {content_type or 'of no stated type'}, not text, HTML or PDF")
    if kind == "pdf":
        return await asyncio.to_thread(_pdf, body, url)
    if kind == "html":
        return await asyncio.to_thread(_html, body, charset, url)
    return Page("", _decode(body, charset), "text")


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return body.decode("utf-8", errors="replace")


def _html(body: bytes, charset: str | None, url: str) -> Page:
    from markdownify import markdownify
    from readability import Document
    from readability.encoding import get_encoding

    # No charset in the headers: the page's own <meta charset>, else a guess from its text.
    html = _decode(body, charset or get_encoding(body))

    document = Document(html, url=url)
    title = document.short_title() or ""
    try:
        article = document.summary(html_partial=True)
    except Exception:  # readability raises its own Unparseable, or lxml's errors, on odd pages
        article = html
    markdown = markdownify(article, heading_style="ATX", bullets="-", strip=["img", "script"])
    if not markdown.strip():
        markdown = markdownify(html, heading_style="ATX", bullets="-", strip=["img", "script"])
    return Page(title, _BLANK_RUNS.sub("\n\n", markdown).strip(), "html")


def _pdf(body: bytes, url: str) -> Page:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages]
        title = str(reader.metadata.title or "") if reader.metadata else ""
    except (PdfReadError, ValueError, KeyError) as exc:
        raise ToolError(f"{url} is a PDF that cannot be read ({exc})") from None
    text = "\n\n".join(f"[page {n}]\n{page.strip()}" for n, page in enumerate(pages, 1))
    return Page(title, text, "pdf")

"""Markdown -> Telegram HTML, checked against the fake's HTML rules."""

from __future__ import annotations

import pytest

from clawgate.channels.telegram.format import markdown_to_html, render_parts, utf16_len
from tests.fakes.telegram import parse_html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_", "<i>it</i> and <i>it</i>"),
        ("***both***", "<b><i>both</i></b>"),
        ("~~gone~~", "<s>gone</s>"),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
        ("a < b & c > d", "a &lt; b &amp; c &gt; d"),
        ("`x < **y**`", "<code>x &lt; **y**</code>"),
        ("[site](https://x.org/?a=1&b=2)", '<a href="https://x.org/?a=1&amp;b=2">site</a>'),
        ("[bad](javascript:alert(1))", "[bad](javascript:alert(1))"),
        ("# Title", "<b>Title</b>"),
        ("- one\n* two\n  + three", "• one\n• two\n  • three"),
        ("1. first", "1. first"),
        ("> quoted **text**\n> more", "<blockquote>quoted <b>text</b>\nmore</blockquote>"),
    ],
)
def test_inline_and_block_markdown(markdown: str, html: str) -> None:
    assert markdown_to_html(markdown) == html


def test_code_block_keeps_its_language_and_escapes() -> None:
    html = markdown_to_html("```python\nif a < b:\n    print('**x**')\n```")
    assert html == (
        "<pre><code class=\"language-python\">if a &lt; b:\n    print('**x**')</code></pre>"
    )
    assert markdown_to_html("```\nplain\n```") == "<pre>plain</pre>"


def test_unpaired_and_crossed_markers_stay_valid_html() -> None:
    for markdown in ["**a *b** c*", "**open", "_a **b_ c**", "*", "** **", "`unclosed"]:
        parse_html(markdown_to_html(markdown))  # raises if Telegram would reject it


def test_utf16_length_counts_astral_characters_twice() -> None:
    assert utf16_len("a😀é") == 4


def test_render_parts_fit_as_html_and_as_plain_text() -> None:
    text = "\n\n".join(f"**{i}** " + "a < b & c " * 40 for i in range(40))
    parts = render_parts(text)
    assert len(parts) > 1
    for html, plain in parts:
        assert utf16_len(html) <= 4096
        assert utf16_len(plain) <= 4096
        parse_html(html)

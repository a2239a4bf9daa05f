"""split_message: natural boundaries, code fences closed and reopened, any length function."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from clawgate.channels.split import split_message


def _fences_balanced(part: str) -> bool:
    return len(re.findall(r"^```", part, re.MULTILINE)) % 2 == 0


def test_short_text_is_one_part_unchanged() -> None:
    assert split_message("hello\n\nworld", 100) == ["hello\n\nworld"]
    assert split_message("  \n ", 100) == []


def test_paragraphs_before_lines_before_words() -> None:
    text = "aaaa bbbb\ncccc\n\ndddd eeee"
    assert split_message(text, 14) == ["aaaa bbbb\ncccc", "dddd eeee"]
    assert split_message("aaaa bbbb\ncccc dddd", 10) == ["aaaa bbbb", "cccc dddd"]
    assert split_message("aaaa bbbb cccc", 9) == ["aaaa bbbb", "cccc"]


def test_a_word_longer_than_a_part_is_cut_by_characters() -> None:
    assert split_message("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]


def test_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"line {i}" for i in range(20))
    text = f"intro\n\n```python\n{code}\n```\n\nafter"
    parts = split_message(text, 60)
    assert len(parts) > 2
    for part in parts:
        assert len(part) <= 60
        assert _fences_balanced(part)
    coded = [p for p in parts if "line" in p]
    assert all(p.startswith("```python\n") or "\n```python\n" in p for p in coded)
    body = "".join(re.sub(r"```\w*\n?", "", p) for p in parts)
    assert re.findall(r"line (\d+)", body) == [str(i) for i in range(20)]


def test_length_function_decides_what_fits() -> None:
    # Emoji count double, as Telegram's UTF-16 units do.
    def units(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2

    parts = split_message("😀" * 30, 20, length=units)
    assert [units(p) for p in parts] == [20, 20, 20]


def test_blank_lines_between_paragraphs_are_kept_within_a_part() -> None:
    text = "a\n\n\nb\n" + "c" * 20
    assert split_message(text, 10)[0] == "a\n\n\nb"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab \n", min_size=1, max_size=40),
            st.builds(lambda s: f"```py\n{s}\n```", st.text(alphabet="xy \n", max_size=60)),
        ),
        max_size=12,
    ),
    st.integers(min_value=20, max_value=80),
)
def test_parts_fit_and_keep_every_character(blocks: list[str], limit: int) -> None:
    text = "\n\n".join(blocks)
    parts = split_message(text, limit)
    for part in parts:
        assert len(part) <= limit
        assert _fences_balanced(part) or part is parts[-1]
    kept = "".join(re.sub(r"```(py)?", "", p) for p in parts)
    assert sorted(c for c in kept if c not in " \n") == sorted(
        c for c in re.sub(r"```(py)?", "", text) if c not in " \n"
    )

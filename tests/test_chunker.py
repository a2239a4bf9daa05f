import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from clawgate.agent.memory.chunker import chunk_file
from clawgate.agent.memory.coverage import split_terms, terms
from clawgate.agent.memory.tokens import CJK_RUN, WORD, cjk_runs, estimate_tokens, words


def test_history_one_chunk_per_entry_dated_by_its_stamp():
    text = (
        "# History\n\n"
        "[2026-05-04 10:15] (telegram:1) Planned the Lisbon trip.\n\n"
        "[2026-06-01 09:00] (cli:x) Two lines\ncontinuing here.\n\n"
    )
    chunks = chunk_file("memory/HISTORY.md", text)
    # The "# History" heading alone is no chunk (issue 17: no heading-only chunks).
    assert [(c.start_line, c.end_line, c.date) for c in chunks] == [
        (3, 3, "2026-05-04"),
        (5, 6, "2026-06-01"),
    ]
    assert chunks[1].text == "[2026-06-01 09:00] (cli:x) Two lines\ncontinuing here."


def test_markdown_sections_never_mix_and_memory_is_undated():
    text = "# Memory\n\n## People\n- Rita lives in Lisbon\n\n## Cat\n- Miso\n"
    chunks = chunk_file("memory/MEMORY.md", text)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4), (6, 7)]
    assert all(c.date is None for c in chunks)
    assert chunks[0].text.startswith("# Memory") and "Miso" not in chunks[0].text


def test_daily_log_dated_by_file_name_and_long_sections_overlap():
    lines = [f"- {h:02d}:00 note number {h} " + "word " * 30 for h in range(40)]
    chunks = chunk_file("memory/2026-11-02.md", "\n".join(lines) + "\n")
    assert len(chunks) > 2
    assert all(c.date == "2026-11-02" for c in chunks)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 40
    for before, after in itertools.pairwise(chunks):
        assert after.start_line <= before.end_line  # overlap
        assert after.start_line > before.start_line
        assert estimate_tokens(before.text) <= 440
    covered = set()
    for c in chunks:
        covered.update(range(c.start_line, c.end_line + 1))
    assert covered == set(range(1, 41))


def test_chunk_text_and_hash_follow_content_only():
    a = chunk_file("memory/2026-01-01.md", "- same line\n")[0]
    b = chunk_file("memory/2026-02-01.md", "- same line\n")[0]
    assert a.hash == b.hash and a.date != b.date
    assert chunk_file("memory/MEMORY.md", "\n\n   \n") == []


def test_one_huge_line_is_its_own_chunk():
    text = "short\n" + "x" * 5000 + "\nafter\n"
    chunks = chunk_file("memory/note.md", text)
    assert any(c.start_line == c.end_line == 2 for c in chunks)
    assert chunks[-1].end_line == 3


def test_memory_md_is_one_chunk_per_fact():
    """A fact competes on its own words, not inside a chunk of every other fact."""
    text = (
        "# Memory\n\n## People\n\n- Rita lives in Lisbon.\n  - since 2020\n"
        "- Ann is allergic to peanuts.\n\nA paragraph\nof two lines.\n\n## Cat\n- Miso\n"
    )
    chunks = chunk_file("memory/MEMORY.md", text)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 6), (7, 7), (9, 10), (12, 13)]
    assert chunks[0].text.endswith("- Rita lives in Lisbon.\n  - since 2020")
    # Other notes keep their windows: a short list stays one chunk.
    assert len(chunk_file("memory/notes.md", text)) == 2


def test_ascii_text_splits_into_the_same_words_as_through_the_full_pattern():
    # words() and cjk_runs() take a shortcut for ASCII text; it must split exactly as the
    # general patterns do, character by character and in mixed text.
    every_ascii = "".join(chr(i) for i in range(128))
    samples = [
        every_ascii,
        every_ascii.lower(),
        "Booked the 7:30 train_to Glasgow -- it's Ruth's (re)booking; e-mail: a.b@c.de",
        "snake_case and CamelCase, x86_64, 3.14, #tag, [link](http://x.y/z?q=1&r=2)",
        "",
    ]
    for text in samples:
        assert text.isascii()
        assert words(text) == WORD.findall(text)
        assert cjk_runs(text) == CJK_RUN.findall(text) == []
    mixed = "Ruth 喜欢 Glasgow café"
    assert words(mixed) == WORD.findall(mixed) == ["Ruth", "Glasgow", "café"]
    assert cjk_runs(mixed) == ["喜欢"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(max_size=12)
        | st.sampled_from(["\n", "\r\n", "\u2028", "\x85", "\x1c", "ΑΣ", "e\u0301", "喜欢", "ﬁ"]),
        max_size=10,
    )
)
def test_a_texts_terms_are_its_lines_terms_together(pieces: list[str]) -> None:
    # coverage.terms builds a multi-line text's terms from its lines' (each cached); that
    # must be what splitting the whole text at once gives, whatever the characters.
    text = "".join(pieces)
    assert terms(text) == split_terms(text)

"""Words, CJK runs and token counts: the one tokenizer the chunker, embedder and search share,
and the one token estimator the context guard, the chunker and `/context` share.

Latin-script text splits into words at anything that is not a letter or digit (as SQLite's
unicode61 tokenizer does). Chinese, Japanese and Korean text has no spaces, so a run of CJK
characters is kept whole and cut into character n-grams by whoever needs them.

Token estimates follow what BPE tokenizers do: about four characters a token for most
text, but about one token per CJK character - a characters/4 rule would undercount Chinese,
Japanese and Korean about fourfold and let a request overflow the context window.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

# Han (incl. extensions A and compatibility), kana, Hangul syllables and jamo.
_CJK_CLASS = (
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u309f\u30a0-\u30ff"
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af\U00020000-\U0002fa1f"
)
CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# What a tokenizer spends about a token on each: CJK characters, CJK punctuation ("，。「」")
# and full-width forms.
_WIDE_CHAR = re.compile(f"[{_CJK_CLASS}\u3000-\u303f\uff00-\uffef]")
# A word: letters and digits that are not CJK (underscore separates, like unicode61).
WORD = re.compile(f"(?:(?![{_CJK_CLASS}])[^\\W_])+")
# The same for ASCII text, where `[^\W_]` is exactly these: 4-5x faster than WORD's look-ahead
# at every character, and most of a memory's text is ASCII.
_ASCII_WORD = re.compile("[A-Za-z0-9]+")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves near also did get got let lets us s t don didn ve ll re m d""".split()
)
# Single characters too common to search for on their own (the one-character fallback).
CJK_STOP_CHARS = frozenset("的了是我你他她它在和吗呢吧啊也都就不有这那个们么什哪谁很把被给")


def normalise(text: str) -> str:
    """NFKC (full-width letters and digits become ASCII) and lower case."""
    return unicodedata.normalize("NFKC", text).lower()


def words(text: str) -> list[str]:
    """Latin-script words of already normalised text, in order."""
    if text.isascii():
        return _ASCII_WORD.findall(text)
    return WORD.findall(text)


def cjk_runs(text: str) -> list[str]:
    if text.isascii():
        return []
    return CJK_RUN.findall(text)


def cjk_bigrams(run: str) -> list[str]:
    if len(run) < 2:
        return [run] if run else []
    return [run[i : i + 2] for i in range(len(run) - 1)]


_SIBILANTS = ("s", "x", "z", "ch", "sh")


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """A crude English suffix stripper: enough to match "booked" with "booking" (cached: a
    recall stems the words of every candidate chunk, and a memory's words repeat)."""
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ies", "ied", "ed", "es", "ly", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            if suffix == "es" and not base.endswith(_SIBILANTS):
                continue  # "lives" is "live" + "s", as "boxes" is "box" + "es"
            if suffix in ("ies", "ied"):
                base += "y"
            return base
    return word


@lru_cache(maxsize=8192)
def token_set(text: str) -> frozenset[str]:
    """Stemmed content words plus CJK bigrams: the sets MMR compares with Jaccard (cached:
    the same chunks come back query after query)."""
    norm = normalise(text)
    found = {stem(w) for w in words(norm) if w not in STOPWORDS}
    for run in cjk_runs(norm):
        found.update(cjk_bigrams(run))
    return frozenset(found)


# What a chat format adds around each message (role, separators).
MESSAGE_OVERHEAD = 4


def estimate_tokens(text: str) -> int:
    """Roughly what a BPE tokenizer counts: ~4 characters a token, one per CJK character."""
    if text.isascii():  # O(1) for str: the common case costs nothing
        return (len(text) + 3) // 4
    return _non_ascii_tokens(text)


@lru_cache(maxsize=4096)
def _non_ascii_tokens(text: str) -> int:
    # Cached by the text itself: a stored message's strings are the same objects turn after
    # turn, and a str keeps its hash, so re-estimating a long history is a lookup per string.
    return _count(text)


def _count(text: str) -> int:
    wide = len(_WIDE_CHAR.findall(text))
    return wide + (len(text) - wide + 3) // 4


def message_tokens(message: Mapping[str, Any]) -> int:
    """One chat message (content, tool calls, names), as the request will carry it."""
    return MESSAGE_OVERHEAD + _value_tokens(message)


def estimate_messages(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """A whole request: every message, plus the tool schemas sent with it."""
    total = sum(message_tokens(message) for message in messages)
    return total + (_value_tokens(tools) if tools else 0) + 1


def _value_tokens(value: Any) -> int:
    if isinstance(value, str):
        return estimate_tokens(value)
    if isinstance(value, Mapping):
        # A key, its value and the punctuation around them (`"key": "value", `).
        return sum(estimate_tokens(str(k)) + _value_tokens(v) + 2 for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(_value_tokens(item) + 1 for item in value)
    return 1  # a number, true/false or null


def tail_within(text: str, budget: int) -> str:
    """The longest tail of `text` estimated at no more than `budget` tokens."""
    if estimate_tokens(text) <= budget:
        return text
    if text.isascii():
        return text[len(text) - max(budget, 0) * 4 :]
    # The estimate only grows with a longer tail: find the earliest start that still fits.
    low, high = 0, len(text)
    while low < high:
        middle = (low + high) // 2
        if _count(text[middle:]) <= budget:
            high = middle
        else:
            low = middle + 1
    return text[low:]

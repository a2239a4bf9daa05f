"""How much of a question a text covers: the question's content words (stemmed; CJK: single
characters), small talk aside, counted plainly or by weight (a word's idf: rare words count
more). Confidence, keyword evidence and the second hop (multihop.py) all count this way."""

from __future__ import annotations

from functools import lru_cache

from clawgate.agent.memory.tokens import (
    CJK_STOP_CHARS,
    STOPWORDS,
    cjk_runs,
    normalise,
    stem,
    words,
)

# Words of small talk: a message made of them names nothing in memory.
CHITCHAT = frozenset(
    """hi hello hey hiya thanks thank thx ok okay yes yeah yep no nope sure good great nice
    cool fine morning evening night bye goodbye please lol haha hmm well really today
    tonight doing going up again""".split()
)
CHITCHAT_CJK = frozenset("好谢哈嗯早晚安啦哦嘿呀嘛")


@lru_cache(maxsize=8192)
def terms(text: str) -> frozenset[str]:
    """Content words (stemmed) and CJK characters: what confidence counts as covered."""
    if "\n" in text:
        # No word or CJK run spans a line, so a text's terms are its lines' together. Built
        # from theirs (cached: entry_coverage and the reranker ask for each line's as well),
        # each line of a recall's candidates is split into words once, not twice.
        return frozenset().union(*map(terms, text.splitlines()))
    return split_terms(text)


def split_terms(text: str) -> frozenset[str]:
    """`terms`, worked out from the whole text at once."""
    norm = normalise(text)
    found = {stem(w) for w in words(norm) if w not in STOPWORDS and w not in CHITCHAT}
    for run in cjk_runs(norm):
        found.update(c for c in run if c not in CJK_STOP_CHARS and c not in CHITCHAT_CJK)
    return frozenset(found)


def weighted_coverage(weights: dict[str, float], text: str) -> float:
    """The share of the query's words (by weight: rare words count more) in a text."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return _covered(weights, text) / total


def _covered(weights: dict[str, float], text: str) -> float:
    found = terms(text)
    if found.isdisjoint(weights):
        return 0  # what the sum below gives: most lines of a candidate hold no query word
    return sum(w for term, w in weights.items() if term in found)


def entry_coverage(weights: dict[str, float], text: str) -> float:
    """A chunk's weighted coverage, averaged with that of its best line: a day's log holds
    many separate entries, and one entry that holds the whole question beats words
    scattered over several."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    whole = _covered(weights, text) / total
    lines = text.splitlines()
    if len(lines) < 2 or whole <= 0:
        return whole
    # Dividing by the same positive total keeps the order: the best line's share, as before.
    return (whole + max(_covered(weights, line) for line in lines) / total) / 2


def coverage(query_terms: frozenset[str], text: str) -> float:
    if not query_terms:
        return 0.0
    return len(query_terms & terms(text)) / len(query_terms)

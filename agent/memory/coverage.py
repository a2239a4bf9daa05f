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
        # from theirs (cached: Cover.entry and the reranker ask for each line's as well),
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


class Cover:
    """A question's words and their weights (idf: rare words count more), counted against
    many texts.

    A text's covered weight depends only on which of the question's words it holds, so the
    sum for each such set is worked out once a question, in the weights' order (the float
    that summing for each text would give), and a text costs a set intersection."""

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights
        self.total = sum(weights.values())
        self._words = frozenset(weights)
        self._sums: dict[frozenset[str], float] = {}

    def weighted(self, text: str) -> float:
        """The share of the question's words (by weight) in a text."""
        if self.total <= 0:
            return 0.0
        return self._covered(text) / self.total

    def entry(self, text: str) -> float:
        """A chunk's weighted coverage, averaged with that of its best line: a day's log
        holds many separate entries, and one entry that holds the whole question beats words
        scattered over several."""
        if self.total <= 0:
            return 0.0
        whole = self._covered(text) / self.total
        lines = text.splitlines()
        if len(lines) < 2 or whole <= 0:
            return whole
        # Dividing by the same positive total keeps the order: the best line's share.
        return (whole + max(map(self._covered, lines)) / self.total) / 2

    def _covered(self, text: str) -> float:
        held = terms(text) & self._words
        if not held:
            return 0  # most lines of a candidate hold no word of the question
        found = self._sums.get(held)
        if found is None:
            found = sum(w for term, w in self.weights.items() if term in held)
            self._sums[held] = found
        return found


def coverage(query_terms: frozenset[str], text: str) -> float:
    if not query_terms:
        return 0.0
    return len(query_terms & terms(text)) / len(query_terms)

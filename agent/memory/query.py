"""A question as the memory search takes it: safe FTS5 queries for its words and CJK runs
(`keyword_query`), each word's weight by how rare it is in the index (`term_weights`), and
the query's vector (`query_vector`), which leans toward the words no chunk contains."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clawgate.agent.memory.coverage import CHITCHAT, terms
from clawgate.agent.memory.embeddings import Embedder
from clawgate.agent.memory.tokens import (
    CJK_STOP_CHARS,
    STOPWORDS,
    cjk_bigrams,
    cjk_runs,
    normalise,
    stem,
    words,
)

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

MAX_QUERY_TERMS = 32
MAX_TRIGRAMS = 48
# Two-character sequences too common to mean anything on their own.
CJK_STOP_BIGRAMS = frozenset(
    "什么 时候 怎么 我们 你们 他们 这个 那个 哪里 没有 可以 现在 一个 了吗 的是 是不 不是 一下".split()
)


@dataclass(frozen=True)
class KeywordQuery:
    """A user's text as safe FTS5 queries: every term is a quoted string, so quotes,
    operators (AND, OR, NOT, NEAR), `*`, `^`, column filters, brackets and emoji in the
    input can never be FTS5 syntax."""

    match: str | None  # for chunks_fts (porter unicode61)
    trigram: str | None  # for chunks_tri
    short_cjk: tuple[str, ...]  # 1-2 character CJK words: substring fallback
    cjk_bigrams: tuple[str, ...]  # bigrams of longer runs, for the same substring scan
    terms: tuple[str, ...]  # for placing snippets
    words: tuple[str, ...] = ()  # the content words, for weighing coverage

    @property
    def empty(self) -> bool:
        return not (self.match or self.trigram or self.short_cjk)


def _quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def keyword_query(text: str) -> KeywordQuery:
    norm = normalise(text)
    found = list(dict.fromkeys(words(norm)))
    content = [w for w in found if w not in STOPWORDS] or found
    content = content[:MAX_QUERY_TERMS]
    trigrams: list[str] = []
    short: list[str] = []
    bigrams: list[str] = []
    runs = cjk_runs(norm)
    for run in runs:
        if len(run) >= 3:
            trigrams.extend(run[i : i + 3] for i in range(len(run) - 2))
            bigrams.extend(
                g
                for g in cjk_bigrams(run)
                if g not in CJK_STOP_BIGRAMS and not set(g) <= CJK_STOP_CHARS
            )
        elif len(run) == 2 or run not in CJK_STOP_CHARS:
            short.append(run)
    trigrams = list(dict.fromkeys(trigrams))[:MAX_TRIGRAMS]
    return KeywordQuery(
        match=" OR ".join(_quote(w) for w in content) or None,
        trigram=" OR ".join(_quote(g) for g in trigrams) or None,
        short_cjk=tuple(dict.fromkeys(short)),
        cjk_bigrams=tuple(dict.fromkeys(bigrams)),
        terms=tuple(content) + tuple(runs),
        words=tuple(content),
    )


def term_weights(
    text: str, total: int, freqs: dict[str, int]
) -> tuple[dict[str, float], list[str]]:
    """Each query term's BM25 idf (a word in many chunks says little; CJK characters weigh
    as much as an average word), and the content words no chunk contains."""
    unseen = [w for w, df in freqs.items() if df == 0 and w not in CHITCHAT]
    weights: dict[str, float] = {}
    for word, df in freqs.items():
        if word in CHITCHAT:
            continue
        idf = math.log(1 + (total - df + 0.5) / (df + 0.5))
        key = stem(word)
        weights[key] = max(weights.get(key, 0.0), idf)
    average = sum(weights.values()) / len(weights) if weights else 1.0
    for term in terms(text):
        weights.setdefault(term, average)
    return weights, unseen


def query_vector(
    embed: Callable[[list[str]], np.ndarray],
    text: str,
    unseen: list[str],
    weights: dict[str, float],
) -> np.ndarray | None:
    """The query's vector. Words that no chunk contains can only be found by meaning,
    while the words that do occur are already matched by the keyword side (and in a static
    model they pull the query toward every chunk that repeats them, e.g. a name): so the
    vector blends the whole query's embedding with that of its unseen words alone, each by
    its share of the query's weight. A failing model leaves the search keyword only."""
    try:
        vectors = embed([text, " ".join(unseen)] if unseen else [text])
    except Exception as exc:
        log.warning("memory search: embedding the query failed (%s); keyword only", exc)
        return None
    return _blend(vectors, unseen, weights)


async def query_vector_async(
    embedder: Embedder, text: str, unseen: list[str], weights: dict[str, float]
) -> np.ndarray | None:
    """`query_vector` with a model reached over the network."""
    try:
        vectors = await embedder.embed([text, " ".join(unseen)] if unseen else [text])
    except Exception as exc:
        log.warning("memory search: embedding the query failed (%s); keyword only", exc)
        return None
    return _blend(vectors, unseen, weights)


def _blend(vectors: np.ndarray, unseen: list[str], weights: dict[str, float]) -> np.ndarray:
    if not unseen:
        return vectors[0]
    total = sum(weights.values()) or 1.0
    share = sum(weights.get(stem(w), 0.0) for w in unseen) / total
    blend = (1.0 - share) * vectors[0] + share * vectors[1]
    norm = math.sqrt(float(blend @ blend))
    return blend / norm if norm else vectors[0]

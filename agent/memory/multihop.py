"""Two-hop retrieval: questions that name their subject only through another fact.

"Which city does the brother of Pepper's owner live in?" - no chunk holds both Pepper and
the brother: one says "Maya adopted a beagle named Pepper", another "Maya's brother lives
in Glasgow". The first search finds the first chunk (it holds the question's rarest word);
the answer shares with it a word the question never used (Maya, the bridge), and the two
together cover more of the question than any single chunk does.

So, when the best chunk leaves some of the question's words uncovered, search.py asks again
with those words plus the bridge words of the first hits, and pairs each first hit with each
chunk found that shares a bridge word with it (best_pair). A pair counts only if it covers
strictly more of the question (by idf weight, over the words memory contains) than any one
chunk does, and if the two cover different words of it: two chunks that both hold one of
the question's words (its name, say) are two partial answers about what the question
names, not a chain through something it does not name. Of a pair, the bridge is the chunk holding the question's rarest
covered word (the name the question gives); the other one answers, and goes first. The
pair's evidence is one no single chunk has, so it goes above chunks ranked by fusion.py
(whose "never below a chunk with better evidence on every side" orders single chunks).

`Hop.find` runs the second search through the index and the keyword search search.py
hands it; the rest are pure functions over texts and weights.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from clawgate.agent.memory import fusion
from clawgate.agent.memory.coverage import chunk_terms, line_terms
from clawgate.agent.memory.fusion import Candidate
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.index_db import ChunkRow
from clawgate.agent.memory.tokens import (
    CJK_RUN,
    CJK_STOP_CHARS,
    STOPWORDS,
    cjk_bigrams,
    cjk_runs,
    normalise,
    stem,
    words,
)

# First hits tried as bridges (of the ranked order and of the first stage's), and bridge
# words taken from each.
BRIDGES = 3
BRIDGE_WORDS = 6
# A link must be in at most half of the chunks (idf >= ln 2): a word in most of
# them (the chat tag every log line carries, the owner's own name) links everything.
MIN_LINK_IDF = math.log(2)


@dataclass(frozen=True)
class Pair:
    answer: int  # chunk id: the chunk holding what the question asks
    bridge: int  # chunk id: the chunk naming what the question names
    coverage: float  # weighted share of the question the two cover together
    link: float  # idf of the rarest bridge word they share


@lru_cache(maxsize=8192)
def link_terms(text: str) -> frozenset[str]:
    """What may link two chunks: names - capitalised words (stemmed, stop words and numbers
    aside: dates, times and chat ids are not entities) and CJK bigrams free of common
    function characters. Names are what a chain goes through (a person, a pet, a company),
    and keeping to them keeps the second hop's look-ups few."""
    found = {
        stem(w.lower())
        for w in words(unicodedata.normalize("NFKC", text))
        if w[0].isupper() and w.lower() not in STOPWORDS and not w.isdigit()
    }
    for run in cjk_runs(normalise(text)):
        found.update(g for g in cjk_bigrams(run) if not set(g) & CJK_STOP_CHARS)
    return frozenset(found)


def _foreign(term: str, query: frozenset[str]) -> bool:
    """A linking word the question does not use (a CJK bigram: none of its characters)."""
    if term in query:
        return False
    return not (CJK_RUN.fullmatch(term) and set(term) & query)


def covered(weights: Mapping[str, float], found: frozenset[str]) -> float:
    """The share of the question's words (by weight) in a set of terms."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(w for term, w in weights.items() if term in found) / total


def bridge_words(
    links: frozenset[str], query: frozenset[str], idf: Mapping[str, float]
) -> list[str]:
    """A first hit's linking words the question does not use, rarest first (a CJK bigram has
    no idf here and counts as rare: names are what such bigrams usually are)."""
    top = max(idf.values(), default=1.0)
    foreign = [t for t in links if _foreign(t, query) and idf.get(t, top) >= MIN_LINK_IDF]
    foreign.sort(key=lambda t: (-idf.get(t, top), t))
    return foreign[:BRIDGE_WORDS]


@dataclass(frozen=True)
class Text:
    """A line of a chunk as this module sees it: the terms coverage counts, its links."""

    id: int
    terms: frozenset[str]
    links: frozenset[str]


def best_pair(
    bridges: list[Text],
    found: list[Text],
    weights: Mapping[str, float],
    idf: Mapping[str, float],
    single: float,
    evidence: Mapping[int, float],
) -> Pair | None:
    """The pair (a line of a first hit, a line of another chunk sharing a linking word with
    it that the question does not use) covering the most of the question, if that is more
    than `single`, the most any one chunk covers; ties go to the rarer link, then to the
    answer with more keyword `evidence` in the second search. Lines, not
    chunks: a day's log holds many people's news, and the link must sit in the sentence
    that matched."""
    query = frozenset(weights)
    top_idf = max(idf.values(), default=1.0)
    best: Pair | None = None
    best_rank = (0.0, 0.0, 0.0)
    for b in bridges:
        links = frozenset(
            t for t in b.links if _foreign(t, query) and idf.get(t, top_idf) >= MIN_LINK_IDF
        )
        for a in found:
            shared = links & a.links
            if a.id == b.id or not shared or a.terms & b.terms & query:
                continue
            together = covered(weights, b.terms | a.terms)
            if together <= single + 1e-9:
                continue
            link = max(idf.get(t, top_idf) for t in shared)
            answer, bridge = _roles(a, b, weights)
            pair = Pair(answer, bridge, together, link)
            rank = (pair.coverage, pair.link, evidence.get(pair.answer, 0.0))
            if best is None or rank > best_rank:
                best, best_rank = pair, rank
    return best


def _roles(a: Text, b: Text, weights: Mapping[str, float]) -> tuple[int, int]:
    """(answer, bridge): the bridge holds the question's rarest word that only one of the two
    holds - the name by which the question reaches the answer."""
    only = [(w, t in a.terms) for t, w in weights.items() if (t in a.terms) != (t in b.terms)]
    if not only:
        return a.id, b.id
    _, in_a = max(only)
    return (b.id, a.id) if in_a else (a.id, b.id)


class Hop:
    """The second hop of one search: the index (document frequencies, rows) and the search's
    keyword search for chunks holding one of the missing words and one of the linking words
    ((missing, links) -> {chunk id: 0..1}). Terms are counted as coverage.py counts them."""

    def __init__(
        self, index: MemoryIndex, keyword: Callable[[str, str], Awaitable[dict[int, float]]]
    ) -> None:
        self.index = index
        self.keyword = keyword

    async def find(
        self,
        text: str,
        ranked: list[int],
        rows: dict[int, ChunkRow],
        seen: dict[str, float],
        window: tuple[str, str] | None,
        stage: Sequence[int] = (),
    ) -> Pair | None:
        """A first hit and a chunk linked to it that answer together what none answers
        alone; rows found on the way are added to `rows`. `seen`: the question's terms that
        memory contains, by weight. Only when the best hit leaves one of them uncovered.
        `stage`: the first stage's order, whose first hits are tried as bridges too: the
        reranker's lead prefers lines that answer, and for a question that names its
        subject only through another fact those are the same fact of other people, while
        the chunk naming what the question names leads the first stage."""
        if len(seen) < 2 or not ranked:
            return None
        missing = set(seen) - chunk_terms(rows[ranked[0]].text, rows[ranked[0]].lines)
        if not missing:
            return None
        query = frozenset(seen)
        first = [rows[c] for c in dict.fromkeys([*ranked[:BRIDGES], *stage[:BRIDGES]])]
        links = {r.id: link_terms(r.text) for r in first}
        if not any(links.values()):
            return None
        total, freqs = await self.index.doc_freqs(sorted(set().union(*links.values())))
        idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in freqs.items() if n}
        norm = normalise(text)
        asked = [w for w in words(norm) if stem(w) in missing]
        asked += [run for run in cjk_runs(norm) if set(run) & missing]
        via = [w for r in first for w in bridge_words(links[r.id], query, idf)]
        if not via:
            return None  # no name in the first hits that the question does not use
        scores = await self.keyword(" ".join(asked), " ".join(via))
        hits = set(scores)
        for chunk_id, row in (await self.index.chunks(hits - set(rows))).items():
            if window is None or (row.date and window[0] <= row.date <= window[1]):
                rows[chunk_id] = row
        found = (hits | set(ranked)) & set(rows)
        single = max(covered(seen, chunk_terms(rows[c].text, rows[c].lines)) for c in found)
        second = [t for c in sorted(found) for t in self._lines(rows[c])]
        bridges = [t for r in first for t in self._lines(r)]
        return best_pair(bridges, second, seen, idf, single, scores)

    def _lines(self, row: ChunkRow) -> list[Text]:
        held = map(frozenset, line_terms(row.text, row.lines))
        return [
            Text(row.id, terms, link_terms(line))
            for line, terms in zip(row.text.splitlines(), held, strict=True)
            if line.strip()
        ]


def lead_with(
    pair: Pair,
    ranked: list[Candidate],
    rows: Mapping[int, ChunkRow],
    today: date,
    half_life: float,
) -> list[Candidate]:
    """The pair's answer first and its bridge second, both at the top relevance (together
    they hold more of the question than any one chunk), then the rest in their order."""
    by_id = {c.id: c for c in ranked}
    relevance, key = ranked[0].relevance, ranked[0].key
    lead = []
    for rank, chunk_id in enumerate((pair.answer, pair.bridge)):
        row = rows[chunk_id]
        cand = by_id.get(chunk_id) or Candidate(
            id=chunk_id,
            recency=fusion.recency(row.date, today, half_life),
        )
        cand.relevance = relevance
        cand.key = key + 2e-6 - rank * 1e-6
        lead.append(cand)
    return lead + [c for c in ranked if c.id not in (pair.answer, pair.bridge)]

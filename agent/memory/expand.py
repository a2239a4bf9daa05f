"""Query expansion from the memory's own vocabulary: words that share lines with a query
word in the memory itself, used only to break near-ties of the first stage.

A question asks "Who is Maya's dentist now?" and a daily log holds both the answer ("I
switched dentists, it's Dr Haddad at the Elm Street practice now") and a hundred lines of
small talk with the same two words ("need to call the dentist about a bill"). Every one of
them covers the question alike, so which reach the reranker's 30 is decided by BM25's
length norm. The words that go with "dentist" in this memory (practice, switched, Dr, the
practices' names) tell the answer apart: a chunk holding more of them (by idf, rare ones
count more) gets up to EXPAND_TIE more relevance, less than any real difference in how
much of the question it holds.

The table: per line (a speaker's "Name: " prefix left out: who spoke is not what was
said), the stemmed content words; pairs counted; a word's associates are the PER_TERM words
with the highest pointwise mutual information that share at least MIN_PAIR lines with it.
Latin-script words only (a CJK character's neighbours are its own word's characters).
Built from the index's chunk texts in a worker thread; rebuilt in the background when the
number of chunks changes (a table a few lines behind the memory still points the right
way), and not at all above MAX_CHUNKS (its pairs would outgrow the memory it saves).

An associate's weight is its strength (PMI, as a share of the most a word can have with
that query word) x the query word's own weight share (so "go", and the "pay as you go" it
brings, counts little) x the associate's idf. No expansion for a question with a word the
memory never uses: it is a paraphrase, which only the vector side can find, and the
associates of its other words (the person's name) pulled the wrong chunks up; nor for a
question that names a date, whose day is its evidence (bench/recall_dialogue/RESULTS.md,
round 4).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from clawgate.agent.memory.coverage import CHITCHAT, Cover
from clawgate.agent.memory.index_db import ChunkRow
from clawgate.agent.memory.tokens import STOPWORDS, normalise, stem, words

EXPAND_TIE = 0.1  # at most this much relevance (of 1) from the associates
PER_TERM = 16
MIN_PAIR = 3
MIN_PMI = 1.0
MAX_CHUNKS = 20_000
WINDOW = 8
SPEAKER_CHARS = 24  # a "Name: " prefix longer than this is text, not a speaker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Associations:
    """Line co-occurrence counts of a memory's content words."""

    lines: int
    df: Mapping[str, int]
    pairs: Mapping[str, Counter[str]]

    @classmethod
    def build(cls, texts: Iterable[str]) -> Associations:
        df: Counter[str] = Counter()
        pairs: dict[str, Counter[str]] = defaultdict(Counter)
        n = 0
        for text in texts:
            for line in text.splitlines():
                speaker, sep, said = line.partition(": ")
                body = said if sep and len(speaker) <= SPEAKER_CHARS else line
                found = _line_terms(body)
                if not found:
                    continue
                n += 1
                df.update(found)
                for i, a in enumerate(found):
                    # Neighbours within WINDOW words: a long line is several statements.
                    near = found[max(0, i - WINDOW) : i] + found[i + 1 : i + 1 + WINDOW]
                    pairs[a].update(near)
        return cls(n, dict(df), dict(pairs))

    def expand(self, query: Mapping[str, float]) -> dict[str, float]:
        """The associates of the query's words (stemmed, with their weights), each with a
        strength 0..1: its PMI over the highest PMI a word could have with that query word,
        times that word's weight over the query's heaviest (so "go" of "pay as you go"
        counts less than "concert")."""
        stems = set(query)
        heaviest = max(query.values(), default=0.0)
        out: dict[str, float] = {}
        for q in stems:
            nq = self.df.get(q, 0)
            if not nq or heaviest <= 0:
                continue
            share = query[q] / heaviest
            scored = []
            for e, n in self.pairs.get(q, Counter()).items():
                if n >= MIN_PAIR and e not in stems:
                    pmi = math.log(n * self.lines / (nq * self.df[e]))
                    if pmi >= MIN_PMI:
                        scored.append((pmi, e))
            scored.sort(reverse=True)
            top = math.log(self.lines / nq) or 1.0
            for pmi, e in scored[:PER_TERM]:
                out[e] = max(out.get(e, 0.0), share * min(pmi / top, 1.0))
        return out

    def weights(self, query: Mapping[str, float]) -> dict[str, float]:
        """Each associate's weight: its strength x its idf over the memory's lines."""
        return {
            e: strength * math.log(1 + (self.lines - self.df[e] + 0.5) / (self.df[e] + 0.5))
            for e, strength in self.expand(query).items()
        }


def tie_breaks(weights: Mapping[str, float], rows: Mapping[int, ChunkRow]) -> dict[int, float]:
    """Each chunk's extra relevance: EXPAND_TIE x its coverage of the associates, counted as
    coverage.Cover counts the question's words (the whole chunk and its best line; from
    the lines' terms the index keeps, where it does)."""
    if sum(weights.values()) <= 0:
        return {}
    associates = Cover(dict(weights))
    return {c: EXPAND_TIE * associates.entry(r.text, r.lines) for c, r in rows.items()}


def _line_terms(text: str) -> list[str]:
    """A line's content words, stemmed, each once, in order: Latin letters only (numbers
    are times, dates and counts, which go with everything)."""
    found = (stem(w) for w in words(normalise(text)) if w not in STOPWORDS and w not in CHITCHAT)
    return list(dict.fromkeys(w for w in found if w.isascii() and w.isalpha()))


class Companions:
    """A memory's Associations: built (and awaited) when there is none, rebuilt in the
    background when the index's chunk count moves; none above MAX_CHUNKS. `version` counts
    the tables built, so a kept search result can name the one it used."""

    def __init__(self) -> None:
        self._table: Associations | None = None
        self.version = 0
        self._built_for = -1
        self._building: asyncio.Task[None] | None = None

    async def get(
        self, chunks: int, read_texts: Callable[[], Awaitable[list[str]]]
    ) -> Associations | None:
        if not 0 < chunks <= MAX_CHUNKS:
            return None
        if chunks != self._built_for and (self._building is None or self._building.done()):
            self._built_for = chunks
            self._building = asyncio.ensure_future(self._build(read_texts))
        if self._table is None and self._building is not None:
            await asyncio.shield(self._building)
        return self._table

    async def ties(
        self,
        query: Mapping[str, float],
        unseen: list[str],
        memory: tuple[int, Callable[[], Awaitable[list[str]]]],
        rows: Mapping[int, ChunkRow],
    ) -> dict[int, float]:
        """Extra relevance by chunk from the words that go with the question's in this
        memory (`memory`: its chunk count and how to read its texts); none for a question
        with a word the memory never uses (`unseen`)."""
        table = await self.get(*memory)
        if table is None or unseen:
            return {}
        return tie_breaks(table.weights(query), rows)

    async def close(self) -> None:
        """Stop a build still running (its thread finishes on its own)."""
        if self._building is not None and not self._building.done():
            self._building.cancel()
            try:
                await self._building
            except asyncio.CancelledError:
                pass

    async def _build(self, read_texts: Callable[[], Awaitable[list[str]]]) -> None:
        try:
            self._table = await asyncio.to_thread(Associations.build, await read_texts())
            self.version += 1
        except Exception as exc:  # a hint, never a reason for a search to fail
            log.warning("memory search: the companions table was not built (%s)", exc)

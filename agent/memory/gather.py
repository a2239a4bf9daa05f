"""A search's candidates as read from the index: each keyword side's best chunks and the
nearest vectors, with the rows they name, in one visit of the index's worker thread.

A list that stops at its limit records the value it stopped at (`Gathered.cut`): among
many chunks that hold the question's words alike, the limit decides which ones a list
keeps, and fusion.keyword_evidence gives the ones it left out that value rather than none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clawgate.agent.memory import fusion
from clawgate.agent.memory.index_db import ChunkRow, Reader
from clawgate.agent.memory.query import KeywordQuery
from clawgate.agent.memory.vectors import VectorMatrix

if TYPE_CHECKING:
    import numpy as np

SIDES = ("chunks_fts", "chunks_tri", "cjk")  # the keyword sides: words, trigrams, substrings
# The words table's rows for (words, limit, days) from memory (bm25.py), None: ask FTS5.
WordsInMemory = Callable[
    [Sequence[str], int, tuple[str, str] | None], list[tuple[int, float]] | None
]
MAX_NEEDLES = 24  # CJK words and bigrams looked for by substring


@dataclass
class Gathered:
    """Every candidate of a search, with what the index said of it."""

    # Raw keyword evidence by side, and the ids among a side's first `pool`.
    raw: dict[str, dict[int, float]] = field(default_factory=lambda: {s: {} for s in SIDES})
    first: dict[str, set[int]] = field(default_factory=lambda: {s: set() for s in SIDES})
    # By side, the last raw value of a list that stopped at the wide limit (`cut_first`: the
    # last of its first `pool`, if it ran past them).
    cut: dict[str, float] = field(default_factory=dict)
    cut_first: dict[str, float] = field(default_factory=dict)
    cosines: dict[int, float] = field(default_factory=dict)
    rows: dict[int, ChunkRow] = field(default_factory=dict)


def gather_candidates(
    reader: Reader,
    vectors: VectorMatrix,
    plan: KeywordQuery,
    query_vector: np.ndarray | None,
    limits: tuple[int, int],
    days: tuple[tuple[str, str] | None, tuple[str, str] | None],
    in_memory: WordsInMemory | None = None,
) -> Gathered:
    """Every candidate: `limits` (wide, pool) a side; `days` (window, dated): the window
    every candidate must be in, and the days a question names, which add as many again;
    `in_memory`: the words table's BM25 without the statement, where it can."""
    window, dated = days
    found = Gathered()
    _candidates(reader, vectors, plan, query_vector, limits, window, found, in_memory)
    if dated is not None:
        _candidates(reader, vectors, plan, query_vector, limits, dated, found, in_memory)
    ids = set(found.cosines).union(*found.raw.values())
    if dated is not None and not ids:
        # Only the date matched: the chunks of those days, newest first below.
        ids = set(reader.dated_between(*dated)[: limits[0] * 2])
    if query_vector is not None:
        missing = ids - set(found.cosines)
        found.cosines.update(vectors.scores_for(query_vector, missing))
    found.rows = reader.chunks(ids)
    return found


def _candidates(
    reader: Reader,
    vectors: VectorMatrix,
    plan: KeywordQuery,
    query_vector: np.ndarray | None,
    limits: tuple[int, int],
    days: tuple[str, str] | None,
    into: Gathered,
    in_memory: WordsInMemory | None,
) -> None:
    """Keyword and vector candidates (within `days` if given), gathered into `into`."""
    limit = limits[0]
    keyword_candidates(reader, plan, limit, days, into.raw, (limits[1], into), in_memory)
    if query_vector is None:
        return
    if days is None:
        into.cosines.update(vectors.top(query_vector, limit))
        return
    scores = vectors.scores_for(query_vector, reader.dated_between(*days))
    into.cosines.update(sorted(scores.items(), key=lambda item: -item[1])[:limit])


def keyword_candidates(
    reader: Reader,
    plan: KeywordQuery,
    limit: int,
    days: tuple[str, str] | None,
    raw: dict[str, dict[int, float]],
    first: tuple[int, Gathered | None] = (0, None),
    in_memory: WordsInMemory | None = None,
) -> None:
    """Keyword candidates by side into `raw`; with `first` (narrow, gathered), the ids
    among a side's first `narrow` into `gathered.first`, and where a side's list stopped at
    `limit` or ran past `narrow`, the value it stopped at into `gathered.cut`/`cut_first`."""
    narrow, into = first
    lists: list[tuple[str, list[tuple[int, float]]]] = []
    if plan.match:
        words = in_memory(plan.words, limit, days) if in_memory is not None else None
        if words is None:
            words = reader.fts("chunks_fts", plan.match, limit, days)
        lists.append(("chunks_fts", words))
    if plan.trigram:
        lists.append(("chunks_tri", reader.fts("chunks_tri", plan.trigram, limit, days)))
    needles = list(dict.fromkeys([*plan.short_cjk, *plan.cjk_bigrams]))[:MAX_NEEDLES]
    if needles:
        scored = []
        for chunk_id, cjk in reader.like_cjk(needles, limit * 4):
            share = sum(1 for n in needles if n in cjk) / len(needles)
            scored.append((chunk_id, fusion.SUBSTRING_SCORE * share**0.5))
        lists.append(("cjk", sorted(scored, key=lambda s: (-s[1], -s[0]))[:limit]))
    for side, found in lists:
        for chunk_id, x in found:
            raw[side][chunk_id] = max(raw[side].get(chunk_id, x), x)
        if into is None:
            continue
        into.first[side].update(chunk_id for chunk_id, _ in found[:narrow])
        if len(found) >= limit:
            into.cut[side] = max(into.cut.get(side, 0.0), found[-1][1])
        if len(found) > narrow:
            into.cut_first[side] = max(into.cut_first.get(side, 0.0), found[narrow - 1][1])

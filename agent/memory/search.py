"""Hybrid memory search: FTS5 BM25, vector cosine and dates in the question, fused on a
per-query scale (see fusion.py), recency as a bounded tie-breaker, MMR re-ranked.

For a query:
1. Refresh the index (a stat per memory file when nothing changed). Steps 1 to 5 run in one
   visit of the index's worker thread (`MemoryIndex.read_fresh`); a remote embedding model
   is called between two visits instead, so the HTTP call never holds the thread.
2. Dates it names ("on March 16", "last week", "上周", "去年十月"; dates.py) are taken out of
   its words and kept as a range of days.
3. Keyword candidates (max_results x candidate_multiplier): BM25 over the porter/unicode61
   table for words; for CJK runs of 3+ characters, BM25 over the trigram table of their
   trigrams; 1-2 character CJK words (which no trigram can hold) and the bigrams of longer
   runs (Chinese has no spaces, so a two-character word inside a long query is otherwise
   lost) through a substring scan (instr) of the chunks' CJK text.
4. Vector candidates, as many: exact cosine over the in-memory matrix. The query's vector
   leans toward its words that no chunk contains (by their share of its idf weight): only
   meaning can find those, while the words memory does use are the keyword side's job.
5. With a date in the question, as many candidates again from the chunks dated within it
   (daily logs, dated notes, HISTORY.md entries), by the same two sides; `since`/`until`
   instead restrict every candidate to the chunks dated within them.
6. Fusion (fusion.py): each side on the query's own 0..1 scale, weighted, plus the date
   match; ordered by relevance, recency breaking near-ties only (none when the question
   names a date: it has said which time it wants). Near-ties are also broken by the words
   that go with the question's in this memory (expand.py: up to 0.1 of relevance, none
   with a date in the question or a word the memory never uses); score = relevance / the
   best relevance x the query's confidence (how much of it the best candidate covers).
   The keyword side counts how much of the question a chunk holds (coverage.py: by idf,
   the chunk's share averaged with its best line's, as a day's log is many entries),
   times its BM25; a chunk that holds a word of the question but that a side's list
   stopped before (gather.py) counts that list's last BM25, not none.
   Second hop (multihop.py): if the best chunk misses a word of the question, a chunk
   reached through a name in the first hits that, with it, covers more of the question
   than any one chunk goes first, its bridge second.
   Then the second stage (rerank.py): of the first 30 (gathered from 60 a side) a fitted
   linear model that adds line-level evidence picks the first 3; the rest keep the order
   of relevance as a gather of `pool` a side would give it (BM25 only from a side's first
   `pool`). No recency within the 30. The second hop runs on that order, trying the
   first stage's first hits as bridges too.
7. min_score cut-off, then MMR (near-duplicates pushed down), and chunks of one file that
   touch or overlap are merged into one result.

A result is kept (results.py) for the index's state, the arguments and the day: the same
search again, the index unchanged, returns it from the visit of step 1. With a score floor
and no date asked, a question none of whose words a chunk holds (vocabulary.py) ends in
that visit too: its confidence would be 0.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime
from functools import partial
from typing import TYPE_CHECKING, NamedTuple
from zoneinfo import ZoneInfo

from clawgate.agent.memory import fusion, multihop
from clawgate.agent.memory.coverage import Cover, coverage, terms
from clawgate.agent.memory.dates import DateRange, query_range, strip_dates
from clawgate.agent.memory.embeddings import LocalEmbedder
from clawgate.agent.memory.expand import Companions
from clawgate.agent.memory.fusion import Candidate
from clawgate.agent.memory.gather import SIDES, Gathered, gather_candidates, keyword_candidates
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.index_db import ChunkRow, Reader
from clawgate.agent.memory.query import (
    keyword_query,
    query_vector,
    query_vector_async,
    term_weights,
)
from clawgate.agent.memory.rerank import Reranker
from clawgate.agent.memory.results import Results
from clawgate.agent.memory.tokens import (
    normalise,
    stem,
    token_set,
)
from clawgate.kernel.config import MemorySearchConfig

if TYPE_CHECKING:
    import numpy as np

    from clawgate.agent.memory.transcripts import TranscriptIndex

log = logging.getLogger(__name__)

# (vector, text): a litellm embedding model (semantic); the hashed embedder (chosen on
# bench/recall_eval.py --pooled). The packaged static model carries its own.
SEMANTIC_WEIGHTS = (0.7, 0.3)
BUILTIN_WEIGHTS = (0.2, 0.8)
# A date match weighs this much, as a share of the vector and text weights together.
DATE_WEIGHT = 0.5
RECENCY_WEIGHT = fusion.RECENCY_WEIGHT
# With a date in the question and nothing but the date matching, confidence is this.
DATE_CONFIDENCE = 0.5
SNIPPET_CHARS = 300


@dataclass(frozen=True)
class SearchHit:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    date: str | None = None
    # How the fusion weighed it (keyword t, vector v, date d, recency parts), for the
    # dashboard's "why"; not part of the JSON `memory search` prints.
    why: Candidate | None = field(default=None, compare=False, repr=False)

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        data.pop("why")
        data["score"] = round(self.score, 4)
        return data


def snippet(text: str, terms: tuple[str, ...], limit: int = SNIPPET_CHARS) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    lower = normalise(flat)
    positions = [p for t in terms if t and (p := lower.find(t)) >= 0]
    start = 0
    if positions:
        start = max(0, min(positions) - limit // 4)
    start = min(start, len(flat) - limit)
    piece = flat[start : start + limit].strip()
    return ("…" if start > 0 else "") + piece + ("…" if start + limit < len(flat) else "")


def resolve_weights(config: MemorySearchConfig, embedder: object | None) -> tuple[float, float]:
    """(vector, text) weights, summing to 1; no embedder means keyword only. An embedder may
    carry its own measured `default_weights`; else semantic models get SEMANTIC_WEIGHTS."""
    if embedder is None:
        return 0.0, 1.0
    semantic = getattr(embedder, "semantic", False)
    default_v, default_t = getattr(
        embedder, "default_weights", SEMANTIC_WEIGHTS if semantic else BUILTIN_WEIGHTS
    )
    v = config.vector_weight if config.vector_weight is not None else default_v
    t = config.text_weight if config.text_weight is not None else default_t
    if v + t <= 0:
        v, t = default_v, default_t
    return v / (v + t), t / (v + t)


class MemorySearch:
    """Search over one MemoryIndex with the `[memory.search]` knobs."""

    def __init__(
        self,
        index: MemoryIndex,
        config: MemorySearchConfig,
        *,
        timezone: str = "UTC",
        today: Callable[[], date] | None = None,
        reranker: Reranker | None = None,
        transcripts: TranscriptIndex | None = None,
        expand: bool = True,
    ) -> None:
        self.index = index
        # The memory's own word associations, for near-ties (expand.py); off in benches
        # that measure the ranking without them.
        self._companions = Companions() if expand else None
        self.reranker = reranker or Reranker()
        # Past conversations, searched only when asked (`sessions`), by the owner only.
        self.transcripts = transcripts
        self.config = config
        zone = ZoneInfo(timezone)
        self._today = today or (lambda: datetime.now(UTC).astimezone(zone).date())
        embedder = index.embedder
        self.weights = resolve_weights(config, embedder)
        # A local model embeds the query in the index's thread (see search).
        self._local = embedder if isinstance(embedder, LocalEmbedder) else None
        self._results: Results[list[SearchHit]] = Results()
        self._reading_bm25: asyncio.Task[None] | None = None

    def today(self) -> date:
        """The owner's local date: what relative dates in a question count from."""
        return self._today()

    async def close(self) -> None:
        if self._reading_bm25 is not None:
            self._reading_bm25.cancel()
            await asyncio.gather(self._reading_bm25, return_exceptions=True)
        if self._companions is not None:
            await self._companions.close()
        await self.index.close()
        if self.transcripts is not None:
            await self.transcripts.close()

    async def search(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        *,
        since: date | None = None,
        until: date | None = None,
    ) -> list[SearchHit]:
        """The best chunks for `query`; `since`/`until` keep only chunks dated within them."""
        if not query.strip():
            return []
        k = max_results or self.config.max_results
        pool = k * self.config.candidate_multiplier
        # The reranker orders `depth` candidates, gathered from twice as many per side.
        kept = max(pool, self.reranker.depth)
        wide = max(pool, 2 * self.reranker.depth)
        floor = self.config.min_score if min_score is None else min_score
        today = self._today()
        asked = query_range(query, today)
        text = strip_dates(query, today) if asked else query
        plan = keyword_query(text)
        window = None
        if since is not None or until is not None:
            window = ((since or date.min).isoformat(), (until or date.max).isoformat())
        dated = _within(asked, window) if asked else None
        embedder, local = self.index.embedder, self._local
        query_text = text if text.strip() else query
        key = (query, k, floor, since, until, today)
        asking = terms(text)

        def visit(reader: Reader, total: int, freqs: dict[str, int]) -> _Visit:
            state = self.index.state()
            kept = self._results.get(self._kept_under(state), key)
            if kept is not None:
                return _Visit({}, [], None, 0, kept=kept)
            if state is not None and floor > 0 and not asked and asking:
                if self.index.vocabulary.holds_none(asking):
                    # No chunk holds a word of it: every hit's confidence, so its score, is
                    # 0 (vocabulary.py), below the floor; the search would find nothing.
                    return _Visit({}, [], None, 0, kept=[])
            weights, unseen = term_weights(text, total, freqs)
            vector = None
            if embedder is not None and len(self.index.vectors):
                if local is None:
                    return _Visit(weights, unseen, None, total)  # a remote model: on the loop
                vector = query_vector(local.embed_sync, query_text, unseen, weights)
            gathered = gather(reader, vector)
            return _Visit(weights, unseen, vector, total, gathered, state=state)

        def gather(reader: Reader, vector: np.ndarray | None) -> Gathered:
            in_memory = partial(self.index.bm25.best, self.index.words_state())
            found = gather_candidates(
                reader, self.index.vectors, plan, vector, (wide, pool), (window, dated), in_memory
            )
            found.rows = self.index.vocabulary.with_lines(found.rows)
            return found

        # One visit of the index's thread: freshness, word counts, the query's vector (a
        # local model) and every candidate read. A remote model's embedding is an HTTP call
        # that must not hold the thread, so it is awaited between two visits instead.
        visited = await self.index.read_fresh(list(plan.words), visit)
        if self.index.bm25.stale(self.index.words_state()):
            self._read_bm25()  # this search asked FTS5; the next ones need not
        if visited.kept is not None:
            return list(visited.kept)
        weights_by_term, unseen, query_vec, total, gathered = visited[:5]
        if gathered is None:
            assert embedder is not None
            query_vec = await query_vector_async(embedder, query_text, unseen, weights_by_term)
            gathered = await self.index.read(lambda r: gather(r, query_vec))
        raw, first, cosines, rows = gathered.raw, gathered.first, gathered.cosines, gathered.rows
        if window is not None:
            rows = {c: r for c, r in rows.items() if r.date and window[0] <= r.date <= window[1]}
        if not rows:
            return []
        counted = Cover(weights_by_term)
        cover = {c: counted.entry(r.text, r.lines) for c, r in rows.items()}
        holding = [c for c, x in cover.items() if x > 0]
        bm25 = fusion.keyword_evidence(raw, cut=gathered.cut, holding=holding)
        narrow = fusion.keyword_evidence(raw, first, cut=gathered.cut_first, holding=holding)
        keyword = {c: x * (0.5 + 0.5 * bm25.get(c, 0.0)) for c, x in cover.items()}
        mean = self.index.vectors.mean(query_vec) if query_vec is not None else 0.0
        vector = fusion.normalise_vector(cosines, mean)
        w_v, w_t = self.weights
        weights = (w_t, w_v, DATE_WEIGHT * (w_t + w_v) if asked else 0.0)
        cands = []
        for chunk_id, row in rows.items():
            on_day = dated is not None and row.date is not None and dated[0] <= row.date <= dated[1]
            cands.append(
                Candidate(
                    id=chunk_id,
                    t=keyword.get(chunk_id, 0.0),
                    v=vector.get(chunk_id, 0.0),
                    d=1.0 if on_day else 0.0,
                    recency=fusion.recency(row.date, today, self.config.half_life_days),
                )
            )
        fusion.weigh(cands, weights)
        # A question that names a date has said which time it wants (as for recency).
        ties: dict[int, float] = {}
        table = None  # a dated question's ties use no table: kept under the current one
        if self._companions is not None and not asked:
            ties = await self._companions.ties(weights_by_term, unseen, (total, self._texts), rows)
            table = self._companions.version  # the table just used: no await since
        for cand in cands:
            cand.relevance += ties.get(cand.id, 0.0)
        query_terms = terms(text)
        confidence = max(
            (coverage(query_terms, r.text, r.lines) for r in rows.values()), default=0.0
        )
        if any(c.d for c in cands):
            confidence = max(confidence, DATE_CONFIDENCE)
        recency_weight = 0.0 if asked else RECENCY_WEIGHT
        ranked = fusion.order(cands, weights, recency_weight)[:kept]
        # Below the reranker's lead, the first stage's order as a gather of `pool` a side
        # would have it: BM25 from further down a side is noise the wide gather lets in.
        first_stage = {
            c.id: fusion.relevance(
                cover[c.id] * (0.5 + 0.5 * narrow.get(c.id, 0.0)), c.v, c.d, weights
            )
            + ties.get(c.id, 0.0)
            for c in ranked
        }
        ranked = self.reranker.order(ranked, rows, counted, recency_weight, first_stage)
        seen = {t: w for t, w in weights_by_term.items() if t not in {stem(u) for u in unseen}}
        hop = multihop.Hop(self.index, lambda m, b: self._keyword_ids(m, b, pool, window))
        stage = sorted(first_stage, key=lambda c: -first_stage[c])
        pair = await hop.find(text, [c.id for c in ranked], rows, seen, window, stage)
        if pair is not None:
            ranked = multihop.lead_with(pair, ranked, rows, today, self.config.half_life_days)
            both = terms(rows[pair.answer].text) | terms(rows[pair.bridge].text)
            confidence = max(confidence, len(query_terms & both) / len(query_terms))
        best = max((cand.relevance for cand in ranked), default=0.0) or 1.0
        for cand in ranked:
            cand.score = cand.relevance / best * confidence
        ranked = [c for c in ranked if c.score >= floor and c.relevance > 0]
        for cand in ranked:  # what MMR compares: only the candidates that passed the floor
            cand.tokens = token_set(rows[cand.id].text)
        chosen = fusion.mmr(ranked, self.config.mmr_lambda)
        hits = _merge(chosen, ranked, rows, plan.terms, k)
        if visited.state == self.index.state():  # nothing changed while it ran
            self._results.put(self._kept_under(visited.state, table), key, list(hits))
        return hits

    def _read_bm25(self) -> None:
        """Have the words table's BM25 read into memory in the background (bm25.py)."""
        if self._reading_bm25 is None or self._reading_bm25.done():
            warm = self.index.bm25.warm(self.index.words_state)
            self._reading_bm25 = asyncio.create_task(warm)

    def _kept_under(self, state: Hashable | None, table: int | None = None) -> Hashable | None:
        """What a kept result depends on: the index's chunks and, since a companions table
        rebuilt in the background changes near-ties, which table it used (or none)."""
        if state is None:
            return None
        if table is None:
            table = self._companions.version if self._companions is not None else -1
        return state, table

    async def warm_companions(self) -> None:
        """Build the word associations now (warm.py), not in the first search."""
        if self._companions is not None:
            total = await self.index.read(lambda r: r.chunk_count())
            await self._companions.get(total, self._texts)

    async def _texts(self) -> list[str]:
        return await self.index.read(lambda r: r.texts())

    async def _keyword_ids(
        self, missing: str, links: str, limit: int, window: tuple[str, str] | None
    ) -> dict[int, float]:
        """The second hop's keyword search: chunks holding a word of `missing` and one of
        `links` (CJK: either, through the trigram and substring sides), with their keyword
        evidence on this search's 0..1 scale."""
        plan = keyword_query(f"{missing} {links}")
        need, via = keyword_query(missing).match, keyword_query(links).match
        if need and via:
            plan = replace(plan, match=f"({need}) AND ({via})")
        raw: dict[str, dict[int, float]] = {side: {} for side in SIDES}
        await self.index.read(lambda r: keyword_candidates(r, plan, limit, window, raw))
        return fusion.keyword_evidence(raw)


class _Visit(NamedTuple):
    """What a search's visit of the index thread brings back."""

    weights: dict[str, float]
    unseen: list[str]
    vector: np.ndarray | None
    total: int  # chunks in the index
    gathered: Gathered | None = None
    state: Hashable | None = None  # the index's, when it was read
    kept: list[SearchHit] | None = None  # the result of the same search in that state


def _within(asked: DateRange, window: tuple[str, str] | None) -> tuple[str, str] | None:
    first, last = asked.start.isoformat(), asked.end.isoformat()
    if window is not None:
        first, last = max(first, window[0]), min(last, window[1])
    return (first, last) if first <= last else None


def _merge(
    chosen: Iterator[Candidate],
    ranked: list[Candidate],
    rows: dict[int, ChunkRow],
    terms_: tuple[str, ...],
    k: int,
) -> list[SearchHit]:
    """The first k results MMR chose, listed by score (stable) so the printed scores descend;
    a chunk of the same file and date that touches an
    earlier result (or is a blank line away) joins it, the result then spanning both,
    instead of taking a place.

    MMR's picks are taken one at a time (`chosen` orders `ranked`). Once k results stand and
    no candidate left touches one of them, no later pick can change them (a result grows
    only by a touching chunk), so the rest are never picked."""
    merged: list[tuple[Candidate, int, int, list[ChunkRow]]] = []
    left = {c.id for c in ranked}
    for cand in chosen:
        left.discard(cand.id)
        row = rows[cand.id]
        for i, (head, start, end, parts) in enumerate(merged):
            first = parts[0]
            if first.path == row.path and first.date == row.date and _touching(row, start, end):
                parts.append(row)
                merged[i] = (head, min(start, row.start_line), max(end, row.end_line), parts)
                break
        else:
            if len(merged) < k:
                merged.append((cand, row.start_line, row.end_line, [row]))
        if len(merged) == k and not _may_grow(merged, [rows[c] for c in left]):
            break
    hits = []
    for head, start, end, parts in merged:
        best = parts[0]
        parts.sort(key=lambda r: r.start_line)
        text = "\n".join(r.text for r in parts)
        hits.append(
            SearchHit(
                path=best.path,
                start_line=start,
                end_line=end,
                score=head.score,
                snippet=snippet(text, terms_),
                date=best.date,
                why=head,
            )
        )
    hits.sort(key=lambda hit: -hit.score)
    return hits


def _may_grow(
    merged: list[tuple[Candidate, int, int, list[ChunkRow]]], left: list[ChunkRow]
) -> bool:
    """Whether a chunk left touches a result of the same file and date."""
    spans: dict[tuple[str, str | None], list[tuple[int, int]]] = {}
    for _, start, end, parts in merged:
        spans.setdefault((parts[0].path, parts[0].date), []).append((start, end))
    return any(
        _touching(row, start, end)
        for row in left
        for start, end in spans.get((row.path, row.date), ())
    )


def _touching(row: ChunkRow, start: int, end: int) -> bool:
    """The chunk overlaps lines start..end or is at most a blank line away."""
    return row.start_line <= end + 2 and start <= row.end_line + 2

"""Hybrid memory search: FTS5 BM25 and vector cosine merged, decayed by age, MMR re-ranked.

For a query:
1. Refresh the index (a stat per memory file when nothing changed).
2. Keyword candidates (max_results x candidate_multiplier): BM25 over the porter/unicode61
   table for words; for CJK runs of 3+ characters, BM25 over the trigram table of their
   trigrams; 1-2 character CJK words (which no trigram can hold) and the bigrams of longer
   runs (Chinese has no spaces, so a two-character word inside a long query is otherwise
   lost) through a substring scan (instr) of the chunks' CJK text.
   Text score t = x / (x + 4) for x = -bm25 (0 for no match, towards 1 for strong ones); a
   substring-only match scores 0.5 x the square root of the share of the query's short
   words and bigrams it contains.
3. Vector candidates, as many: exact cosine over the in-memory matrix (v = cosine, >= 0).
4. base = w_v·v + w_t·t (weights normalised to sum 1; 0.7/0.3 for a semantic model).
5. Recency: a chunk dated d days ago keeps a factor 0.8 + 0.2·0.5^(d / half_life_days) of
   its score; undated chunks (MEMORY.md) keep all of it. The floor means recency only
   reorders results within 20% of each other: an old result that matches clearly better
   (by more than a quarter) always stays ahead of a newer one.
6. min_score cut-off on the decayed score, then MMR (lambda 0.7, Jaccard similarity of the
   chunks' word/CJK-bigram sets) picks max_results, so near-duplicates do not fill the top.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import numpy as np

from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.index_rows import ChunkRow
from clawgate.agent.memory.tokens import (
    CJK_STOP_CHARS,
    STOPWORDS,
    cjk_bigrams,
    cjk_runs,
    normalise,
    token_set,
    words,
)
from clawgate.kernel.config import MemorySearchConfig

log = logging.getLogger(__name__)

SEMANTIC_WEIGHTS = (0.7, 0.3)  # (vector, text) with a semantic embedding model
# With the built-in hashed embedder; chosen from bench/recall_eval.py (see README).
BUILTIN_WEIGHTS = (0.4, 0.6)
BM25_HALF = 4.0
SUBSTRING_SCORE = 0.5
DECAY_FLOOR = 0.8
SNIPPET_CHARS = 300
MAX_QUERY_TERMS = 32
MAX_TRIGRAMS = 48
MAX_NEEDLES = 24
PARALLEL_SCAN_ROWS = 20_000  # below this a thread hop costs more than the scan
# Two-character sequences too common to mean anything on their own.
CJK_STOP_BIGRAMS = frozenset(
    "什么 时候 怎么 我们 你们 他们 这个 那个 哪里 没有 可以 现在 一个 了吗 的是 是不 不是 一下".split()
)


@dataclass(frozen=True)
class SearchHit:
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    date: str | None = None

    def as_json(self) -> dict[str, object]:
        data = asdict(self)
        data["score"] = round(self.score, 4)
        return data


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
    )


def bm25_score(x: float) -> float:
    return max(x, 0.0) / (max(x, 0.0) + BM25_HALF)


def decay_factor(chunk_date: str | None, today: date, half_life_days: float) -> float:
    if chunk_date is None:
        return 1.0
    try:
        age = (today - date.fromisoformat(chunk_date)).days
    except ValueError:
        return 1.0
    age = max(age, 0)
    return DECAY_FLOOR + (1.0 - DECAY_FLOOR) * 0.5 ** (age / half_life_days)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def mmr(candidates: list[tuple[float, frozenset[str]]], k: int, lam: float) -> list[int]:
    """Indexes into `candidates` (score, token set), best-first, in MMR order."""
    if not candidates:
        return []
    top = max(score for score, _ in candidates) or 1.0
    chosen: list[int] = []
    left = list(range(len(candidates)))
    while left and len(chosen) < k:
        best, best_value = left[0], -np.inf
        for i in left:
            overlap = max((jaccard(candidates[i][1], candidates[j][1]) for j in chosen), default=0)
            value = lam * candidates[i][0] / top - (1 - lam) * overlap
            if value > best_value:
                best, best_value = i, value
        chosen.append(best)
        left.remove(best)
    return chosen


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


def resolve_weights(config: MemorySearchConfig, semantic: bool | None) -> tuple[float, float]:
    """(vector, text) weights, summing to 1; semantic None means no embedder at all."""
    if semantic is None:
        return 0.0, 1.0
    default_v, default_t = SEMANTIC_WEIGHTS if semantic else BUILTIN_WEIGHTS
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
    ) -> None:
        self.index = index
        self.config = config
        zone = ZoneInfo(timezone)
        self._today = today or (lambda: datetime.now(UTC).astimezone(zone).date())
        embedder = index.embedder
        self.weights = resolve_weights(config, embedder.semantic if embedder else None)

    async def close(self) -> None:
        await self.index.close()

    async def search(
        self, query: str, max_results: int | None = None, min_score: float | None = None
    ) -> list[SearchHit]:
        if not query.strip():
            return []
        k = max_results or self.config.max_results
        pool = k * self.config.candidate_multiplier
        floor = self.config.min_score if min_score is None else min_score
        await self.index.refresh()
        plan = keyword_query(query)
        # FTS runs in aiosqlite's thread while the cosine scan runs in another: in parallel.
        text_scores, (vector_scores, query_vector) = await asyncio.gather(
            self._keyword(plan, pool), self._vector(query, pool)
        )
        missing = set(text_scores) - set(vector_scores)
        if query_vector is not None and missing:
            vector_scores.update(self.index.vectors.scores_for(query_vector, missing))
        w_v, w_t = self.weights
        rows = await self.index.chunks(set(text_scores) | set(vector_scores))
        today = self._today()
        scored: list[tuple[float, ChunkRow]] = []
        for chunk_id, row in rows.items():
            base = w_v * max(vector_scores.get(chunk_id, 0.0), 0.0) + w_t * text_scores.get(
                chunk_id, 0.0
            )
            score = base * decay_factor(row.date, today, self.config.half_life_days)
            if score > 0 and score >= floor:
                scored.append((score, row))
        scored.sort(key=lambda item: (-item[0], item[1].path, item[1].start_line))
        scored = scored[:pool]
        order = mmr([(s, token_set(r.text)) for s, r in scored], k, self.config.mmr_lambda)
        return [
            SearchHit(
                path=row.path,
                start_line=row.start_line,
                end_line=row.end_line,
                score=score,
                snippet=snippet(row.text, plan.terms),
                date=row.date,
            )
            for score, row in (scored[i] for i in order)
        ]

    async def _keyword(self, plan: KeywordQuery, limit: int) -> dict[int, float]:
        scores: dict[int, float] = {}

        def keep(chunk_id: int, value: float) -> None:
            if value > scores.get(chunk_id, 0.0):
                scores[chunk_id] = value

        if plan.match:
            for chunk_id, x in await self.index.fts("chunks_fts", plan.match, limit):
                keep(chunk_id, bm25_score(x))
        if plan.trigram:
            for chunk_id, x in await self.index.fts("chunks_tri", plan.trigram, limit):
                keep(chunk_id, bm25_score(x))
        needles = list(dict.fromkeys([*plan.short_cjk, *plan.cjk_bigrams]))[:MAX_NEEDLES]
        if needles:
            for chunk_id, cjk in await self.index.like_cjk(needles, limit * 4):
                share = sum(1 for n in needles if n in cjk) / len(needles)
                keep(chunk_id, SUBSTRING_SCORE * share**0.5)
        if len(scores) > limit:
            best = sorted(scores.items(), key=lambda item: -item[1])[:limit]
            scores = dict(best)
        return scores

    async def _vector(self, query: str, limit: int) -> tuple[dict[int, float], np.ndarray | None]:
        embedder = self.index.embedder
        if embedder is None or not len(self.index.vectors):
            return {}, None
        try:
            vector = (await embedder.embed([query]))[0]
        except Exception as exc:
            log.warning("memory search: embedding the query failed (%s); keyword only", exc)
            return {}, None
        if len(self.index.vectors) < PARALLEL_SCAN_ROWS:
            return dict(self.index.vectors.top(vector, limit)), vector
        return dict(await asyncio.to_thread(self.index.vectors.top, vector, limit)), vector

"""Calibrated fusion of keyword, vector and date evidence; recency as a bounded tie-breaker.

Raw evidence means different things from query to query (BM25 grows with the corpus and the
query's length; one embedder's cosines for unrelated text sit at 0.2, another's at 0), so
each side is first put on a per-query scale from 0 to 1:

- keyword t = BM25 / the best BM25 of this query (per table; a CJK substring match counts
  the share of the query's short words it contains, at most SUBSTRING_SCORE);
- vector v = (cosine - mean cosine of the query over all chunks) / (best cosine - that
  mean), clipped to [0, 1]: 1 for the nearest chunk, 0 for what any text would reach (the
  divisor is at least VECTOR_MIN_SPREAD of the way from the mean to 1, so when nothing is
  near, nothing gets a high v);
- date d = 1 for a chunk dated within the days the question names, else 0.

relevance = (w_t·t + w_v·v + w_d·d) / (w_t + w_v + w_d). Recency then only breaks
near-ties: candidates are sorted by relevance / the query's best relevance +
RECENCY_WEIGHT·0.5^(age / half-life) (undated chunks, MEMORY.md, count as new: they never
decay), except that a candidate never passes one whose evidence is at least as good on
every side and better on one. So a recent chunk can overtake an older one only if it is
within RECENCY_WEIGHT of it on the query's own scale (a near-tie means the same whether
the query matches strongly or weakly) and better on some side; a clearly better old chunk
stays ahead. A question that names a date has said which time it wants: no recency then.

The score shown (and compared with min_score and the auto-recall threshold) is relevance
over the best relevance of the query, x confidence, where confidence is the largest share of the query's content words (CJK:
characters) that one candidate contains, or the vector side's confidence. Small talk
("hi, how are you?") then scores near 0 whatever it happens to match, and a message that
names something in memory scores high even in a workspace of three chunks, where BM25
values mean nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import date

RECENCY_WEIGHT = 0.05
SUBSTRING_SCORE = 0.5
MMR_SIMILAR = 0.4
VECTOR_MIN_SPREAD = 0.3  # Jaccard overlap below which two chunks are not near-duplicates


@dataclass
class Candidate:
    id: int
    t: float = 0.0  # keyword evidence, 0..1 on this query's scale
    v: float = 0.0  # vector evidence, 0..1 on this query's scale
    d: float = 0.0  # 1 if dated within the days the question names
    recency: float = 1.0
    relevance: float = 0.0
    key: float = 0.0
    score: float = 0.0  # shown to the user: relevance / the best relevance x confidence
    tokens: frozenset[str] = field(default_factory=frozenset)


def recency(chunk_date: str | None, today: date, half_life_days: float) -> float:
    """1 for today and for undated text (MEMORY.md never decays), halving every half-life."""
    if chunk_date is None:
        return 1.0
    try:
        age = (today - date.fromisoformat(chunk_date)).days
    except ValueError:
        return 1.0
    return 0.5 ** (max(age, 0) / half_life_days)


def normalise_keyword(scores: dict[int, float]) -> dict[int, float]:
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return {}
    return {c: max(x, 0.0) / best for c, x in scores.items()}


def keyword_evidence(
    raw: dict[str, dict[int, float]],
    only: dict[str, set[int]] | None = None,
    *,
    cut: dict[str, float] | None = None,
    holding: Collection[int] = (),
) -> dict[int, float]:
    """Each chunk's best keyword evidence over the sides, on this search's 0..1 scale;
    with `only`, a side counts for the chunks it names. `cut`: by side, the last raw value
    of a list that stopped at its limit. A chunk of `holding` (it holds a word of the
    question) that such a list left out could have had up to that value and is given it,
    not none: among many chunks that hold the question's words alike, which ones a limit
    happened to keep is no evidence (bench/recall_dialogue/RESULTS.md, round 6)."""
    found: dict[int, float] = {}
    for side, values in raw.items():
        scaled = values if side == "cjk" else normalise_keyword(values)
        named = only[side] if only is not None else scaled.keys()
        for c in named:
            if c in scaled:
                found[c] = max(found.get(c, 0.0), scaled[c])
        last = (cut or {}).get(side)
        if last is None or not scaled:
            continue
        floor = last if side == "cjk" else last / max(values.values())
        for c in holding:
            if c not in named:
                found[c] = max(found.get(c, 0.0), floor)
    return found


def normalise_vector(scores: dict[int, float], mean: float) -> dict[int, float]:
    """From the mean (0) to the best cosine (1); but a best that is barely above the mean
    is noise, not a match: the scale spans at least VECTOR_MIN_SPREAD of the way to 1."""
    best = max(scores.values(), default=mean)
    spread = max(best - mean, VECTOR_MIN_SPREAD * (1.0 - mean))
    if spread <= 1e-6:
        return {}
    return {c: min(max((s - mean) / spread, 0.0), 1.0) for c, s in scores.items()}


def relevance(t: float, v: float, d: float, weights: tuple[float, float, float]) -> float:
    w_t, w_v, w_d = weights
    return (w_t * t + w_v * v + w_d * d) / ((w_t + w_v + w_d) or 1.0)


def weigh(cands: list[Candidate], weights: tuple[float, float, float]) -> None:
    for c in cands:
        c.relevance = relevance(c.t, c.v, c.d, weights)


def dominates(a: Candidate, b: Candidate, weights: tuple[float, float, float]) -> bool:
    """a's evidence is at least b's on every weighted side and more on one."""
    pairs = [
        (x, y) for w, x, y in zip(weights, (a.t, a.v, a.d), (b.t, b.v, b.d), strict=True) if w > 0
    ]
    return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)


def order(
    cands: list[Candidate], weights: tuple[float, float, float], recency_weight: float
) -> list[Candidate]:
    """By relevance, then adjacent swaps toward relevance + recency that never put a
    candidate above one that dominates it (each swap removes an inversion: it ends)."""
    ranked = sorted(cands, key=lambda c: -c.relevance)
    best = ranked[0].relevance if ranked and ranked[0].relevance > 0 else 1.0
    for c in ranked:
        c.key = c.relevance / best + recency_weight * c.recency
    if recency_weight <= 0:
        return ranked
    swapped = True
    while swapped:
        swapped = False
        for i in range(len(ranked) - 1):
            a, b = ranked[i], ranked[i + 1]
            if b.key > a.key and not dominates(a, b, weights):
                ranked[i], ranked[i + 1] = b, a
                swapped = True
    return ranked


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)  # the union's size, without building it


def mmr(ranked: list[Candidate], lam: float) -> Iterator[Candidate]:
    """Maximal marginal relevance over the ordered candidates, one pick at a time (a caller
    that needs only the first few stops early): only near-duplicates (token overlap above
    MMR_SIMILAR) are pushed down, so a relevant chunk is not dropped because another chunk
    of the same day or file came first."""
    if not ranked:
        return
    top = max(c.key for c in ranked) or 1.0
    left = list(ranked)
    # Each candidate's largest overlap with a chosen one, updated with each new choice only.
    overlap = [0.0] * len(left)
    while left:
        best_i, best_value = 0, float("-inf")
        for i, c in enumerate(left):
            penalty = max(0.0, overlap[i] - MMR_SIMILAR) / (1 - MMR_SIMILAR)
            value = lam * c.key / top - (1 - lam) * penalty
            if value > best_value:
                best_i, best_value = i, value
        best = left.pop(best_i)
        overlap.pop(best_i)
        yield best
        overlap = [
            max(o, jaccard(c.tokens, best.tokens)) for o, c in zip(overlap, left, strict=True)
        ]

"""Second stage: the first candidates re-ordered by a learned linear combination of their
evidence, the line-level evidence included.

The first stage (fusion.py) weighs whole chunks. In a dialogue log a chunk is a
conversation: the line that answers a question and a line of small talk on the same subject
share the question's words alike, and what sets the answer apart is finer grained: one line
that holds the question (`line`, by idf weight), and words few other candidates hold
(`specific`: the dentist's name, the car's model) where small talk repeats itself. Of that
line only: a conversation that once names the answer is not diluted by the rest of it.

Every feature is on 0..1, higher is better, and the weights are non-negative (fitted by
bench/recall_dialogue/train_reranker.py on generated dialogues that are not the eval's).
The model decides the first LEAD places only: below them the first stage's own order held
more answers in the first five (bench/recall_eval.py --pooled). Either way a candidate at
least as good on every feature and better on one is never placed below the other (each
place takes the first candidate that nothing left dominates). Recency is not evidence of
relevance and plays no part in this order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import fsum

from clawgate.agent.memory.coverage import Cover, chunk_terms
from clawgate.agent.memory.fusion import Candidate
from clawgate.agent.memory.index_db import ChunkRow

FEATURES = ("fused", "keyword", "vector", "date", "line", "specific")
# Fitted on bench/recall_dialogue/train_reranker.py's data (seed and people not the eval's).
WEIGHTS = (0.229, 0.187, 0.000, 0.185, 0.227, 0.172)
DEPTH = 30  # how many of the first stage's candidates are re-ordered
LEAD = 3  # how many first places the model decides; the first stage orders the rest


@dataclass(frozen=True)
class Reranker:
    """A linear model over FEATURES with non-negative weights."""

    weights: tuple[float, ...] = WEIGHTS
    depth: int = DEPTH
    lead: int = LEAD

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES) or min(self.weights) < 0:
            raise ValueError("a reranker needs one non-negative weight per feature")

    def features(
        self,
        cands: Sequence[Candidate],
        rows: Mapping[int, ChunkRow],
        weights: dict[str, float] | Cover,
    ) -> list[tuple[float, ...]]:
        """Each candidate's evidence, in FEATURES order (`weights`: the question's words'
        idf, or the search's Cover of them)."""
        best = max((c.relevance for c in cands), default=0.0) or 1.0
        seen: Counter[str] = Counter()
        for c in cands:
            seen.update(chunk_terms(rows[c.id].text, rows[c.id].lines))
        counted = weights if isinstance(weights, Cover) else Cover(weights)
        # What a word adds to a line's specificity: nothing for the question's own words.
        each = {t: 1 / n for t, n in seen.items()} | dict.fromkeys(counted.words, 0.0)
        out: list[tuple[float, ...]] = []
        for c in cands:
            cover, specific = _best_line(rows[c.id], counted, each)
            found = (c.relevance / best, c.t, c.v, c.d, cover, specific)
            out.append(tuple(round(x, 9) for x in found))
        return out

    def order(
        self,
        cands: list[Candidate],
        rows: Mapping[int, ChunkRow],
        weights: dict[str, float] | Cover,
        recency_weight: float = 0.0,
        first: Mapping[int, float] | None = None,
    ) -> list[Candidate]:
        """The first `depth` candidates re-ordered, the rest after them in their order.
        The model picks the first `lead` places; below them the first stage's relevance
        (`first`, by candidate id; else `c.relevance`) keeps its order. No candidate then
        stays above one that dominates it, and relevance (the model's score in the lead,
        none for a candidate the first stage found no evidence for) and the key MMR sorts
        by are made non-increasing down the list."""
        head, tail = cands[: self.depth], cands[self.depth :]
        if not head:
            return cands
        stage = {c.id: c.relevance for c in cands} | dict(first or {})
        found = self.features(head, rows, weights)
        evidence = {c.id: f for c, f in zip(head, found, strict=True)}
        # In integers (features in steps of 1e-9, weights of 1e-6), so that a candidate
        # better by a hair on one feature is never put below by a float's rounding.
        units = [round(w * 1e6) for w in self.weights]
        scale = (sum(units) or 1) * 1e9
        model: dict[int, float] = {}
        for c, f in zip(head, found, strict=True):
            total = sum(u * round(x * 1e9) for u, x in zip(units, f, strict=True))
            model[c.id] = (total if c.relevance > 0 else 0) / scale
        # Recency plays no part here: a newer result preferred in the lead cost old answers
        # their first place (bench/recall_eval.py, >180d), more than it won new ones.
        led = sorted(head, key=lambda c: -model[c.id])[: self.lead]
        lead_ids = {c.id for c in led}
        rest = sorted((c for c in head if c.id not in lead_ids), key=lambda c: -stage[c.id])
        placed = _respect_dominance(led + rest, evidence)
        best = max(model.values()) or 1.0
        floor = min((model[c.id] for c in led), default=best)
        top_rest = max((stage[c.id] for c in rest), default=0.0) or 1.0
        level, key = best, float("inf")
        for c in placed:
            value = model[c.id] if c.id in lead_ids else floor * stage[c.id] / top_rest
            level = min(level, value)
            key = min(key, level / best + recency_weight * c.recency)
            c.relevance, c.key = level, key
        below = level * 0.99
        top_tail = max((stage[c.id] for c in tail), default=0.0) or 1.0
        for c in tail:
            level = min(level, below * stage[c.id] / top_tail)
            key = min(key, level / best + recency_weight * c.recency)
            c.relevance, c.key = level, key
        return placed + tail


def _respect_dominance(
    preferred: list[Candidate], evidence: Mapping[int, tuple[float, ...]]
) -> list[Candidate]:
    """The preferred order, except that a candidate waits until every candidate that
    dominates it is placed: each place takes the first candidate no unplaced one dominates."""
    beaten = dominated_sets([evidence[c.id] for c in preferred])
    above = [0] * len(preferred)
    for mask in beaten:
        for j in _bits(mask):
            above[j] += 1
    left, placed = list(range(len(preferred))), []
    while left:
        pick = next(i for i in left if above[i] == 0)
        left.remove(pick)
        placed.append(preferred[pick])
        for j in _bits(beaten[pick]):
            above[j] -= 1
    return placed


def dominated_sets(x: Sequence[tuple[float, ...]]) -> list[int]:
    """For each evidence tuple, the ones it dominates as a bit mask (bit j: x[j]).

    Per feature, the tuples at most as good on it form a prefix of that feature's sorted
    order, so one pass builds every tuple's mask; a tuple dominates those at most as good on
    all features, itself and its equals aside. n log n a feature instead of n^2 pairs (no
    numpy: a keyword-only memory never loads it)."""
    n = len(x)
    if n == 0:
        return []
    full = (1 << n) - 1
    dominated = [full] * n
    for f in range(len(x[0])):
        order = sorted(range(n), key=lambda i: x[i][f])
        below, start = 0, 0
        while start < n:  # each run of equal values shares the mask that includes it
            end = start
            value = x[order[start]][f]
            while end < n and x[order[end]][f] == value:
                below |= 1 << order[end]
                end += 1
            for i in order[start:end]:
                dominated[i] &= below
            start = end
    equal: dict[tuple[float, ...], int] = {}
    for i, a in enumerate(x):
        equal[a] = equal.get(a, 0) | 1 << i
    return [mask & ~equal[a] for mask, a in zip(dominated, x, strict=True)]


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """a's evidence is at least b's on every feature and more on one."""
    pairs = list(zip(a, b, strict=True))
    return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)


def _best_line(row: ChunkRow, weights: Cover, each: dict[str, float]) -> tuple[float, float]:
    """(coverage, specificity) of the line that holds the most of the question (by idf
    weight), the most specific first among equals. Specificity: the line's other words,
    each counted 1 / the number of candidates that hold it (summed exactly, so that the
    order a set gives its words in plays no part; the question's words add 0.0)."""
    best = (0.0, 0.0)
    for held, asked in weights.lines(row.text, row.lines):
        own = len(held) - len(asked)
        specific = fsum(map(each.__getitem__, held)) / own if own else 0.0
        best = max(best, (weights.share_of(asked), specific))
    return best

"""Second stage: the first candidates re-ordered by a learned linear combination of their
evidence, the line-level evidence included.

The first stage (fusion.py) weighs whole chunks. In a dialogue log a chunk is a
conversation: the line that answers a question and a line of small talk on the same subject
share the question's words alike, and what sets the answer apart is finer grained: one line
that holds the question (`line`, by idf weight), and words few other candidates hold
(`specific`: the dentist's name, the car's model) where small talk repeats itself. Of that
line only: a conversation that once names the answer is not diluted by the rest of it.

Every feature is on 0..1, higher is better, and the weights are non-negative (fitted by
bench/recall_dialogue/train_reranker.py on generated dialogues that are not the eval's), so
the order is monotone in each kind of evidence: a candidate at least as good on every
feature and better on one is never placed below the other (ties in the weighted sum are
broken by the plain sum of the features, which the better one wins). Recency is not
evidence of relevance: as in the first stage it only breaks near-ties, and never against
a candidate that dominates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clawgate.agent.memory.coverage import terms, weighted_coverage
from clawgate.agent.memory.fusion import Candidate
from clawgate.agent.memory.index_db import ChunkRow

FEATURES = ("fused", "keyword", "vector", "date", "line", "specific")
# Fitted on bench/recall_dialogue/train_reranker.py's data (seed and people not the eval's).
WEIGHTS = (0.229, 0.187, 0.000, 0.185, 0.227, 0.172)
DEPTH = 30  # how many of the first stage's candidates are re-ordered


@dataclass(frozen=True)
class Reranker:
    """A linear model over FEATURES with non-negative weights."""

    weights: tuple[float, ...] = WEIGHTS
    depth: int = DEPTH

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES) or min(self.weights) < 0:
            raise ValueError("a reranker needs one non-negative weight per feature")

    def features(
        self, cands: Sequence[Candidate], rows: Mapping[int, ChunkRow], weights: dict[str, float]
    ) -> list[tuple[float, ...]]:
        """Each candidate's evidence, in FEATURES order."""
        best = max((c.relevance for c in cands), default=0.0) or 1.0
        seen: Counter[str] = Counter()
        for c in cands:
            seen.update(terms(rows[c.id].text))
        query = frozenset(weights)
        out: list[tuple[float, ...]] = []
        for c in cands:
            cover, specific = _best_line(rows[c.id].text, weights, query, seen)
            found = (c.relevance / best, c.t, c.v, c.d, cover, specific)
            out.append(tuple(round(x, 9) for x in found))
        return out

    def order(
        self,
        cands: list[Candidate],
        rows: Mapping[int, ChunkRow],
        weights: dict[str, float],
        recency_weight: float = 0.0,
    ) -> list[Candidate]:
        """The first `depth` candidates re-ordered, the rest after them in their order.
        Relevance becomes the model's score (none for a candidate the first stage found no
        evidence for); recency then breaks near-ties as in fusion.order, never moving a
        candidate above one that dominates it."""
        head, tail = cands[: self.depth], cands[self.depth :]
        if not head:
            return cands
        # In integers (features in steps of 1e-9, weights of 1e-6), so that a candidate
        # better by a hair on one feature is never put below by a float's rounding.
        units = [round(w * 1e6) for w in self.weights]
        scale = (sum(units) or 1) * 1e9
        ranked = []
        for c, f in zip(head, self.features(head, rows, weights), strict=True):
            steps = [round(x * 1e9) for x in f]
            total = sum(u * x for u, x in zip(units, steps, strict=True))
            ranked.append((total if c.relevance > 0 else 0, sum(steps), f, c))
        ranked.sort(key=lambda item: (-item[0], -item[1]))
        scored = [(total / scale, f, c) for total, _, f, c in ranked]
        best = scored[0][0] or 1.0
        for value, _, c in scored:
            c.relevance = value
            c.key = value / best + recency_weight * c.recency
        swapped = recency_weight > 0
        while swapped:
            swapped = False
            for i in range(len(scored) - 1):
                (_, fa, a), (_, fb, b) = scored[i], scored[i + 1]
                if b.key > a.key and not dominates(fa, fb):
                    scored[i], scored[i + 1] = scored[i + 1], scored[i]
                    swapped = True
        floor = min(c.relevance for c in head)
        top_tail = max((c.relevance for c in tail), default=0.0) or 1.0
        for c in tail:
            c.relevance = floor * 0.99 * c.relevance / top_tail
            c.key = c.relevance / best + recency_weight * c.recency
        return [c for _, _, c in scored] + tail


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """a's evidence is at least b's on every feature and more on one."""
    pairs = list(zip(a, b, strict=True))
    return all(x >= y for x, y in pairs) and any(x > y for x, y in pairs)


def _best_line(
    text: str, weights: dict[str, float], query: frozenset[str], seen: Counter[str]
) -> tuple[float, float]:
    """(coverage, specificity) of the line that holds the most of the question (by idf
    weight), the most specific first among equals. Specificity: the line's other words,
    each counted 1 / the number of candidates that hold it."""
    best = (0.0, 0.0)
    for line in text.splitlines():
        own = terms(line) - query
        specific = sum(1 / seen[t] for t in own) / len(own) if own else 0.0
        best = max(best, (weighted_coverage(weights, line), specific))
    return best

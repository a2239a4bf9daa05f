"""Fit the reranker's weights (agent/memory/rerank.py) on generated dialogues that are not
the eval's: other seeds, the other half of the name lists (dialogues.py, people="train").

    python bench/recall_dialogue/train_reranker.py [--seeds 101,102]

For each question the first stage's candidates and their features are recorded through the
real search (the default embedder); the weights maximise the softmax likelihood of the
answering candidate among them (listwise), kept non-negative by projection, and summed to
1. Prints the weights (paste them into rerank.WEIGHTS) and R@1 on the training data before
and after; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass, field

import numpy as np
from large_eval import NOW, K, Pool

from clawgate.agent.memory.embeddings import default_embedder
from clawgate.agent.memory.rerank import FEATURES, Reranker
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig


@dataclass(frozen=True)
class Recording(Reranker):
    """The first stage's order, unchanged; each call's features and texts kept."""

    seen: list = field(default_factory=list)

    def order(self, cands, rows, weights, recency_weight=0.0, first=None):
        head = cands[: self.depth]
        self.seen.append((self.features(head, rows, weights), [rows[c.id].text for c in head]))
        return cands


async def collect(seed: int) -> list[tuple[np.ndarray, int]]:
    """(features of the candidates, index of the first answering one) per question that
    has an answer among its candidates."""
    pool = Pool(seed=seed, people="train")
    recorder = Recording()
    engine = MemorySearch(
        pool.index(default_embedder(), "default"),
        MemorySearchConfig(),
        today=lambda: NOW,
        reranker=recorder,
    )
    found = []
    try:
        for q in pool.queries:
            recorder.seen.clear()
            await engine.search(q["query"], max_results=K)
            if not recorder.seen:
                continue
            features, texts = recorder.seen[0]
            answer = next((i for i, t in enumerate(texts) if q["needle"] in t), None)
            if answer is not None and len(texts) > 1:
                found.append((np.array(features, dtype=float), answer))
    finally:
        await engine.close()
        pool.close()
    return found


def fit(data: list[tuple[np.ndarray, int]], steps: int = 4000, rate: float = 1.0) -> np.ndarray:
    """Listwise softmax, gradient ascent projected to w >= 0 (the scale is free while
    fitting: it is the softmax's sharpness), then summed to 1."""
    w = np.zeros(len(FEATURES))
    w[0] = 10.0
    for _ in range(steps):
        grad = np.zeros_like(w)
        for x, answer in data:
            z = x @ w
            p = np.exp(z - z.max())
            p /= p.sum()
            grad += x[answer] - p @ x
        w = np.maximum(w + rate * grad / len(data), 0.0)
    return w / (w.sum() or 1.0)


def top1(data: list[tuple[np.ndarray, int]], w: np.ndarray) -> float:
    hits = 0
    for x, answer in data:
        score = x @ w
        order = sorted(range(len(x)), key=lambda i: (-score[i], -x[i].sum()))
        hits += order[0] == answer
    return hits / len(data)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", default="101,102")
    args = parser.parse_args()
    data = []
    for seed in (int(s) for s in args.seeds.split(",")):
        data += await collect(seed)
    start = np.zeros(len(FEATURES))
    start[0] = 1.0
    w = fit(data)
    print(f"{len(data)} training questions with an answer among the candidates")
    print(f"R@1 among them: first stage {top1(data, start):.3f}, reranked {top1(data, w):.3f}")
    print("WEIGHTS = (" + ", ".join(f"{x:.3f}" for x in w) + ")  # " + ", ".join(FEATURES))


if __name__ == "__main__":
    asyncio.run(main())

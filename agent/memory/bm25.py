"""The words table's BM25 in memory: the same rows, in the same order, with the same scores
as `SELECT rowid, -bm25(chunks_fts) ... ORDER BY score DESC, rowid LIMIT ?`, without the
statement's cost.

FTS5 scores every row that holds a word of the question, one auxiliary-function call each,
then sorts them: with a word in half of 10,000 chunks that is ~7 ms of the index's thread a
search (docs/performance.md). The same arithmetic over numpy arrays takes ~0.4 ms. It is
FTS5's own arithmetic, taken from fts5_aux.c's bm25 (k1 1.2, b 0.75, idf clamped to 1e-6,
each phrase's term added in the query's order), over FTS5's own tokens: the postings are
read from the table's fts5vocab, and a question's words are cut by a scratch FTS5 table with
the same tokenizer. So the floats are equal bit for bit, and ties fall by rowid as the
statement's ORDER BY has them (tests/test_bm25.py compares them on random memories).

A `Bm25Table` is a snapshot of one generation of the index, read in one transaction on a
connection of its own, in a thread: the index's thread and its searches go on meanwhile.
`Bm25Memory` answers from it only while the index is at that generation (and has read its
state as often); a search at any other, or with a word the tokenizer cuts in two, asks
FTS5, and has the table read again in the background. numpy is imported with the first
table: a memory without an embedder never reads one (it never loads numpy).
"""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from clawgate.agent.memory.index_db import WORDS_TOKENIZER, Reader, read_generation

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

K1 = 1.2
B = 0.75
MAX_CACHED_WORDS = 20_000
PROGRESS_STEPS = 10_000  # how often a read asks whether the index was closed


@dataclass(frozen=True)
class Bm25Table:
    """Postings of one generation: for each FTS5 token, the rows that hold it (as slots into
    `ids`) and how often."""

    generation: int
    ids: np.ndarray  # chunk ids, ascending; a slot is a place in it
    dates: np.ndarray  # each slot's date, '' for none
    lengths: np.ndarray  # each slot's tokens (FTS5's column size)
    average: float  # FTS5's avgdl: all tokens / all rows
    spans: dict[str, tuple[int, int]]  # token -> its postings' span in `slots`/`counts`
    slots: np.ndarray
    counts: np.ndarray

    @classmethod
    def read(
        cls, db_path: Path, opened: Callable[[sqlite3.Connection], None] = lambda _db: None
    ) -> Bm25Table:
        """The table as the database holds it now, on a read-only connection of its own (a
        snapshot in one transaction: a writer's commit in between is not seen). `opened`
        is handed the connection first (to stop the read by a progress handler)."""
        import numpy as np

        # as_uri escapes what a URI would read otherwise ('?', '#', '%' in a folder's name).
        uri = f"{db_path.resolve().as_uri()}?mode=ro"
        db = sqlite3.connect(uri, uri=True, isolation_level=None)
        try:
            opened(db)
            db.execute(
                "CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, chunks_fts, instance)"
            )
            db.execute("BEGIN")
            generation = read_generation(db)
            chunks = db.execute("SELECT id, coalesce(date, '') FROM chunks ORDER BY id").fetchall()
            # One row a token, its rows and counts as text: the grouping runs inside SQLite
            # (which lets go of the GIL), not as 250,000 Python tuples at 10,000 chunks.
            found = db.execute(
                "SELECT term, group_concat(doc), group_concat(n) FROM (SELECT term, doc, "
                "count(*) AS n FROM temp.words GROUP BY term, doc) GROUP BY term"
            ).fetchall()
            db.execute("COMMIT")
        finally:
            db.close()
        ids = np.array([c[0] for c in chunks], dtype=np.int64)
        dates = np.array([c[1] for c in chunks], dtype="U10")
        docs = [np.fromstring(f[1], dtype=np.int64, sep=",") for f in found]
        ends = np.cumsum([len(d) for d in docs]).tolist()
        spans = {f[0]: (end - len(d), end) for f, d, end in zip(found, docs, ends, strict=True)}
        none = np.zeros(0, dtype=np.int64)
        slots = np.searchsorted(ids, np.concatenate([none, *docs])).astype(np.int32)
        counts = np.concatenate(
            [none, *(np.fromstring(f[2], dtype=np.int64, sep=",") for f in found)]
        ).astype(np.float64)
        lengths = np.bincount(slots, weights=counts, minlength=len(ids)).astype(np.float64)
        rows = len(ids)
        average = float(int(lengths.sum())) / float(rows) if rows else 0.0
        return cls(generation, ids, dates, lengths, average, spans, slots, counts)

    def best(
        self, tokens: Sequence[str], limit: int, days: tuple[str, str] | None = None
    ) -> list[tuple[int, float]]:
        """(chunk id, score) of the rows holding any of `tokens` (one FTS5 phrase each, in
        the query's order), best first, ties by id; with `days`, only rows dated within."""
        import numpy as np

        rows = len(self.ids)
        score = np.zeros(rows)
        hit = np.zeros(rows, dtype=bool)
        for token in tokens:
            span = self.spans.get(token)
            if span is None:
                continue  # a phrase no row holds adds nothing to any row
            slots = self.slots[span[0] : span[1]]
            counts = self.counts[span[0] : span[1]]
            found = len(slots)
            idf = math.log((rows - found + 0.5) / (found + 0.5))
            if idf <= 0.0:
                idf = 1e-6
            # fts5_aux.c: idf * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))).
            norm = counts + K1 * ((1 - B) + (B * self.lengths[slots]) / self.average)
            score[slots] += idf * ((counts * (K1 + 1.0)) / norm)
            hit[slots] = True
        cand = np.flatnonzero(hit)
        if days is not None:
            dated = self.dates[cand]
            cand = cand[(dated >= days[0]) & (dated <= days[1]) & (dated != "")]
        if len(cand) > limit:
            # Every row at least as good as the limit-th, then the exact order among them.
            floor = np.partition(score[cand], len(cand) - limit)[len(cand) - limit]
            cand = cand[score[cand] >= floor]
        order = np.lexsort((self.ids[cand], -score[cand]))[:limit]
        chosen = cand[order]
        return list(zip(self.ids[chosen].tolist(), score[chosen].tolist(), strict=True))


class Tokenizer:
    """A question's words cut as the words table cuts them: by a scratch FTS5 table with the
    same tokenizer, in memory. Each word's tokens are kept."""

    def __init__(self) -> None:
        self._db: sqlite3.Connection | None = None
        self._known: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def tokens(self, word: str) -> tuple[str, ...]:
        known = self._known.get(word)
        if known is not None:
            return known
        with self._lock:
            if self._db is None:
                self._db = sqlite3.connect(":memory:", check_same_thread=False)
                self._db.execute(
                    f"CREATE VIRTUAL TABLE cut USING fts5(x, tokenize='{WORDS_TOKENIZER}')"
                )
                self._db.execute("CREATE VIRTUAL TABLE cut_vocab USING fts5vocab(cut, instance)")
            self._db.execute("INSERT INTO cut(rowid, x) VALUES (1, ?)", (word,))
            found = self._db.execute("SELECT term FROM cut_vocab ORDER BY offset").fetchall()
            self._db.execute("DELETE FROM cut")
        if len(self._known) >= MAX_CACHED_WORDS:
            self._known.clear()
        self._known[word] = tuple(f[0] for f in found)
        return self._known[word]

    def phrases(self, words: Sequence[str]) -> list[str] | None:
        """One token per word, or None if a word is not one token (FTS5 would match it as
        a phrase of several: the statement is asked instead)."""
        out = []
        for word in words:
            tokens = self.tokens(word)
            if len(tokens) != 1:
                return None
            out.append(tokens[0])
        return out


# (loads, generation) of the index: the same pair, the same rows in the words table.
State = Callable[[], tuple[int, int]]


class Bm25Memory:
    """The table of the index's current state, once read: `best` answers from it, `warm`
    reads it (again) when the index has moved on."""

    def __init__(self, db_path: Path, *, enabled: bool = True) -> None:
        self._db_path = db_path
        self._enabled = enabled
        self._held: tuple[int, Bm25Table] | None = None  # the loads it was read at, it
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._tokenizer = Tokenizer()

    def stale(self, at: tuple[int, int]) -> bool:
        """A table is wanted and the one held (if any) is not at `at`."""
        return self._enabled and not self.current(at)

    def current(self, at: tuple[int, int]) -> bool:
        return self._at(at) is not None

    def _at(self, at: tuple[int, int]) -> Bm25Table | None:
        held = self._held  # once: a read may replace it meanwhile (searches run in a thread)
        if held is None or at[1] < 0 or (held[0], held[1].generation) != at:
            return None
        return held[1]

    def best(
        self, at: tuple[int, int], words: Sequence[str], limit: int, days: tuple[str, str] | None
    ) -> list[tuple[int, float]] | None:
        """Reader.fts("chunks_fts", the OR of `words`, limit, days)'s answer, or None when
        the table is not at `at` or a word is not one token (ask FTS5 then)."""
        table = self._at(at)
        tokens = self._tokenizer.phrases(words) if table is not None else None
        return None if table is None or tokens is None else table.best(tokens, limit, days)

    def doc_freqs(self, at: tuple[int, int], reader: Reader, words: list[str]) -> list[int]:
        """Reader.doc_freqs(words): how many rows hold each word's one token, from the
        table when it is at `at` (the span of a token's postings is its rows); else, or
        when a word is not one token, the statement's count."""
        table = self._at(at)
        tokens = self._tokenizer.phrases(words) if table is not None and words else None
        if table is None or tokens is None:
            return reader.doc_freqs(words)
        spans = [table.spans.get(token, (0, 0)) for token in tokens]
        return [end - start for start, end in spans]

    async def warm(self, state: State) -> None:
        """Read the table unless it is at `state()`; concurrent callers share one read. A
        failure is logged: searches go on asking FTS5."""
        if not self._enabled or self._closed or self.current(state()):
            return
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._read(state))
        await asyncio.shield(self._task)

    async def _read(self, state: State) -> None:
        loads = state()[0]

        def opened(db: sqlite3.Connection) -> None:
            # Consulted every few thousand steps of any statement: `close` stops the read
            # wherever it is, even one about to begin (an interrupt would miss that one).
            db.set_progress_handler(lambda: self._closed, PROGRESS_STEPS)

        try:
            table = await asyncio.to_thread(Bm25Table.read, self._db_path, opened)
        except (sqlite3.Error, OSError) as exc:
            if not self._closed:
                log.warning("memory index: the words table could not be read into memory: %s", exc)
            return
        if state()[0] == loads:  # not read from a database the index has since reloaded
            self._held = (loads, table)

    async def close(self) -> None:
        """Stops a read under way: a one-off command (`clawgate memory search`) does not
        wait at its exit for a table it will not use."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

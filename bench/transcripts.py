"""Transcript search (agent/memory/transcripts.py) on a transcript of 100,000 messages.

Prints: the first indexing of the whole file; a refresh after ten messages are appended
(the bytes it read: only the new ones); a refresh with nothing new; search latency p50/p95
over 200 owner searches (each with its refresh); the same after the file is moved to
sessions/archive/ as /new does (nothing read again). Asserts nothing.

    python bench/transcripts.py [--messages 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.memory.transcripts import TranscriptIndex
from clawgate.kernel.bus import Trust

NAMES = "Maya Tom Priya Jonas Elena Sam Nadia Kofi".split()
SUBJECTS = (
    "dentist car hike dinner concert market train flight budget garden piano marathon "
    "passport insurance kitchen holiday birthday recipe invoice landlord"
).split()
PLACES = "Lisbon Porto Glasgow Valencia Leeds Hamburg Seville Cork Turin Pune 成都 青岛".split()


def message(rng: random.Random, seq: int) -> str:
    if seq % 2:
        who = rng.choice(NAMES)
        text = (
            f"[{who}] thinking about the {rng.choice(SUBJECTS)} in {rng.choice(PLACES)}, "
            f"and the {rng.choice(SUBJECTS)} next week #{seq}"
        )
        role = "user"
    else:
        text = f"Noted: the {rng.choice(SUBJECTS)} and the {rng.choice(SUBJECTS)}."
        role = "assistant"
    stamp = f"2026-{1 + seq % 12:02d}-{1 + seq % 28:02d}T10:{seq % 60:02d}:00.000Z"
    return json.dumps({"seq": seq, "role": role, "content": text, "timestamp": stamp}) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    rng = random.Random(29)
    root = Path(tempfile.mkdtemp(prefix="bench-transcripts-"))
    try:
        sessions = root / "ws" / "sessions"
        sessions.mkdir(parents=True)
        path = sessions / "telegram_-100700.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            handle.write(json.dumps({"type": "session", "key": "telegram:-100700"}) + "\n")
            for seq in range(1, args.messages + 1):
                handle.write(message(rng, seq))
        size = path.stat().st_size
        index = TranscriptIndex.for_workspace(root / "ws", root / "data")
        start = time.perf_counter()
        first = await index.refresh()
        print(
            f"{args.messages:,} messages, {size / 1e6:.1f} MB: first indexing "
            f"{time.perf_counter() - start:.2f} s ({first.messages_added:,} messages)"
        )
        with path.open("a", encoding="utf-8") as handle:
            for seq in range(args.messages + 1, args.messages + 11):
                handle.write(message(rng, seq))
        start = time.perf_counter()
        more = await index.refresh()
        print(
            f"10 messages appended: refresh {1000 * (time.perf_counter() - start):.1f} ms, "
            f"{more.bytes_read:,} bytes read, {more.messages_added} messages added"
        )
        start = time.perf_counter()
        await index.refresh()
        print(f"nothing new: refresh {1000 * (time.perf_counter() - start):.2f} ms")
        queries = [
            f"{rng.choice(NAMES)} {rng.choice(SUBJECTS)} {rng.choice(PLACES)}" for _ in range(200)
        ]

        async def timings() -> list[float]:
            out = []
            for q in queries:
                start = time.perf_counter()
                await index.search(q, Trust.OWNER, 6)
                out.append(1000 * (time.perf_counter() - start))
            return sorted(out)

        spent = await timings()
        p95 = spent[int(0.95 * len(spent)) - 1]
        print(f"search (with its refresh): p50 {statistics.median(spent):.1f} ms, p95 {p95:.1f} ms")
        (sessions / "archive").mkdir()
        path.rename(sessions / "archive" / "telegram_-100700.20261205T080000.jsonl")
        moved = await index.refresh()
        print(f"moved to sessions/archive/: {moved.bytes_read:,} bytes read again")
        await index.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())

"""Many searches in one process: the `clawgate memory search --batch` interface.

Input: one JSON object per line, `{"q": "...", "k": 5}` with optional `since`/`until`
(YYYY-MM-DD, or a phrase such as "last week"); blank lines are skipped. Output: one JSON
line per input line, in order: the results as `--json` prints them (a list of objects with
path, start_line, end_line, score, snippet), or `{"error": "..."}` for a line that could not
be read. The index is opened and refreshed once, so a thousand queries cost a thousand
searches, not a thousand index loads. Held-out evaluations drive this: keep it stable.

With `"sessions": true` a line's results go on with up to k messages of past conversations
(transcripts.py), each `{"session", "timestamp", "speaker", "seq", "path", "score",
"snippet"}`; without it the output is exactly as before.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any, TextIO

from clawgate.agent.memory.dates import parse_bound
from clawgate.agent.memory.search import MemorySearch, SearchHit
from clawgate.kernel.bus import Trust

HIT_KEYS = ("path", "start_line", "end_line", "score", "snippet")
MAX_K = 50


def hit_json(hit: SearchHit) -> dict[str, Any]:
    """One result as `memory search --json` prints it."""
    data = hit.as_json()
    return {key: data[key] for key in HIT_KEYS}


def _bound(value: object, today: date, *, end: bool) -> date | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("since/until must be strings such as 2026-03-16")
    return parse_bound(value, today, end=end)


def date_window(
    search: MemorySearch, since: object, until: object
) -> tuple[date | None, date | None]:
    """since/until arguments (tool or batch line) as dates; ValueError says what is wrong."""
    today = search.today()
    return _bound(since, today, end=False), _bound(until, today, end=True)


async def run_one(search: MemorySearch, request: dict[str, Any], default_k: int) -> list[dict]:
    query = request.get("q")
    if not isinstance(query, str):
        raise ValueError('each line needs "q", a string')
    k = request.get("k", default_k)
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValueError(f'"k" must be an integer from 1 to {MAX_K}')
    since, until = date_window(search, request.get("since"), request.get("until"))
    sessions = request.get("sessions", False)
    if not isinstance(sessions, bool):
        raise ValueError('"sessions" must be true or false')
    hits = await search.search(query, max_results=k, since=since, until=until)
    found: list[dict] = [hit_json(hit) for hit in hits]
    if sessions and search.transcripts is not None:
        # The batch interface is the owner's (the CLI, on the gateway's machine).
        said = await search.transcripts.search(query, Trust.OWNER, k)
        found += [hit.as_json() for hit in said]
    return found


async def run_batch(
    search: MemorySearch, lines: Iterable[str], out: TextIO, default_k: int = 6
) -> int:
    """Answer every request line; returns how many lines were errors."""
    errors = 0
    await search.index.refresh()
    for line in lines:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("each line must be a JSON object")
            result: object = await run_one(search, request, default_k)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            errors += 1
            result = {"error": str(exc)}
        out.write(json.dumps(result, ensure_ascii=False) + "\n")
        out.flush()
    return errors


async def run_batch_file(search: MemorySearch, source: str, default_k: int = 6) -> int:
    """run_batch over a file (or "-" for stdin) to stdout, closing the search after; the
    exit status: 0, 1 if any line was an error, 2 if the file cannot be read."""
    import sys

    try:
        if source == "-":
            errors = await run_batch(search, sys.stdin, sys.stdout, default_k)
        else:
            try:
                text = await asyncio.to_thread(Path(source).read_text, encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                print(f"cannot read {source}: {exc}", file=sys.stderr)
                return 2
            errors = await run_batch(search, text.splitlines(), sys.stdout, default_k)
    finally:
        await search.close()
    return 1 if errors else 0

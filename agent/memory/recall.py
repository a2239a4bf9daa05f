"""Auto-recall: the top memory hits for the incoming text, as a system-prompt part.

Owner sessions only, and only when `[memory] auto_recall` is on. Up to three hits scoring at
least max(min_score, RECALL_MIN_SCORE) go in as `- [path:start-end] snippet` lines within
RECALL_BUDGET_CHARS. A slow first index build does not hold the turn up: after
RECALL_TIMEOUT seconds the turn goes on without recall while the build continues. A message
with no content word and no date (small talk) cannot reach the floor, so it is not searched.
"""

from __future__ import annotations

import asyncio
import logging

from clawgate.agent.context import ExtraPart, PromptPart
from clawgate.agent.memory.dates import query_range
from clawgate.agent.memory.search import MemorySearch, terms
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import MemoryConfig

log = logging.getLogger(__name__)

RECALL_HITS = 3
RECALL_BUDGET_CHARS = 1_500
RECALL_SNIPPET_CHARS = 400
# On the calibrated scale (relevance x confidence, search.py): a hit at or above this covers
# at least about half of the message's content words, or matches a date it names; small
# talk, whose words are not content words, scores 0.
RECALL_MIN_SCORE = 0.35
RECALL_TIMEOUT = 3.0


def format_recall(hits: list, budget: int = RECALL_BUDGET_CHARS) -> str:
    lines: list[str] = []
    used = 0
    for hit in hits:
        snippet = hit.snippet
        if len(snippet) > RECALL_SNIPPET_CHARS:
            snippet = snippet[: RECALL_SNIPPET_CHARS - 1] + "…"
        line = f"- [{hit.path}:{hit.start_line}-{hit.end_line}] {snippet}"
        if used + len(line) > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def recall_part(search: MemorySearch, config: MemoryConfig) -> ExtraPart:
    async def part(trust: Trust, incoming_text: str) -> PromptPart | None:
        if not config.auto_recall or not trust.is_owner or not incoming_text.strip():
            return None
        if not terms(incoming_text) and query_range(incoming_text, search.today()) is None:
            # A hit's confidence is the share of the message's content words it covers, or
            # that of a date it names: here 0 for every hit, so none can pass the floor,
            # and the search (its query embedding above all) would be spent for nothing.
            return None
        floor = max(config.search.min_score, RECALL_MIN_SCORE)
        try:
            async with asyncio.timeout(RECALL_TIMEOUT):
                hits = await search.search(incoming_text, max_results=RECALL_HITS, min_score=floor)
        except TimeoutError:
            log.info("auto-recall skipped: the memory index is still being built")
            return None
        text = format_recall(hits)
        if config.recall_sessions and search.transcripts is not None:
            said = await search.transcripts.search(incoming_text, trust, RECALL_HITS)
            lines = [
                f"- [{h.session} {h.timestamp[:16].replace('T', ' ')} {h.speaker}] {h.snippet}"
                for h in said
                if h.score >= floor
            ]
            text = "\n".join(filter(None, [text, *lines]))[:RECALL_BUDGET_CHARS]
        if not text:
            return None
        intro = "Possibly relevant memory (use memory_get for more):\n"
        return PromptPart("recalled memory", intro + text)

    return part

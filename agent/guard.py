"""The context guard: keep every request inside the model's context window.

Before each model call the request is estimated (`estimate_messages` in
agent/memory/tokens.py: about four characters a token, one per CJK character). In owner sessions, crossing the soft threshold runs one silent memory-flush turn
per compaction cycle. On overflow - estimated, or reported by the provider - first
oversized tool results are cut in what is sent (head and tail kept), then the oldest part
of the unconsolidated history is replaced by an LLM summary (recorded as a `compaction`
line, so a restart sends the same view; the raw lines stay and are consolidated later),
then the turn fails with a clear message.
"""

from __future__ import annotations

import logging
from typing import Any

from clawgate.agent.history import to_model_messages
from clawgate.agent.llm import LLMClient
from clawgate.agent.memory.consolidate import format_messages
from clawgate.agent.memory.tokens import message_tokens, tail_within
from clawgate.agent.session import Compaction, Session, SessionStore, StoredMessage
from clawgate.agent.spend.scope import tagged
from clawgate.kernel.bus import Trust
from clawgate.kernel.errors import ContextTooLarge

log = logging.getLogger(__name__)

SOFT_FRACTION = 0.8
TOOL_RESULT_KEEP = 2_000  # characters kept of a tool result when cutting for space
KEEP_FRACTION = 0.3  # newest share of the budget that compaction leaves verbatim
SUMMARY_PREFIX = "[Summary of the earlier part of this conversation]\n"
SUMMARY_PROMPT = (
    "Summarise the conversation below for your own later use: what the user wants, facts, "
    "decisions, open tasks, names, numbers, file paths. Be complete but brief; plain text."
)


def truncate_tool_results(
    messages: list[dict[str, Any]], keep: int = TOOL_RESULT_KEEP
) -> list[dict[str, Any]]:
    """A copy of a request's messages with each oversized tool result cut to its head and tail."""
    out = []
    for message in messages:
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, str) and len(content) > keep:
            message = {**message, "content": _cut(content, keep)}
        out.append(message)
    return out


def _cut_stored(messages: list[StoredMessage], keep: int = TOOL_RESULT_KEEP) -> list[StoredMessage]:
    """`truncate_tool_results` for stored messages (what a compaction summarises)."""
    return [
        m.with_content(_cut(m.content, keep)) if m.role == "tool" and len(m.content) > keep else m
        for m in messages
    ]


def _cut(content: str, keep: int) -> str:
    half = keep // 2
    cut = len(content) - 2 * half
    return f"{content[:half]}\n[... {cut} characters cut to fit the context ...]\n{content[-half:]}"


class ContextGuard:
    def __init__(
        self, *, sessions: SessionStore, llm: LLMClient, context_window: int, reserve: int
    ) -> None:
        self.sessions = sessions
        self.llm = llm
        self.limit = max(1024, context_window - reserve)
        self.soft_limit = int(self.limit * SOFT_FRACTION)

    # What is sent -------------------------------------------------------------

    def latest_compaction(self, session: Session) -> Compaction | None:
        latest = session.latest(Compaction)
        if latest is None or latest.up_to_seq <= session.last_consolidated:
            return None  # consolidation has moved past it: the raw tail is short again
        return latest

    def history(self, session: Session) -> list[dict[str, Any]]:
        """The unconsolidated history as the model sees it: compacted part as a summary."""
        messages = session.unconsolidated()
        compaction = self.latest_compaction(session)
        if compaction is None:
            return to_model_messages(messages)
        up_to = compaction.up_to_seq
        summary = {"role": "user", "content": SUMMARY_PREFIX + compaction.summary}
        return [summary, *to_model_messages(m for m in messages if m.seq > up_to)]

    # Flush --------------------------------------------------------------------

    def flush_due(self, session: Session, estimate: int) -> bool:
        """Once per compaction cycle, when the soft threshold is crossed."""
        cycle = session.count(Compaction)
        return estimate > self.soft_limit and session.state.flushed_cycle != cycle

    def mark_flushed(self, session: Session) -> None:
        cycle = session.count(Compaction)
        self.sessions.update_state(session, flushed_cycle=cycle)

    # Compaction ---------------------------------------------------------------

    def _compaction_cut(self, session: Session) -> int | None:
        """The seq up to which history is summarised: all but the newest ~30% of the budget,
        moved back so the kept part never starts with a tool result."""
        compaction = self.latest_compaction(session)
        start_after = compaction.up_to_seq if compaction else session.last_consolidated
        messages = [m for m in session.unconsolidated() if m.seq > start_after]
        budget = int(self.limit * KEEP_FRACTION)
        kept_tokens, index = 0, len(messages)
        while index > 1:
            cost = message_tokens(messages[index - 1].to_dict())
            if kept_tokens + cost > budget and index < len(messages):
                break
            kept_tokens += cost
            index -= 1
        while 0 < index < len(messages) and messages[index].role == "tool":
            index -= 1  # keep the assistant's call together with its results
        if not 0 < index < len(messages):
            return None  # nothing older than the newest message, which always stays
        return messages[index - 1].seq

    async def compact(self, session: Session, *, model: str | None = None) -> int:
        """Summarise the oldest unconsolidated part; returns how many messages it covers."""
        cut = self._compaction_cut(session)
        if cut is None:
            return 0
        previous = self.latest_compaction(session)
        start_after = previous.up_to_seq if previous else session.last_consolidated
        chunk = [m for m in session.unconsolidated() if start_after < m.seq <= cut]
        body = format_messages(_cut_stored(chunk))
        if previous:
            body = f"Earlier summary:\n{previous.summary}\n\nThen:\n{body}"
        # Keep the summary request itself inside the window, with room for the summary.
        body = tail_within(body, self.limit * 3 // 4)
        trust = session.state.trust or Trust.ALLOWED
        with tagged("compaction", session_key=session.key, trust=trust):
            response = await self.llm.chat(
                [{"role": "system", "content": SUMMARY_PROMPT}, {"role": "user", "content": body}],
                model=model,
            )
        summary = (response.content or "").strip()
        if not summary:
            raise ContextTooLarge("the model returned an empty summary")
        self.sessions.append(session, Compaction(up_to_seq=cut, summary=summary))
        await self.sessions.sync(session)
        log.info("%s: compacted %d messages up to seq %d", session.key, len(chunk), cut)
        return len(chunk)

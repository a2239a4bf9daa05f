"""What the agent offers turns nobody typed: the gateway's cron jobs and heartbeat run in
sessions of their own (`cron:<id>`, `heartbeat:main`) that must stay short and never reach
MEMORY.md (see the owner rule in memory/consolidate.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from clawgate.agent.loop import EMPTY_REPLY
from clawgate.agent.session import Consolidation, Session, SessionStore
from clawgate.agent.tools.base import ToolContext
from clawgate.agent.tools.shell import exit_status
from clawgate.kernel.bus import OutboundMessage, Trust
from clawgate.kernel.errors import ToolError

if TYPE_CHECKING:
    from clawgate.agent.runtime import AgentRuntime


def trim_history(
    sessions: SessionStore, session: Session, *, keep_runs: int, max_messages: int
) -> Consolidation | None:
    """Cover everything but the last `keep_runs` runs (a run starts at a user message, and
    at most `max_messages` messages stay) with a `consolidation` record, mode "trimmed".

    Synchronous on purpose: called right after a turn, it lands before any consolidation
    the turn scheduled can look, so that one finds nothing left to do.
    """
    live = session.unconsolidated()
    if not live:
        return None
    cut = len(live) - max_messages
    starts = [i for i, message in enumerate(live) if message.role == "user"]
    if len(starts) > keep_runs:
        cut = max(cut, starts[-keep_runs])
    if cut <= 0:
        return None
    while cut < len(live) and live[cut].role == "tool":
        cut += 1  # never keep a tool result without the call it answers
    return sessions.append(
        session,
        Consolidation(from_seq=live[0].seq, to_seq=live[cut - 1].seq, mode="trimmed"),
    )


def is_empty_reply(reply: OutboundMessage) -> bool:
    """The model answered nothing and the loop said so: for a check that only speaks when
    something is due (the heartbeat), that means nothing to report."""
    return reply.is_error and reply.text == EMPTY_REPLY


async def condition_unmet(
    runtime: AgentRuntime, command: str, trust: Trust, chat_key: str
) -> str | None:
    """None when a job's `condition` exits 0, else why the job does not run. The command
    runs as the exec tool would in the chat the job reports to (its trust, its folder, the
    deny list, the timeout, the environment allowlist): a condition is no way around them."""
    config = runtime.config
    ctx = ToolContext(
        workspace=config.workspace.resolve(),
        trust=trust,
        session_key=chat_key,
        config=config.tools,
        secrets=tuple(config.secrets()),
        writer=runtime.writer,
        memory_lock=runtime.memory.lock,
    )
    try:
        ctx.make_root()
        code = await exit_status(command, ctx)
    except (ToolError, OSError) as exc:
        return f"condition not run: {str(exc).removeprefix('Error: ')}"
    return None if code == 0 else f"condition exited {code}"

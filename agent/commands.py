"""Slash commands, answered before the model sees anything."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from clawgate.agent.context import ContextBuilder
from clawgate.agent.guard import ContextGuard
from clawgate.agent.memory.tokens import estimate_messages
from clawgate.agent.session import Session, SessionStore
from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.spend.report import Row, chat_summary
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.agent.usage import TurnUsage
from clawgate.kernel.bus import InboundMessage
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.errors import ContextTooLarge, ModelUnavailable

HELP = """Commands:
/new - start a fresh session (the old transcript is archived, never deleted)
/stop - cancel the turn that is running
/model [NAME] - show or switch this session's model
/status - model, session, trust and message counts
/usage - what the model cost today and this month (owner only)
/compact - summarise the older part of this session to free context space
/context - where the context window goes
/help - this list"""

# The answer to a message with no text and no attachment: no model call guesses at it.
EMPTY_MESSAGE = "Your message was empty. Send some text, or /help for commands."

COMMANDS = ("new", "stop", "model", "status", "usage", "compact", "context", "help")
# What these change is shared by everyone in a group (and costs the owner money), so in a
# group or an `allowed` chat only the owner may run them.
OWNER_ONLY = {
    "new": "Only the owner can start a new session here.",
    "model": "Only the owner can change the model here.",
    "compact": "Only the owner can compact this session here.",
    "usage": "Only the owner can see the usage.",
}


def _tokens(text: str) -> int:
    return estimate_messages([{"role": "system", "content": text}])


class Command(NamedTuple):
    """A slash command as the user typed it: `/model@MyBot gpt-4o` is ('model', 'gpt-4o')."""

    name: str
    arg: str

    @property
    def interrupts(self) -> bool:
        """Answered by whoever owns the session's running turn, which it cancels (`/stop`);
        the handler below only answers it when nothing runs."""
        return self.name == "stop"


def parse_command(text: str) -> Command | None:
    """The command in `text`, or None if it is not one of ours (then it goes to the model).
    The one place that knows the command syntax: the dispatcher and the loop both ask it."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, arg = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if name not in COMMANDS and name != "start":
        return None
    return Command(name, arg.strip())


ArchiveHook = Callable[[Session, Any], object]
# {channel: {state, last_error, ...}}, for /status's channel lines.
ChannelStatus = Callable[[], dict[str, dict[str, Any]]]
# None when the model name can be used, else one line saying why not (LLMClient.check_model).
ModelCheck = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True)
class CommandHandler:
    """Runs one slash command against a session. `/stop` is handled by the dispatcher, which
    owns the running turn; here it only answers when nothing runs."""

    sessions: SessionStore
    default_model: str
    guard: ContextGuard
    context: ContextBuilder
    tools: ToolRegistry
    tools_config: ToolsConfig
    usage: TurnUsage
    # The agent's spend ledger, for /usage and /status; None where nothing records (tests).
    ledger: Ledger | None = None
    # The daemon's channel states; None where there is nothing to report (`clawgate agent`).
    channel_status: ChannelStatus | None = None
    # Called after /new moved a transcript aside (the memory system archives it from there).
    on_archived: tuple[ArchiveHook, ...] = ()
    # Asked before /model switches; None takes any name (tests without a model endpoint).
    check_model: ModelCheck | None = None

    def model_for(self, session: Session) -> str:
        return session.state.model or self.default_model

    async def run(self, name: str, arg: str, message: InboundMessage, session: Session) -> str:
        owner = message.trust.is_owner or message.sender_is_owner
        if name in OWNER_ONLY and not owner and (arg or name != "model"):
            return OWNER_ONLY[name]
        if name == "new":
            archived = await self.sessions.archive(session)
            self.usage.forget(session.key)
            if archived is not None:
                for hook in self.on_archived:
                    hook(session, archived)  # starts background work; /new answers at once
            return "New session started."
        if name == "stop":
            return "Nothing is running."
        if name == "model":
            if not arg:
                return f"Model: {self.model_for(session)}"
            if self.check_model is not None and arg != self.default_model:
                refused = await self.check_model(arg)
                if refused is not None:
                    return f"Model not changed: {refused}"
            self.sessions.update_state(session, model=arg)
            await self.sessions.sync(session)
            return f"Model for this session set to {arg}."
        if name == "status":
            usage = self.usage.last(session.key)
            return "\n".join(
                [
                    f"Model: {self.model_for(session)}",
                    f"Session: {session.key}",
                    f"Trust: {message.trust.value}",
                    f"Messages: {len(session.messages)}",
                    f"Unconsolidated: {len(session.unconsolidated())}",
                    f"Tokens (last turn): {usage.get('total_tokens', 0)}"
                    f" (prompt {usage.get('prompt_tokens', 0)},"
                    f" completion {usage.get('completion_tokens', 0)})",
                    *(await self._heartbeat_line() if owner else []),
                    *self._channel_lines(message.trust.is_owner),
                ]
            )
        if name == "compact":
            try:
                count = await self.guard.compact(session, model=self.model_for(session))
            except (ModelUnavailable, ContextTooLarge) as exc:
                return f"Could not compact: {exc}"
            if not count:
                return "Nothing to compact yet."
            if count == 1:
                return "Compacted 1 older message into a summary (the transcript keeps it)."
            return f"Compacted {count} older messages into a summary (the transcript keeps them)."
        if name == "context":
            return await self._context_report(message, session)
        if name == "usage":
            return await self._usage_report()
        if name == "start":
            return "Hi! I'm your assistant. Send me a message, or /help for commands."
        return HELP

    async def _usage_report(self) -> str:
        if self.ledger is None:
            return "No usage is recorded here."
        today = self.ledger.today()
        records = await asyncio.to_thread(self.ledger.read, today)
        return chat_summary(records, today, self.ledger.zone)

    async def _heartbeat_line(self) -> list[str]:
        """What the heartbeat's model calls cost today (its budget leak shows here first)."""
        if self.ledger is None:
            return []
        sums = (await self.ledger.totals()).purpose(self.ledger.today(), "heartbeat")
        row = Row(
            "heartbeat",
            calls=sums.calls,
            cost_usd=sums.usd,
            unknown_tokens=sums.unpriced_tokens,
            unknown_calls=sums.unpriced_calls,
        )
        return [f"Heartbeat today: {row.cost}, {sums.calls} model calls"]

    def _channel_lines(self, owner: bool) -> list[str]:
        if self.channel_status is None:
            return []
        # An error text can name hosts, ids or token fragments: only an owner reads it.
        return [
            f"Channel {name}: {info.get('state')}"
            + (f" ({info['last_error']})" if owner and info.get("last_error") else "")
            for name, info in sorted(self.channel_status().items())
        ]

    async def _context_report(self, message: InboundMessage, session: Session) -> str:
        parts = await self.context.system_prompt_parts(
            trust=message.trust, session_key=session.key, now=datetime.now(UTC)
        )
        history = self.guard.history(session)
        schemas = self.tools.schemas(message.trust, self.tools_config)
        rows = [(f"system: {part.name}", _tokens(part.text)) for part in parts]
        rows.append((f"history: {len(history)} messages", estimate_messages(history)))
        rows.append((f"tools: {len(schemas)}", estimate_messages([], schemas) if schemas else 0))
        used = sum(tokens for _, tokens in rows)
        lines = [
            f"Context: ~{used:,} of {self.guard.limit:,} tokens ({100 * used // self.guard.limit}%)"
        ]
        lines += [f"  {name}: ~{tokens:,}" for name, tokens in rows]
        return "\n".join(lines)

"""Slash commands, answered before the model sees anything."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.session import Session, SessionStore
from gateway.bus import InboundMessage

HELP = """Commands:
/new - start a fresh session (the old transcript is archived, never deleted)
/stop - cancel the turn that is running
/model [NAME] - show or switch this session's model
/status - model, session, trust and message counts
/help - this list"""

COMMANDS = ("new", "stop", "model", "status", "help")


def parse_command(text: str) -> tuple[str, str] | None:
    """('model', 'gpt-4o') for '/model gpt-4o' or '/model@MyBot gpt-4o'; None if not ours."""
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    head, _, arg = stripped[1:].partition(" ")
    name = head.split("@", 1)[0].lower()
    if name not in COMMANDS and name != "start":
        return None
    return name, arg.strip()


ArchiveHook = Callable[[Session, Any], object]


@dataclass
class CommandHandler:
    """Runs one slash command against a session. `/stop` is handled by the dispatcher, which
    owns the running turn; here it only answers when nothing runs."""

    sessions: SessionStore
    default_model: str
    last_usage: dict[str, dict[str, int]] = field(default_factory=dict)
    # Called after /new moved a transcript aside (the memory system archives it from there).
    on_archived: list[ArchiveHook] = field(default_factory=list)

    def model_for(self, session: Session) -> str:
        return str(session.state.get("model") or self.default_model)

    async def run(self, name: str, arg: str, message: InboundMessage, session: Session) -> str:
        if name == "new":
            archived = await self.sessions.archive(session)
            if archived is not None:
                for hook in self.on_archived:
                    hook(session, archived)  # starts background work; /new answers at once
            return "New session started."
        if name == "stop":
            return "Nothing is running."
        if name == "model":
            if not arg:
                return f"Model: {self.model_for(session)}"
            self.sessions.append_record(session, "state", model=arg)
            await self.sessions.sync(session)
            return f"Model for this session set to {arg}."
        if name == "status":
            usage = self.last_usage.get(session.key, {})
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
                ]
            )
        if name == "start":
            return "Hi! I'm your assistant. Send me a message, or /help for commands."
        return HELP

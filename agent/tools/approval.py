"""Exec approvals: which commands need the owner's yes, and the cards that ask for it.

`needs_approval` is the policy (`tools.exec_approval`): "always" asks for every command,
"never" for none, "risky" for all but a short list of read-only commands that stay inside
the workspace and the owner's `tools.exec_allow` patterns. Either counts only for one simple
command: anything the shell would chain, substitute or redirect (`;`, `|`, `&`, `$`, a
backtick, `<`, `>`, a newline) is asked about, since `ls; rm -rf x` starts with `ls` too.

`ExecApprovals` holds the cards of one agent. `ask` sends a card (an `OutboundMessage` with
three `Choice` buttons) to the chat where the turn runs, or, for a group's or an `allowed`
chat's turn, to the owner's private chat naming that chat and the member, and waits. The
gateway hands each pressed button to `answer` after asking the one trust function whether
the presser is an owner: anyone else changes nothing. No answer within
`tools.exec_approval_timeout` is a Deny. A card whose turn ended (answered, timed out,
stopped, or the gateway restarted) is expired: pressing it runs nothing. Pending cards are
kept in a small JSON document, so a restart can tell a press on an old card that it expired.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from secrets import token_hex
from typing import Literal

from pydantic import BaseModel, Field

from clawgate.agent.session.records import ExecApproval
from clawgate.agent.tools.base import ToolContext
from clawgate.kernel.bus import Choice, OutboundMessage, Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.json_document import JsonDocument
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

Decision = Literal["once", "session", "deny", "timeout", "expired"]
Outbox = Callable[[OutboundMessage], Awaitable[None]]

# What the shell would chain, substitute, expand or redirect: never "one simple command".
_SHELL_CONTROL = re.compile(r"[;&|`$<>(){}\n\\*?\[\]~!]")
# Read-only commands run without asking under "risky", with their arguments inside the
# workspace (no absolute path, no `..`); a first word alone, or two for git.
READ_ONLY = frozenset({"ls", "cat", "grep", "head", "tail", "wc", "date", "pwd", "whoami"})
READ_ONLY_GIT = frozenset({"status", "log", "diff"})
CHOICE_PREFIX = "exec:"
LABELS = {"once": "Allow once", "session": "Allow for this session", "deny": "Deny"}
DENIED = "the owner denied this command"
TIMED_OUT = "the owner did not answer in time, so this command was denied"


def _simple_words(command: str) -> list[str] | None:
    if _SHELL_CONTROL.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words or None


def _read_only(words: list[str]) -> bool:
    name, args = words[0], words[1:]
    if name == "git":
        return bool(args) and args[0] in READ_ONLY_GIT and not any(a.startswith("-C") for a in args)
    if name not in READ_ONLY:
        return False
    # Inside the workspace: relative paths that never climb out of it.
    return not any(a.startswith("/") or ".." in a.split("/") for a in args)


def needs_approval(command: str, config: ToolsConfig) -> bool:
    """Whether `command` waits for the owner under `config.exec_approval`."""
    if config.exec_approval == "never":
        return False
    if config.exec_approval == "always":
        return True
    words = _simple_words(command.strip())
    if words is None:
        return True
    if _read_only(words):
        return False
    plain = " ".join(words)
    return not any(fnmatchcase(plain, pattern) for pattern in config.exec_allow)


@dataclass(frozen=True)
class ApprovalRequest:
    """What a card shows, and where the turn that asks runs."""

    command: str
    cwd: str
    reason: str
    session_key: str  # channel:chat of the turn
    trust: Trust
    sender_name: str = ""


class PendingCard(BaseModel):
    id: str
    session_key: str
    command: str
    cwd: str
    asked_at: str
    status: Literal["pending", "expired"] = "pending"


class PendingFile(BaseModel):
    cards: list[PendingCard] = Field(default_factory=list)


@dataclass
class _Waiting:
    card: PendingCard
    target: str  # channel:chat the card went to
    text: str  # what the card said there
    answer: asyncio.Future[tuple[Decision, str]] = field(repr=False)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ExecApprovals:
    """One agent's approval cards: sent, waited on, answered, expired."""

    def __init__(
        self,
        path: Path,
        *,
        outbox: Outbox | None,
        owner_chat: Callable[[], str],
        writer: DiskWriter | None = None,
    ) -> None:
        """`path`: the pending cards' document; `owner_chat()`: the owner's private chat
        (a session key, "" if none is known), where a shared chat's cards go."""
        self._doc = JsonDocument.of_model(path, PendingFile, writer=writer)
        self._outbox = outbox
        self._owner_chat = owner_chat
        self._waiting: dict[str, _Waiting] = {}
        # Commands the owner allowed for the rest of a session, by session key.
        self._session_allowed: dict[str, set[str]] = {}

    async def expire_leftovers(self) -> int:
        """At start: every card still pending belonged to a turn that is gone."""

        def expire(value: PendingFile) -> int:
            stale = [c for c in value.cards if c.status == "pending"]
            for card in stale:
                card.status = "expired"
            return len(stale)

        return await asyncio.to_thread(self._doc.update, expire)

    def pending(self) -> list[PendingCard]:
        """The cards waiting for the owner now, oldest first (the dashboard's list)."""
        return [w.card for w in self._waiting.values()]

    def pending_in(self, target: str) -> list[tuple[PendingCard, str]]:
        """The cards waiting in one chat (`channel:chat`), each with the text it was sent
        with, oldest first: a page drawn again shows them again."""
        return [(w.card, w.text) for w in self._waiting.values() if w.target == target]

    def allowed_for_session(self, session_key: str, command: str) -> bool:
        return command.strip() in self._session_allowed.get(session_key, set())

    def holds(self, choice: str) -> bool:
        """Whether a pressed button's id names one of this agent's cards, live or expired."""
        card_id = _card_id(choice)
        if card_id is None:
            return False
        return card_id in self._waiting or any(c.id == card_id for c in self._doc.load().cards)

    async def ask(self, request: ApprovalRequest, timeout: float) -> tuple[Decision, str]:
        """Send a card and wait for the owner: (decision, who). Cancelled with the turn."""
        target = await asyncio.to_thread(self._target, request)
        if self._outbox is None or not target:
            log.warning("%s: no owner chat to ask about exec; denied", request.session_key)
            return "deny", "nobody to ask"
        card = PendingCard(
            id=token_hex(6),
            session_key=request.session_key,
            command=request.command,
            cwd=request.cwd,
            asked_at=_now(),
        )
        text = _card_text(request)
        waiting = _Waiting(card, target, text, asyncio.get_running_loop().create_future())
        await asyncio.to_thread(self._doc.update, lambda v: v.cards.append(card))
        self._waiting[card.id] = waiting
        try:
            channel, chat_id = target.split(":", 1)
            await self._outbox(
                OutboundMessage(
                    channel=channel,
                    chat_id=chat_id,
                    text=text,
                    choices=tuple(
                        Choice(id=f"{CHOICE_PREFIX}{card.id}:{key}", label=label)
                        for key, label in LABELS.items()
                    ),
                    trust=Trust.OWNER,
                )
            )
            try:
                async with asyncio.timeout(timeout):
                    decision, who = await waiting.answer
            except TimeoutError:
                decision, who = "timeout", "timeout"
            if decision == "session":
                self._session_allowed.setdefault(request.session_key, set()).add(
                    request.command.strip()
                )
            return decision, who
        finally:
            del self._waiting[card.id]
            await asyncio.shield(asyncio.to_thread(self._forget, card.id))

    def _forget(self, card_id: str) -> None:
        def drop(value: PendingFile) -> None:
            value.cards = [c for c in value.cards if c.id != card_id]

        self._doc.update(drop)

    def answer(self, choice: str, who: str, *, by_owner: bool) -> str:
        """A pressed button; the line to show the presser. Only an owner's press counts."""
        card_id = _card_id(choice)
        key = choice.rsplit(":", 1)[-1]
        waiting = self._waiting.get(card_id or "")
        if waiting is None or waiting.answer.done():
            return "This approval has expired; nothing was run."
        if not by_owner:
            log.warning("exec approval %s: pressed by %s, who is not an owner", card_id, who)
            return "Only the owner can answer this."
        if key not in LABELS:
            return "Unknown answer."
        waiting.answer.set_result((key, who))  # type: ignore[arg-type]
        return f"{LABELS[key]}: {waiting.card.command}"

    def _target(self, request: ApprovalRequest) -> str:
        if request.trust.is_owner:
            return request.session_key
        return self._owner_chat()


def _card_id(choice: str) -> str | None:
    if not choice.startswith(CHOICE_PREFIX):
        return None
    parts = choice[len(CHOICE_PREFIX) :].split(":")
    return parts[0] if len(parts) == 2 else None


def _card_text(request: ApprovalRequest) -> str:
    lines = ["🔐 Run this command?", request.command, f"in {request.cwd}"]
    if not request.trust.is_owner:
        member = f" by {request.sender_name}" if request.sender_name else ""
        lines.append(f"asked in {request.session_key}{member}")
    if request.reason.strip():
        lines.append(f"why: {request.reason.strip()[:500]}")
    return "\n".join(lines)


def decision_result(decision: Decision) -> str:
    """The tool result the model gets when a command did not run."""
    return TIMED_OUT if decision == "timeout" else DENIED


NO_ONE_TO_ASK = (
    "Error: this command needs the owner's approval and there is no chat to ask in "
    "(allow it with tools.exec_allow, or set tools.exec_approval)"
)


def must_ask(command: str, ctx: ToolContext) -> bool:
    """A shared chat's command always waits for the owner unless `exec_in_groups` says
    its members may run commands unasked; the owner's follow the policy."""
    if not ctx.trust.is_owner and not ctx.config.exec_in_groups:
        return True
    return needs_approval(command, ctx.config)


async def approve(command: str, ctx: ToolContext) -> str | None:
    """None when `command` may run now; else the tool result saying why it did not. Asks the
    owner when the policy says so and records the decision in the session."""
    if not must_ask(command, ctx):
        return None
    approvals = ctx.approvals
    if approvals is None:
        return NO_ONE_TO_ASK
    cwd = str(ctx.root)
    if approvals.allowed_for_session(ctx.session_key, command):
        _record(ctx, command, cwd, "allowed", "session")
        return None
    request = ApprovalRequest(
        command=command,
        cwd=cwd,
        reason=ctx.reason,
        session_key=ctx.session_key,
        trust=ctx.trust,
        sender_name=ctx.sender_name,
    )
    decision, who = await approvals.ask(request, ctx.config.exec_approval_timeout)
    _record(ctx, command, cwd, decision, who)
    if decision in ("once", "session"):
        return None
    return decision_result(decision)


def _record(ctx: ToolContext, command: str, cwd: str, decision: str, who: str) -> None:
    if ctx.record is not None:
        ctx.record(ExecApproval(command=command, cwd=cwd, decision=decision, who=who))

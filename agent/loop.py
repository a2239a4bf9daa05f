"""The agent loop: one turn = persist the user's message, call the model, run tools, reply.

`handle` loads the session, applies the redelivery rules (agent/session/delivery.py: a
platform message id already stored is never stored again; its unsent reply is sent, its
unfinished turn finished) and answers a slash command through agent/commands.py without the
model. Otherwise `run_turn`:

1. appends the user's message (and a `State` record when its trust or chat facts changed),
   one write(), before the model is called;
2. runs the tool loop: the system prompt (agent/context.py), the history fitted into the
   window (`_fit`, agent/guard.py: flush turn, truncated tool results, compaction), a model
   call, tool calls through the registry; every assistant message and tool result is
   appended as it is produced, up to `agent.max_tool_iterations` model calls;
3. fsyncs the session once, at the end, and lets the consolidator schedule background work.

`agent.turn_timeout_seconds` bounds the whole turn: on expiry, as on /stop, every tool call
already started gets a result (so no call is left unpaired), a `TurnError` is recorded and
the user gets one line. Never stored as the model's words: an empty reply, an error, or our
own "stopped after N tool steps" note (those are `TurnError` records); inline base64 images
are replaced by a placeholder before storing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from clawgate.agent.commands import EMPTY_MESSAGE, CommandHandler, parse_command
from clawgate.agent.context import ContextBuilder
from clawgate.agent.guard import ContextGuard, truncate_tool_results
from clawgate.agent.llm import (
    ContextOverflow,
    LLMClient,
    LLMResponse,
    ModelMisconfigured,
    failure_reply,
)
from clawgate.agent.media import attach_images, image_parts, transcripts
from clawgate.agent.memory.consolidate import Consolidator
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.memory.tokens import estimate_messages
from clawgate.agent.progress import ProgressWatchers, TurnProgress
from clawgate.agent.session import (
    Command,
    Message,
    Session,
    SessionStore,
    Stopped,
    TurnError,
)
from clawgate.agent.session.delivery import Replay, command_ran, hand_out, replay, stopped
from clawgate.agent.spend.budget import Budget
from clawgate.agent.spend.scope import SCHEDULED, current, purpose_of_channel, tagged
from clawgate.agent.tools.approval import ExecApprovals
from clawgate.agent.tools.base import ToolContext
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.agent.usage import TurnUsage
from clawgate.kernel.bus import InboundMessage, OutboundMessage
from clawgate.kernel.config import Config
from clawgate.kernel.errors import ContextTooLarge, ModelUnavailable, OverBudget, one_line
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

# Puts a message on the outbound queue ahead of the reply (the send_file tool).
Outbox = Callable[[OutboundMessage], Awaitable[None]]

CANCELLED_RESULT = "[cancelled by /stop before this tool finished]"
TIMED_OUT_RESULT = "[cancelled: the turn reached its time limit before this tool finished]"
TURN_TIMED_OUT = (
    "I stopped: this turn took longer than its {limit:g} s limit. Your message is saved; "
    "ask again, perhaps for something smaller."
)
EMPTY_REPLY = "The model returned an empty reply. Your message is saved; please try again."
TOO_LONG = (
    "This conversation no longer fits the model's context window, even after compacting it. "
    "Send /new to start a fresh session (nothing is lost: the transcript is archived)."
)
FLUSH_PROMPT = (
    "[clawgate] This session is about to be compacted: older messages will be replaced by a "
    "summary. Before that, add anything worth remembering (facts, decisions, open tasks) "
    "to the daily log {path} with append_file (it creates the file if missing; never rewrite "
    "the log). Do not reply to the user; answer NO_REPLY when done."
)
FLUSH_MAX_STEPS = 4
NOT_SAVED = (
    "I can't save messages right now ({reason}: is the disk full or read-only?), so I did "
    "not answer this one. Please send it again once the disk is fixed."
)


@dataclass
class TurnResult:
    """What one turn produced, for the caller and for tests."""

    text: str
    is_error: bool = False
    seq: int | None = None  # seq of the persisted assistant reply, if any
    usage: dict[str, int] = field(default_factory=dict)
    silent: bool = False  # nothing to send (a budget notice the chat already had)


# The running turn's time limit, so a cancelled tool call's result can say why it stopped.
_turn_limit: ContextVar[asyncio.Timeout | None] = ContextVar("turn_limit", default=None)


class AgentLoop:
    """Runs turns for any session. Holds no per-session state beyond what SessionStore has."""

    def __init__(
        self,
        *,
        config: Config,
        sessions: SessionStore,
        llm: LLMClient,
        tools: ToolRegistry,
        context: ContextBuilder,
        writer: DiskWriter,
        commands: CommandHandler,
        consolidator: Consolidator,
        guard: ContextGuard,
        memory: MemoryStore,
        usage: TurnUsage,
        budget: Budget,
        outbox: Outbox | None = None,
        approvals: ExecApprovals | None = None,
    ) -> None:
        self.config = config
        self.sessions = sessions
        self.llm = llm
        self.tools = tools
        self.context = context
        self.writer = writer
        self.commands = commands
        self.consolidator = consolidator
        self.guard = guard
        self.memory = memory
        self.usage = usage
        self.budget = budget
        # None outside a gateway (benchmarks): send_file then says it cannot send.
        self.outbox = outbox
        self.approvals = approvals
        self._secrets = tuple(config.secrets())
        self._workspace = config.workspace.resolve()
        # Channels that show turns as they run (the web chat) register here.
        self.progress = ProgressWatchers(sessions.redact)

    async def handle(self, message: InboundMessage) -> OutboundMessage | None:
        """Answer one inbound message (a command or a model turn)."""
        session = await self.sessions.get(message.session_key)
        if message.message_id and stopped(session, message.message_id):
            log.info("%s: message %s was stopped by /stop", session.key, message.message_id)
            return None  # re-delivered after a restart: its turn is over
        command = parse_command(message.text)
        if command is not None:
            if message.message_id and command_ran(session, message.message_id):
                return None  # re-delivered after a restart: /new must not run twice
            text = await self.commands.run(command.name, command.arg, message, session)
            if message.message_id:
                current = await self.sessions.get(message.session_key)  # /new replaced it
                self.sessions.append(
                    current, Command(name=command[0], message_id=message.message_id)
                )
            return self._outbound(message, TurnResult(text))
        if not message.text.strip() and not message.media:
            return self._outbound(message, TurnResult(EMPTY_MESSAGE))
        if message.message_id and (seen := session.seq_of(message.message_id)) is not None:
            return await self._redelivered(message, session, seen)
        result = await self.run_turn(message, session)
        return self._outbound(message, result, session)

    async def record_stop(self, message: InboundMessage) -> None:
        """A /stop ended `message`'s turn (the dispatcher cancelled it): recorded, so neither a
        re-delivered copy nor the next start runs it again."""
        if not message.message_id:
            return
        session = await self.sessions.get(message.session_key)
        self.sessions.append(session, Stopped(message_id=message.message_id))
        await self.sessions.sync(session)

    async def _redelivered(
        self, message: InboundMessage, session: Session, user_seq: int
    ) -> OutboundMessage | None:
        """A message seen before (a channel re-delivered it after a restart): answer it at most
        once. Delivered -> nothing; replied but not sent -> send that reply; never finished ->
        finish the turn without storing the message again."""
        decision = replay(session, user_seq, message.message_id)
        if decision.action is Replay.ANSWERED:
            log.info("%s: message %s was already answered", session.key, message.message_id)
            return None
        if decision.action is Replay.SUPERSEDED:
            return None  # later messages were answered since; do not reopen an old turn
        if reply := decision.reply:  # replied, but the reply never left: send it now
            return self._outbound(message, TurnResult(reply.content, seq=reply.seq), session)
        result = await self._continue_turn(message, session)
        return self._outbound(message, result, session)

    def _outbound(
        self, message: InboundMessage, result: TurnResult, session: Session | None = None
    ) -> OutboundMessage | None:
        if result.silent:
            return None
        if session is not None and result.seq is not None:
            # Until the delivery record lands, this is what stops a re-delivered copy of the
            # message from sending the same reply a second time.
            hand_out(session, result.seq)
        return OutboundMessage(
            channel=message.channel,
            chat_id=message.chat_id,
            text=result.text,
            reply_to=message.message_id or None,
            is_error=result.is_error,
            seq=result.seq,
        )

    def _user_content(self, message: InboundMessage) -> str:
        if message.trust.value == "group" and message.sender_name:
            # In groups several people talk in one session: the model needs to know who spoke.
            return f"[{message.sender_name}] {message.text}"
        return message.text

    async def run_turn(self, message: InboundMessage, session: Session) -> TurnResult:
        """The model turn. The user's message is on disk before the model is called."""
        content = self._user_content(message)
        if message.media and self.config.agent.transcription_model:
            notes = await transcripts(
                self.llm, self.config.agent.transcription_model, self._workspace, message
            )
            content = "\n".join([content, *notes])
        user = Message(role="user", content=content, message_id=message.message_id or None)
        try:
            facts = message.facts
            if session.state.trust != message.trust or (
                facts is not None and session.state.chat != facts
            ):
                # Consolidation and archiving run later, without the message: they read the
                # trust here; replays and scheduled runs read the facts to decide it again.
                self.sessions.update_state(session, trust=message.trust, chat=facts)
            # One write() is enough to survive kill -9; the fsync comes once, at the end.
            self.sessions.append(session, user)
        except OSError as exc:
            return _not_saved(session, exc)
        return await self._continue_turn(message, session)

    async def _continue_turn(self, message: InboundMessage, session: Session) -> TurnResult:
        limit = self.config.agent.turn_timeout_seconds
        scope = asyncio.timeout(limit)
        _turn_limit.set(scope)
        progress = self.progress.for_turn(message)
        purpose = purpose_of_channel(message.channel)
        with session.pinned(), tagged(purpose, session_key=session.key, trust=message.trust):
            try:
                async with scope:
                    await self.budget.check(current(), self._model(message, session))
                    return await self._tool_loop(message, session, progress)
            except OverBudget as exc:
                return await self._over_budget(session, exc)
            except OSError as exc:
                if scope.expired():
                    # Whatever a tool was doing, the dispatcher's slot is free again.
                    log.warning("%s: turn stopped after %g s", session.key, limit)
                    self.sessions.append(session, TurnError(error="turn time limit reached"))
                    return TurnResult(TURN_TIMED_OUT.format(limit=limit), is_error=True)
                # A session write failed mid-turn (each append is all or nothing).
                return _not_saved(session, exc)
            finally:
                await self.sessions.sync(session)
                self.consolidator.maybe_schedule(session)
                if progress is not None:
                    await progress.ended()

    async def _tool_loop(
        self, message: InboundMessage, session: Session, progress: TurnProgress | None = None
    ) -> TurnResult:
        ctx = ToolContext(
            workspace=self._workspace,
            trust=message.trust,
            session_key=session.key,
            config=self.config.tools,
            secrets=self._secrets,
            writer=self.writer,
            memory_lock=self.memory.lock,
            channel=message.channel,
            chat_id=message.chat_id,
            outbox=self.outbox,
            approvals=self.approvals,
            sender_name=message.sender_name,
            record=lambda record: self.sessions.append(session, record),
        )
        try:
            ctx.make_root()
        except OSError as exc:
            # Not the turn's failure: each file tool reports its own error to the model.
            log.warning("%s: cannot create %s: %s", session.key, ctx.root, exc)
        images = await image_parts(self._workspace, message) if self.config.agent.vision else []
        schemas = self.tools.schemas(message.trust, self.config.tools) or None
        system = await self.context.system_prompt(
            trust=message.trust,
            session_key=session.key,
            now=datetime.now(UTC),
            incoming_text=message.text,
        )
        model = self._model(message, session)
        total: dict[str, int] = {}
        level = 0  # 0: as is; 1: tool results cut; 2: compacted (raised on each overflow)
        steps = 0
        while steps < self.config.agent.max_tool_iterations:
            try:
                messages = await self._fit(session, ctx, system, schemas, model, level)
                response = await self.llm.chat(
                    attach_images(messages, images),
                    tools=schemas,
                    model=model,
                    on_delta=progress.text if progress is not None else None,
                )
            except ContextOverflow as exc:
                log.warning(
                    "%s: provider reports overflow at level %d: %s", session.key, level, exc
                )
                level += 1
                if level <= 2:
                    continue
                return self._too_long(session)
            except ContextTooLarge as exc:
                log.warning("%s: %s", session.key, exc)
                return self._too_long(session)
            except OverBudget:
                raise
            except ModelUnavailable as exc:
                if images and not isinstance(exc, ModelMisconfigured):
                    # Most likely a model without vision: the text and file note still work.
                    log.warning("%s: retrying without images: %s", session.key, exc)
                    images = []
                    continue
                log.warning("%s: %s", session.key, exc)
                self.sessions.append(session, TurnError(error=str(exc)))
                return TurnResult(failure_reply(exc, message.trust), is_error=True)
            steps += 1
            level = 0  # a compaction that made room holds for the next step
            _add_usage(total, response)
            self.usage.record(session.key, total)
            if not response.tool_calls:
                return self._finish(session, response, total)
            await self._run_tool_calls(session, response, ctx, progress)
        note = (
            f"I stopped after {self.config.agent.max_tool_iterations} tool steps without "
            "finishing. Tell me to continue if you want me to go on."
        )
        self.sessions.append(session, TurnError(error="max_tool_iterations reached"))
        return TurnResult(note, is_error=False, usage=total)

    def _model(self, message: InboundMessage, session: Session) -> str:
        """Scheduled turns use `heartbeat.model` when set; chats their session's model."""
        scheduled = message.channel in SCHEDULED and self.config.heartbeat.model
        return scheduled or self.commands.model_for(session)

    async def _over_budget(self, session: Session, exc: OverBudget) -> TurnResult:
        """A cap stops this turn: the message stays stored, the chat hears it once, and
        later messages get no reply until the period rolls over."""
        log.info("%s: no model call: %s", session.key, exc)
        self.sessions.append(session, TurnError(error=f"over budget: {exc.key}"))
        if current().purpose in SCHEDULED:
            return TurnResult(str(exc), is_error=True)
        notice = await self.budget.chat_notice(exc)
        return TurnResult(notice or "", is_error=True, silent=notice is None)

    def _too_long(self, session: Session) -> TurnResult:
        self.sessions.append(session, TurnError(error="context window exceeded"))
        return TurnResult(TOO_LONG, is_error=True)

    async def _fit(
        self,
        session: Session,
        ctx: ToolContext,
        system: str,
        schemas: list[dict[str, Any]] | None,
        model: str,
        level: int,
    ) -> list[dict[str, Any]]:
        """The request for this step, brought under the context limit (see agent/guard.py)."""
        history = self.guard.history(session)
        messages = self.context.build_messages(system, history)
        estimate = estimate_messages(messages, schemas)
        if ctx.trust.is_owner and self.guard.flush_due(session, estimate):
            self.guard.mark_flushed(session)
            await self._flush(session, ctx, messages, schemas, model)
        if level == 0 and estimate <= self.guard.limit:
            return messages
        messages = self.context.build_messages(system, truncate_tool_results(history))
        if level <= 1 and estimate_messages(messages, schemas) <= self.guard.limit:
            return messages
        await self.guard.compact(session, model=model)
        messages = self.context.build_messages(
            system, truncate_tool_results(self.guard.history(session))
        )
        if estimate_messages(messages, schemas) > self.guard.limit:
            raise ContextTooLarge("the request is too large even after compaction")
        return messages

    async def _flush(
        self,
        session: Session,
        ctx: ToolContext,
        messages: list[dict[str, Any]],
        schemas: list[dict[str, Any]] | None,
        model: str,
    ) -> None:
        """A silent turn: the model saves what matters to the daily log; nothing it says is
        sent or stored in the session, only its file edits remain."""
        day = self.memory.now().date().isoformat()
        prompt = FLUSH_PROMPT.format(path=f"memory/{day}.md")
        scratch = [*truncate_tool_results(messages), {"role": "user", "content": prompt}]
        try:
            for _ in range(FLUSH_MAX_STEPS):
                with tagged("flush"):
                    response = await self.llm.chat(scratch, tools=schemas, model=model)
                if not response.tool_calls:
                    return
                scratch.append(
                    {
                        "role": "assistant",
                        "content": response.content or "",
                        "tool_calls": _calls(response),
                    }
                )
                for call in response.tool_calls:
                    result = await self.tools.execute(call.name, call.arguments, ctx)
                    scratch.append({"role": "tool", "tool_call_id": call.id, "content": result})
        except ModelUnavailable as exc:
            log.warning("%s: memory flush skipped: %s", session.key, exc)

    def _finish(self, session: Session, response: LLMResponse, usage: dict[str, int]) -> TurnResult:
        text = (response.content or "").strip()
        if not text:
            # Never store an empty reply as the model's: it poisons every later request.
            self.sessions.append(session, TurnError(error="empty reply"))
            return TurnResult(EMPTY_REPLY, is_error=True, usage=usage)
        stored = self.sessions.append(session, Message(role="assistant", content=text))
        return TurnResult(text, seq=stored.seq, usage=usage)

    async def _run_tool_calls(
        self,
        session: Session,
        response: LLMResponse,
        ctx: ToolContext,
        progress: TurnProgress | None = None,
    ) -> None:
        calls = _calls(response)
        self.sessions.append(
            session, Message(role="assistant", content=response.content or "", tool_calls=calls)
        )
        done: set[str] = set()
        ctx = replace(ctx, reason=response.content or "")  # an exec approval card shows it
        try:
            for call in response.tool_calls:
                if progress is not None:
                    await progress.tool_started(call)
                result = await self.tools.execute(call.name, call.arguments, ctx)
                self.sessions.append(
                    session,
                    Message(role="tool", tool_call_id=call.id, name=call.name, content=result),
                )
                done.add(call.id)
                if progress is not None:
                    await progress.tool_finished(call, result)
        except asyncio.CancelledError:
            # /stop or the turn's limit: keep every call paired with a result.
            limit = _turn_limit.get()
            note = TIMED_OUT_RESULT if limit is not None and limit.expired() else CANCELLED_RESULT
            for call in response.tool_calls:
                if call.id not in done:
                    stub = Message(role="tool", tool_call_id=call.id, name=call.name, content=note)
                    self.sessions.append(session, stub)
            raise


def _not_saved(session: Session, exc: OSError) -> TurnResult:
    """The disk refused a session write: say so plainly; the file keeps whole lines only."""
    log.error("%s: cannot write the session: %s", session.key, exc)
    return TurnResult(NOT_SAVED.format(reason=one_line(exc)), is_error=True)


def _add_usage(total: dict[str, int], response: LLMResponse) -> None:
    for name, value in response.usage.items():
        if isinstance(value, int):
            total[name] = total.get(name, 0) + value


def _calls(response: LLMResponse) -> list[dict[str, Any]]:
    """The response's tool calls as an assistant message carries them."""
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in response.tool_calls
    ]

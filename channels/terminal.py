"""The terminal channel: `clawgate agent` as a one-shot, a line-per-message pipe, or a chat.

`Terminal` is the person's side: it reads lines (also while a turn runs), sends them over a
`TerminalLink` and prints the replies. The link is `TerminalChannel` when this process runs
the agent itself, or the running gateway's control socket (gateway/daemon/control.py), so both
behave alike. `/stop` or Ctrl-C cancels the running turn; a second Ctrl-C quits.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import itertools
import signal
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Protocol, TextIO

from clawgate.channels.base import Channel
from clawgate.kernel.bus import Choice, InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.errors import ChannelError

PROMPT = "you> "
# A card's buttons as a y/N question: the first choice is "yes", one whose id ends in
# ":session" is "s"; anything else (Enter included) picks the last one, the safe answer.
CARD_QUESTION = "[y] allow once, [s] for this session, [N] deny: "
SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
SPINNER_SECONDS = 0.1
INTERRUPTED = 130  # the shell's code for a run ended by SIGINT


class TerminalLink(Protocol):
    """Where a terminal's messages go and its replies come from (each reply carries the id
    of the message it answers in `reply_to`)."""

    async def say(self, text: str, message_id: str, sender: str) -> None: ...

    async def next_reply(self) -> OutboundMessage: ...

    async def choose(self, choice: str, message_id: str) -> None:
        """Press a button of a card (an exec approval): its `Choice.id`."""


class TerminalChannel(Channel):
    """The in-process link. Session key `cli:<name>`, always owner trust: whoever has the
    terminal owns the box."""

    name = "cli"

    def __init__(self, bus: MessageBus, session_name: str = "default") -> None:
        super().__init__(bus)
        self.chat_id = session_name
        self._replies: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self._replies.put_nowait(message)

    async def say(self, text: str, message_id: str, sender: str) -> None:
        await self.bus.publish_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=self.chat_id,
                message_id=message_id,
                sender_id="local",
                sender_name=sender,
                text=text,
                trust=Trust.OWNER,
                mentioned=True,
            )
        )

    async def next_reply(self) -> OutboundMessage:
        return await self._replies.get()

    async def choose(self, choice: str, message_id: str) -> None:
        await self.bus.publish_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=self.chat_id,
                message_id=message_id,
                sender_id="local",
                trust=Trust.OWNER,
                choice=choice,
            )
        )


class Terminal:
    """One person at a terminal, over a link.

    Every message sent waits for exactly one reply, in order. The one exception is the turn
    a `/stop` cancels: it gets no reply, the `/stop` gets "Stopped." instead - so a reply to
    a `/stop` settles the oldest message still waiting before it.
    """

    def __init__(
        self,
        link: TerminalLink,
        output: TextIO | None = None,
        errors: TextIO | None = None,
        *,
        spinner: bool | None = None,
    ) -> None:
        self.link = link
        self.output = output or sys.stdout
        self.errors = errors or sys.stderr
        # Only a person watching a terminal wants the animation; a pipe gets plain lines.
        self.spinner = self.output.isatty() if spinner is None else spinner
        self.failed = 0
        self._waiting: deque[tuple[str, bool]] = deque()  # (message id, is a /stop)
        self._events: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        self._stop_sent = False
        self._armed = False
        self._sender = _user_name()
        self._reading: asyncio.Task[None] | None = None
        self._card: tuple[Choice, ...] = ()  # the buttons the next line answers

    async def one_shot(self, text: str) -> int:
        if not text.strip():
            # Blank, as an empty line at the prompt is: nothing for the model to answer.
            print("(nothing to send: the message is empty)", file=self.output, flush=True)
            return 0
        await self._send(text)
        return await self._converse(reading=False)

    async def pipe(self, source: TextIO) -> int:
        """One message per input line; each reply is printed as soon as it is ready; ends
        once every line is answered after the end of input."""
        self._read_lines(lambda: source.readline() or None)
        return await self._converse(reading=True)

    async def interactive(self) -> int:
        try:
            import readline  # noqa: F401  (gives input() line editing and history)
        except ImportError:
            pass
        print(
            "clawgate chat - /help for commands, /stop or Ctrl-C cancels a reply, Ctrl-D quits.",
            file=self.output,
        )
        with _terminal_restored():
            self._read_lines(_prompted_input)
            code = await self._converse(reading=True, prompt=True)
        if code == 0:
            print(file=self.output)
        return code

    # -- the conversation --------------------------------------------------------------------

    def _read_lines(self, read: Callable[[], str | None]) -> None:
        async def pump() -> None:
            try:
                while (line := await _read_blocking(read)) is not None:
                    self._events.put_nowait(("line", line.rstrip("\n")))
            except (OSError, ValueError):
                pass  # input closed under us: as good as its end
            self._events.put_nowait(("eof", None))

        self._reading = asyncio.create_task(pump(), name="terminal input")

    async def _converse(self, *, reading: bool, prompt: bool = False) -> int:
        replies = asyncio.create_task(self._pump_replies(), name="terminal replies")
        spinning = asyncio.create_task(self._spin(), name="spinner") if self.spinner else None
        try:
            with self._interrupts():
                while reading or self._waiting:
                    kind, value = await self._events.get()
                    if kind == "line" and isinstance(value, str) and self._card:
                        await self._answer_card(value)
                    elif kind == "line" and isinstance(value, str) and value.strip():
                        self._armed = False
                        await self._send(value)
                    elif kind == "eof":
                        reading = False
                    elif kind == "reply" and isinstance(value, OutboundMessage):
                        self._show(value, prompt=prompt)
                    elif kind == "lost":
                        self._clear_line()
                        print(f"clawgate: {value}", file=self.errors, flush=True)
                        return 1
                    elif kind == "interrupt":
                        if self._armed:
                            self._clear_line()
                            print(file=self.output, flush=True)
                            return INTERRUPTED
                        # Armed until the next line: a second Ctrl-C quits.
                        self._armed = True
                        if self._waiting:
                            await self._send("/stop")
                        else:
                            self._clear_line()
                            lead = "" if self.spinner else "\n"
                            print(f"{lead}(Ctrl-C again to quit)", file=self.output, flush=True)
                            if prompt:
                                print(PROMPT, end="", file=self.output, flush=True)
            return 1 if self.failed else 0
        finally:
            for task in (replies, spinning, self._reading):
                if task is not None:
                    task.cancel()

    async def _send(self, text: str) -> None:
        message_id = uuid.uuid4().hex  # unique across runs: the agent de-duplicates by id
        is_stop = text.split(maxsplit=1)[0].lower().partition("@")[0] == "/stop"
        self._waiting.append((message_id, is_stop))
        if is_stop:
            self._stop_sent = True
        try:
            await self.link.say(text, message_id, self._sender)
        except ChannelError as exc:
            self._events.put_nowait(("lost", exc))

    async def _answer_card(self, line: str) -> None:
        card, self._card = self._card, ()
        word = line.strip().lower()
        chosen = card[-1]
        if word in ("y", "yes"):
            chosen = card[0]
        elif word in ("s", "session"):
            chosen = next((c for c in card if c.id.endswith(":session")), card[-1])
        try:
            await self.link.choose(chosen.id, uuid.uuid4().hex)
        except ChannelError as exc:
            self._events.put_nowait(("lost", exc))

    async def _pump_replies(self) -> None:
        while True:
            try:
                reply = await self.link.next_reply()
            except ChannelError as exc:
                self._events.put_nowait(("lost", exc))
                return
            self._events.put_nowait(("reply", reply))

    def _show(self, reply: OutboundMessage, *, prompt: bool) -> None:
        self._clear_line()
        print(reply.text, file=self.errors if reply.is_error else self.output, flush=True)
        if reply.choices:
            self._card = reply.choices
            print(CARD_QUESTION, end="", file=self.output, flush=True)
            if self._reading is None:  # a one-shot reads its answer from stdin
                self._read_lines(sys.stdin.readline)
        if reply.is_error:
            self.failed += 1
        self._settle(reply.reply_to)
        if prompt and self.spinner and not self._waiting:
            # input() printed its prompt as the turn began, and the spinner drew over it.
            print(PROMPT, end="", file=self.output, flush=True)

    def _settle(self, answered: str | None) -> None:
        ids = [message_id for message_id, _ in self._waiting]
        if answered not in ids:
            return  # a notice or a file: it answers nothing in particular
        position = ids.index(answered)
        _, was_stop = self._waiting[position]
        del self._waiting[position]
        if was_stop:
            self._stop_sent = any(stop for _, stop in self._waiting)
            # The turn it cancelled never answers: the oldest message waiting before it.
            earlier = [i for i, (_, stop) in enumerate(self._waiting) if i < position and not stop]
            if earlier:
                del self._waiting[earlier[0]]

    async def _spin(self) -> None:
        for frame in itertools.cycle(SPINNER_FRAMES):
            if self._waiting:
                hint = "stopping" if self._stop_sent else "thinking (/stop or Ctrl-C to cancel)"
                self.output.write(f"\r{frame} {hint}\x1b[K")
                self.output.flush()
            await asyncio.sleep(SPINNER_SECONDS)

    def _clear_line(self) -> None:
        if self.spinner:
            self.output.write("\r\x1b[K")
            self.output.flush()

    @contextlib.contextmanager
    def _interrupts(self) -> Iterator[None]:
        """Ctrl-C becomes an event: it stops the turn, or quits when nothing runs."""
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._events.put_nowait, ("interrupt", None))
        except (ValueError, RuntimeError, NotImplementedError):
            yield  # not the main thread (an embedding program): Ctrl-C keeps its meaning
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


def _prompted_input() -> str | None:
    try:
        return input(PROMPT)
    except EOFError:
        return None


@contextlib.contextmanager
def _terminal_restored() -> Iterator[None]:
    """Quitting while readline waits in its thread would leave the terminal without echo."""
    try:
        import termios

        saved = termios.tcgetattr(sys.stdin.fileno())
    except (ImportError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


async def _read_blocking(read: Callable[[], str | None]) -> str | None:
    """Run a blocking terminal read in a daemon thread.

    Not asyncio.to_thread: asyncio.run joins the default executor on exit, so quitting while
    the prompt waits would hang until the user pressed Enter.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def settle(result: str | None, error: Exception | None) -> None:
        if future.done():  # the awaiting task was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        try:
            outcome: tuple[str | None, Exception | None] = (read(), None)
        except Exception as exc:
            outcome = (None, exc)
        # The loop may already be closed if the program is exiting.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name="terminal-read", daemon=True).start()
    return await future


def _user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "owner"

"""The terminal channel: `clawgate agent` as a one-shot, a line-per-message pipe, or a chat."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import TextIO

from clawgate.channels.base import Channel
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust

WaitIdle = Callable[[], Awaitable[object]]


class TerminalChannel(Channel):
    """Session key `cli:<name>`, always owner trust: whoever has the terminal owns the box."""

    name = "cli"

    def __init__(
        self, bus: MessageBus, session_name: str = "default", output: TextIO | None = None
    ) -> None:
        super().__init__(bus)
        self.chat_id = session_name
        self.output = output or sys.stdout
        self.errors = 0
        self.replies: asyncio.Queue[OutboundMessage] = asyncio.Queue()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        stream = sys.stderr if message.is_error else self.output
        print(message.text, file=stream, flush=True)
        if message.is_error:
            self.errors += 1
        self.replies.put_nowait(message)

    async def say(self, text: str) -> None:
        await self.bus.publish_inbound(
            InboundMessage(
                channel=self.name,
                chat_id=self.chat_id,
                # Unique across runs: the agent de-duplicates by message id per session.
                message_id=uuid.uuid4().hex,
                sender_id="local",
                sender_name=_user_name(),
                text=text,
                trust=Trust.OWNER,
                mentioned=True,
            )
        )

    async def one_shot(self, text: str) -> int:
        await self.say(text)
        await self.replies.get()
        return 1 if self.errors else 0

    async def pipe(self, source: TextIO, wait_idle: WaitIdle) -> int:
        """One message per input line; each reply is printed as soon as it is ready."""
        while True:
            line = await _read_blocking(source.readline)
            if not line:
                break
            if line.strip():
                await self.say(line.rstrip("\n"))
        await wait_idle()
        return 1 if self.errors else 0

    async def interactive(self) -> int:
        try:
            import readline  # noqa: F401  (gives input() line editing and history)
        except ImportError:
            pass
        print("clawgate chat - /help for commands, Ctrl-D to quit.", file=self.output)
        while True:
            try:
                line = await _read_blocking(lambda: input("you> "))
            except EOFError:
                print(file=self.output)
                return 0
            if line.strip():
                await self.say(line)
                await self.replies.get()


async def _read_blocking(read: Callable[[], str]) -> str:
    """Run a blocking terminal read in a daemon thread.

    Not asyncio.to_thread: asyncio.run joins the default executor on exit, so Ctrl-C at the
    prompt would hang until the user pressed Enter.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str] = loop.create_future()

    def settle(result: str | None, error: Exception | None) -> None:
        if future.done():  # the awaiting task was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or "")

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

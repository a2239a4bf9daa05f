"""An agent runtime that dies at its Nth write, for the unit-of-work tests of consolidation.

`DyingDisk` is a kernel DiskWriter that counts every write once armed (append, replace,
mkdir and move through `_check`, and fsync) and dies at the Nth: in-process it raises
`Killed` for that write and every later one (nothing runs after a kill -9); with
`sigkill=True` it sends SIGKILL to its own process instead.

Run as a child process (`python -m tests.dying_agent CONFIG AT`), it starts the runtime as the
gateway does (`AgentRuntime.start`: resumed archives, recovered entries), then, armed, is sent
`/new` in the chat `test:1` and waits for the archive. AT = 0 never dies: that is a restart,
in which `/new` arrives again as a channel re-delivers it after a crash.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import Message, SessionStore, State
from clawgate.kernel.bus import InboundMessage, Trust
from clawgate.kernel.config import Config, load_config
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import Reply, text, tool_call

KEY = "test:1"
MEMORY = "# Memory\n"
FACT = "- Ann plans Lisbon in May\n"
ENTRY = "Ann planned the Lisbon trip."
DRAIN = 60.0


class Killed(BaseException):
    """The process died here (a BaseException, so no `except Exception` survives it)."""


class DyingDisk(DiskWriter):
    def __init__(self, at: int | None = None, *, sigkill: bool = False) -> None:
        super().__init__()
        self.at = at
        self.sigkill = sigkill
        self.armed = False
        self.dead = False
        self.writes: list[tuple[str, str]] = []  # (kind, file name) once armed

    def _step(self, kind: str, path: Path) -> None:
        if self.dead:
            raise Killed(f"{kind} {path.name} after death")
        if not self.armed:
            return
        self.writes.append((kind, path.name))
        if self.at is not None and len(self.writes) >= self.at:
            self.dead = True
            if self.sigkill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise Killed(f"{kind} {path.name}")

    def _check(self, path: Path) -> None:
        self._step("write", path)

    def fsync(self, path: Path) -> None:
        self._step("fsync", path)
        super().fsync(path)


def answer(body: dict) -> Reply:  # type: ignore[type-arg]
    """The model: a save_memory call adding one fact, whatever MEMORY.md holds now."""
    if any(t["function"]["name"] == "save_memory" for t in body.get("tools") or []):
        return tool_call("save_memory", history_entry=ENTRY, memory_update=MEMORY + FACT)
    return text("ok")


async def prepare(config: Config, count: int = 10) -> None:
    """The owner's session `test:1` with `count` messages, and a MEMORY.md with no facts."""
    sessions = SessionStore(config.workspace / "sessions")
    session = await sessions.get(KEY)
    sessions.append(session, State(trust=Trust.OWNER.value))
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        sessions.append(session, Message(role=role, content=f"message {i} about Lisbon"))
    await sessions.sync(session)
    (config.workspace / "memory").mkdir(parents=True, exist_ok=True)
    (config.workspace / "memory" / "MEMORY.md").write_text(MEMORY, encoding="utf-8")


def new_command() -> InboundMessage:
    # One message id: a re-delivered /new is recognised and never archives twice.
    return InboundMessage(
        channel="test",
        chat_id="1",
        message_id="new-1",
        sender_id="ann",
        sender_name="Ann",
        text="/new",
        trust=Trust.OWNER,
    )


async def archive_run(config: Config, disk: DiskWriter) -> None:
    """Start as the gateway does, then (armed) /new and its archive, then a graceful close."""
    runtime = AgentRuntime.build(config, writer=disk)
    try:
        await runtime.start()
        await runtime.consolidator.drain(DRAIN)
        if isinstance(disk, DyingDisk):
            disk.armed = True
        await runtime.loop.handle(new_command())
        await runtime.consolidator.drain(DRAIN)
    finally:
        await runtime.close()


def main() -> None:
    config_path, at = Path(sys.argv[1]), int(sys.argv[2])
    disk = DyingDisk(at or None, sigkill=True)
    asyncio.run(archive_run(load_config(config_path), disk))


if __name__ == "__main__":
    main()

"""Scripting the model's side of memory consolidation: spotting the consolidation request and
answering it with a save_memory call; writing a workspace's memory file as the owner would."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clawgate.agent.llm import LLMClient
from clawgate.agent.memory.consolidate import Consolidator
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import Message, Session, SessionStore, State
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import ToolCalls, tool_call


def write_memory_file(workspace: Path, name: str, body: str) -> None:
    """`memory/<name>` with `body`, its mtime moved on so the index sees the change even
    within the file system's timestamp granularity."""
    path = workspace / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    stamp = path.stat().st_mtime_ns + 1_000_000
    os.utime(path, ns=(stamp, stamp))


def is_consolidation(request: dict[str, Any]) -> bool:
    return any(t["function"]["name"] == "save_memory" for t in request.get("tools") or [])


def save(entry: str = "Ann planned the Lisbon trip.", memory: str | None = None) -> ToolCalls:
    args = {"history_entry": entry}
    if memory is not None:
        args["memory_update"] = memory
    return tool_call("save_memory", **args)


async def owner_session(
    tmp_path: Path,
    key: str = "test:1",
    count: int = 10,
    trust: Trust = Trust.OWNER,
    cache_size: int = 256,
) -> tuple[SessionStore, Session]:
    """A session with `count` alternating user/assistant messages about Lisbon."""
    sessions = SessionStore(tmp_path / "workspace" / "sessions", cache_size=cache_size)
    session = await sessions.get(key)
    sessions.append(session, State(trust=trust.value))
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        sessions.append(session, Message(role=role, content=f"message {i} about Lisbon"))
    return sessions, session


def make_consolidator(
    tmp_path: Path,
    sessions: SessionStore,
    agent_config: AgentConfig,
    make_client: Callable[..., LLMClient],
    **kwargs: Any,
) -> tuple[MemoryStore, Consolidator]:
    """A MemoryStore and a Consolidator (window 6, no model retries) over the workspace; its
    model client from `make_client` (the fixture), which closes it."""
    (tmp_path / "workspace" / "memory").mkdir(parents=True, exist_ok=True)
    store = MemoryStore(tmp_path / "workspace", writer=kwargs.pop("writer", DiskWriter()))
    agent_config.max_retries = 0
    llm = make_client(agent_config)
    return store, Consolidator(store=store, sessions=sessions, llm=llm, memory_window=6, **kwargs)

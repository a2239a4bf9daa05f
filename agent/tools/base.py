"""What every tool is made of: its parameter model, the context a call runs in, its errors.

A tool declares its arguments once, as a pydantic model named `Params` (a `ToolParams`
subclass). The schema the model sees is `Params.model_json_schema()` and the registry
checks the model's arguments with the same class, so the two cannot disagree:

    class ReadFile(Tool["ReadFile.Params"]):
        name = "read_file"
        description = "Read a text file."

        class Params(ToolParams):
            path: str = Field(description="The file to read")

        async def run(self, params: Params, ctx: ToolContext) -> str:
            ...
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.session.records import ExecApproval
from clawgate.kernel.areas import chat_area
from clawgate.kernel.bus import OutboundMessage, Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from clawgate.agent.tools.approval import ExecApprovals


def _without_titles(schema: dict[str, Any]) -> None:
    # pydantic titles every model and field ("Path" for path): noise in every request.
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)


class ToolParams(BaseModel):
    """Base of every tool's `Params`: JSON types taken strictly (`"3"` is not an integer, `true`
    is not 1), unknown keys ignored (models add stray ones), a schema without titles."""

    model_config = ConfigDict(
        strict=True, extra="ignore", frozen=True, json_schema_extra=_without_titles
    )


P = TypeVar("P", bound=ToolParams)


@dataclass(frozen=True)
class ToolContext:
    """Everything one tool call may use; built per turn by the agent loop."""

    workspace: Path  # absolute, resolved
    trust: Trust
    session_key: str
    config: ToolsConfig
    secrets: tuple[str, ...]  # values to scrub from tool output and from the exec environment
    writer: DiskWriter
    # The workspace's one memory lock (the MemoryStore's): every write to a memory file holds it.
    memory_lock: MemoryLock
    # Where the conversation is, and how to send something there before the reply (send_file).
    channel: str = ""
    chat_id: str = ""
    outbox: Callable[[OutboundMessage], Awaitable[None]] | None = None
    # What read_file saw this turn (sha-256 by resolved path), so write_file can refuse to
    # overwrite a file that changed since (files.py).
    reads: dict[Path, str] = field(default_factory=dict, compare=False, repr=False)
    # Exec approvals (agent/tools/approval.py; None outside a gateway: a command that needs
    # the owner's yes is then refused), who is talking, why the model calls now (its text),
    # and where each decision is recorded (the session file).
    approvals: ExecApprovals | None = None
    sender_name: str = ""
    reason: str = ""
    record: Callable[[ExecApproval], object] | None = None

    @property
    def root(self) -> Path:
        """Where relative paths start: the workspace for owners, the chat's own area
        `public/<chat>/` for others (kernel.areas)."""
        return (
            self.workspace if self.trust.is_owner else self.workspace / chat_area(self.session_key)
        )

    def make_root(self) -> None:
        """Create a non-owner's `root` (its chat area) if missing: the loop does it once per turn,
        before any tool runs. (The workspace, an owner's root, exists from the start.)"""
        if not self.trust.is_owner and not self.root.is_dir():
            # Private like every other folder: the gateway's user is the only one reading it.
            self.writer.mkdir(self.root, mode=0o700)

    @cached_property
    def redact(self) -> Redactor:
        """Scrubs this turn's secrets from text; built once per context."""
        return Redactor(self.secrets)


class Tool(ABC, Generic[P]):
    """One function the model can call: a name, a description, a `Params` model and `run`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Params: type[P]

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        """Whether the model sees this tool at all for a session of this trust."""
        return True

    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments the model sees: the `Params` model's (an MCP
        server's tool has its own). A fresh dict each call: a path may adapt it in place."""
        return json.loads(_schema_text(self.Params))

    @abstractmethod
    async def run(self, params: P, ctx: ToolContext) -> str:
        """Do the work with checked arguments; raise ToolError for what the model should fix."""


@functools.cache
def _schema_text(params: type[BaseModel]) -> str:
    """A `Params` model's JSON schema, generated once a process: pydantic takes ~3 ms a
    model, and every runtime built (each agent, each restart in a test) asks for every tool's."""
    return json.dumps(params.model_json_schema())

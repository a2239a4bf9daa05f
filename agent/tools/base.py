"""What every tool is made of: the `Tool` interface, the context a call runs in, its errors."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from clawgate.kernel.bus import OutboundMessage, Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.storage import DiskWriter

REDACTED = "[redacted]"
PUBLIC_DIR = "public"


class ToolError(Exception):
    """A failure the model caused or can fix; its message goes back to the model as text.

    The message always starts with "Error: " so every failure reads the same to the model.
    """

    def __init__(self, message: str) -> None:
        if not message.startswith("Error: "):
            message = f"Error: {message}"
        super().__init__(message)

    @property
    def message(self) -> str:
        return str(self)


class PathOutsideWorkspace(ToolError):
    """A path that resolves outside the folder this session may reach."""


@dataclass(frozen=True)
class ToolContext:
    """Everything one tool call may use; built per turn by the agent loop."""

    workspace: Path  # absolute, resolved
    trust: Trust
    session_key: str
    config: ToolsConfig
    secrets: tuple[str, ...]  # values to scrub from tool output and from the exec environment
    writer: DiskWriter
    # Where the conversation is, and how to send something there before the reply (send_file).
    channel: str = ""
    chat_id: str = ""
    outbox: Callable[[OutboundMessage], Awaitable[None]] | None = None

    @property
    def root(self) -> Path:
        """The folder file tools are confined to: the workspace for owners, public/ for others."""
        return self.workspace if self.trust.is_owner else self.workspace / PUBLIC_DIR

    def make_root(self) -> None:
        """Create a non-owner's `root` (public/) if missing: the loop does it once per turn,
        before any tool runs. (The workspace, an owner's root, exists from the start.)"""
        if not self.trust.is_owner and not self.root.is_dir():
            # Only shared files live in public/, so they are readable by the owner's other tools.
            self.writer.mkdir(self.root, mode=0o755)


class Tool(ABC):
    """One function the model can call. Subclasses set the three class attributes."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]  # JSON schema: type object, properties, required

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        """Whether the model sees this tool at all for a session of this trust."""
        return True

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        """Do the work; raise ToolError for anything the model should read and fix."""


def describe_os_error(exc: OSError) -> str:
    """`No space left on device` rather than `[Errno 28] No space left on device: '/x/y'`."""
    return exc.strerror or str(exc) or type(exc).__name__


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret value in `text` with a marker."""
    # Longest first, so a secret that contains a shorter one is removed whole.
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text

"""Every exception of the project, in one hierarchy, in this one module.

    ClawgateError                   str(exc) is one line a person can act on
     ├── ConfigError                a bad config file, key or environment variable
     ├── StorageError               a file that matters could not be written or read
     │    ├── LockHeld              another process holds a lock that is not waited for
     │    │    └── AlreadyRunning   another gateway or agent owns this data_dir (names its pid)
     │    ├── DocumentDamaged       a JSON document (json_document.py) is not JSON or misshapen
     │    └── MoveRefused           a backup that fails its checks, a restore onto a live install
     ├── PathOutsideRoot            a path escapes the folder it is confined to
     │    ├── ReadOnlyPath          a write to `public/shared/` from a chat that may only read it
     │    └── PathOutsideWorkspace  (also a ToolError) a tool's path outside its session's reach
     ├── ChannelError               a chat platform adapter cannot start or send
     │    └── CredentialsRejected   the platform refused the bot's token
     ├── PairingError               pairing.json or a pairing command
     ├── CronError                  a job definition or jobs.json
     ├── ClusterError               the cluster's database: unreachable, refused, no driver
     │    └── Fenced                a table write refused: the writer's lease is not current
     └── ModelError                 the model endpoint
          └── ModelUnavailable      unreachable, refused, or out of retries
               ├── ContextOverflow      the provider says the request exceeds the window
               ├── ModelMisconfigured   a key, model name or api_base is wrong
               └── OverBudget           a spend cap is reached: no call until it rolls over

    Exception                       outcomes handled where they happen, never shown raw
     ├── ToolError                  the model caused it; "Error: ..." goes back to the model
     ├── ContextTooLarge            a request too large even after cutting and compacting
     ├── ConsolidationRefused       the model's consolidation answer was unusable
     ├── Retry                      an attempt failed transiently (retry.py retries it)
     └── RetriesExhausted           every attempt raised Retry

    ValueError
     ├── SkillFormatError           a SKILL.md whose front matter cannot be used (skipped)
     └── ModelFolderError           a folder that holds no BERT model the loader can read

Internal signals of the model layer stay beside the code that raises and catches them and
never leave it: `NextModel` (agent/llm/failures.py: try the fallback model), `StreamCut`
(agent/llm/stream.py), `HTTPFailure` (agent/llm/direct.py) and `FunctionFailure`
(agent/llm/function.py: a scripted model failing as a provider's HTTP status would, which
the model layer classifies like any other failure). So do a few more, each caught one module
away and never shown raw: `SandboxMissing` (agent/tools/sandbox.py, a ToolError: bwrap is
configured but not installed), `AddressRefused` (agent/tools/web_guard.py, an OSError so
aiohttp's connector carries it: web_fetch reached for an address that is not public),
`SlowDown` (channels/live.py: the platform refused an edit for now) and `ReactionRefused`
(channels/reactions.py: the chat does not let the bot react). Platform libraries' own
exceptions (python-telegram-bot, discord.py) are caught at the channel and become
ChannelError or Retry.

The CLI catches `ClawgateError` in one place and prints `one_line(exc)`; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError


class ClawgateError(Exception):
    """Base of every error a user, a platform or a disk can cause."""


class ConfigError(ClawgateError):
    pass


class StorageError(ClawgateError):
    pass


class LockHeld(StorageError):
    pass


class AlreadyRunning(LockHeld):
    """Another process owns this data_dir; the message names its pid."""


class DocumentDamaged(StorageError):
    """A JSON document (json_document.py) that is not what it should be: not JSON, or the
    wrong shape. `problem` says what, without the path."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class MoveRefused(StorageError):
    """A backup, restore, export or import that would lose or overwrite something: a damaged
    archive, a target that is not empty or where a gateway runs."""


class PathOutsideRoot(ClawgateError):
    pass


class ReadOnlyPath(PathOutsideRoot):
    """A write to `shared/` from a session that may only read it."""


class ChannelError(ClawgateError):
    pass


class CredentialsRejected(ChannelError):
    """The platform refused the bot's token: no retry helps until a person changes it."""


class PairingError(ClawgateError):
    pass


class CronError(ClawgateError):
    pass


class ClusterError(ClawgateError):
    pass


class Fenced(ClusterError):
    """A write to the cluster's inbound or outbound table refused because the writer's lease
    (worker and generation) is no longer current (gateway/cluster/queues.py)."""


class ModelError(ClawgateError):
    pass


class ModelUnavailable(ModelError):
    pass


class ContextOverflow(ModelUnavailable):
    """The provider says the request exceeds the model's context window; retrying cannot help."""


class ModelMisconfigured(ModelUnavailable):
    """A setting is wrong (key, model name, api_base): waiting and retrying cannot help."""


class OverBudget(ModelUnavailable):
    """A budget cap (agent/spend/budget.py) stops model calls for the call's scope; `key`
    names the cap and period ("daily_usd:2026-12-05", "per_chat_daily_usd:...:telegram:1")."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


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


class PathOutsideWorkspace(ToolError, PathOutsideRoot):
    """A path that resolves outside the folder this session may reach."""


class ContextTooLarge(Exception):
    """Even after cutting and compacting, the request does not fit."""


class ConsolidationRefused(Exception):
    """The model's answer was unusable; nothing was written."""


class Retry(Exception):
    """Raised by an attempt that failed transiently; `after` is the delay a server asked for."""

    def __init__(self, reason: str, after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.after = after


class RetriesExhausted(Exception):
    """Every attempt raised `Retry`; `last` is the final one."""

    def __init__(self, attempts: int, last: Retry) -> None:
        super().__init__(f"{last.reason} (after {tries(attempts)})")
        self.attempts = attempts
        self.last = last


class SkillFormatError(ValueError):
    """A SKILL.md whose front matter cannot be used; the skill is skipped, not fatal."""


class ModelFolderError(ValueError):
    """The folder does not hold a BERT model this loader can read."""


def tries(count: int) -> str:
    """ "1 attempt", "3 attempts": how many times something was tried, for a message."""
    return "1 attempt" if count == 1 else f"{count} attempts"


def one_line(exc: BaseException, *, limit: int = 300) -> str:
    """The exception as one line for a person: whitespace folded, never empty, bounded."""
    if isinstance(exc, OSError) and exc.strerror:
        # `No space left on device` rather than `[Errno 28] No space left on device: '/x'`.
        text = exc.strerror
    else:
        text = " ".join(str(exc).split())
    text = text or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_validation(error: ValidationError, *, whole: str = "value") -> str:
    """The first problem pydantic found, as `invalid value for 'a.b': ...` (one line);
    `whole` names the thing when the problem is not under a key."""
    first = error.errors()[0]
    # A key can hold any character (TOML quoted keys): escape it so the message stays one line.
    key = ".".join(str(p) for p in first["loc"]).encode("unicode_escape").decode() or whole
    if first["type"] == "extra_forbidden":
        return f"unknown key '{key}'"
    message = " ".join(first["msg"].removeprefix("Value error, ").split())
    extra = f" ({len(error.errors()) - 1} more problems)" if len(error.errors()) > 1 else ""
    return f"invalid value for '{key}': {message}{extra}"

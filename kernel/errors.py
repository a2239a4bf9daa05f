"""Every exception a person can cause, in one hierarchy.

    ClawgateError                 str(exc) is one line a person can act on
     ├── ConfigError              a bad config file, key or environment variable
     ├── StorageError             a file that matters could not be written or read
     │    └── LockHeld            another process holds a lock that is not waited for
     ├── PathOutsideRoot          a path escapes the folder it is confined to
     ├── ChannelError             a chat platform adapter cannot start or send
     ├── PairingError             pairing.json or a pairing command
     ├── CronError                a job definition or jobs.json
     └── ModelError               the model endpoint
          └── ModelUnavailable    unreachable, refused, or out of retries

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


class DocumentDamaged(StorageError):
    """A JSON document (json_document.py) that is not what it should be: not JSON, or the
    wrong shape. `problem` says what, without the path."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class PathOutsideRoot(ClawgateError):
    pass


class ChannelError(ClawgateError):
    pass


class CredentialsRejected(ChannelError):
    """The platform refused the bot's token: no retry helps until a person changes it."""


class PairingError(ClawgateError):
    pass


class CronError(ClawgateError):
    pass


class ModelError(ClawgateError):
    pass


class ModelUnavailable(ModelError):
    pass


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

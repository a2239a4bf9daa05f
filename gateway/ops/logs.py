"""Logging for the daemon: stderr (human lines or JSON), a rotated private file, no secrets.

`setup_logging` installs two handlers on the root logger: stderr, which systemd's journal
collects, and `<data_dir>/logs/clawgate.log` (0600 in a 0700 folder), rotated at
`logging.max_bytes`. Both carry a filter that runs the kernel's redactor over a record -
message, arguments, exception text - before any handler formats it, and then the kernel's
sanitiser: a group title or display name holding CR/LF, ESC or bidi controls is written
escaped, so it can neither forge a log line nor act on the terminal that shows the log (a
traceback keeps its line breaks, every line of it indented).

With several agents, what one agent's turns and jobs log starts with its name (`[work]
model openai/x failed ...`): the gateway runs each agent's tasks in an `agent_context`, and
the filter reads the name from it, so no log call has to pass it.
"""

from __future__ import annotations

import contextvars
import json as jsonlib
import logging
import os
import sys
import time
from collections.abc import Sequence
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

from clawgate.kernel.config import LoggingConfig
from clawgate.kernel.errors import one_line
from clawgate.kernel.sanitise import sanitise
from clawgate.kernel.secrets import Redactor
from clawgate.kernel.storage import make_dirs

LOG_DIR = "logs"
LOG_FILE = "clawgate.log"
LIBRARY_LOGGERS = (
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "mcp",
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
    "litellm",
    "telegram",
    "discord",
    "apscheduler",
)
_HUMAN_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_MARK = "_clawgate_handler"  # set on the handlers we install, so a second setup replaces them


_AGENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent", default=None)


def agent_context(name: str) -> contextvars.Context:
    """A copy of the current context in which every log line starts with `[name]`: tasks
    started in it (and the tasks they start) log as that agent."""
    context = contextvars.copy_context()
    context.run(_AGENT.set, name)
    return context


class RedactSecrets(logging.Filter):
    """Redact the record's message, arguments and exception text (`Redactor`), then show
    the control characters left in them escaped (`sanitise`)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        super().__init__()
        self.redact = Redactor(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string still gets logged, without its arguments
            message = str(record.msg)
        if (agent := _AGENT.get()) is not None:
            message = f"[{agent}] {message}"
        record.msg, record.args = sanitise(self.redact(message)), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = _indented(self.redact(record.exc_text))
        if record.stack_info:
            record.stack_info = _indented(self.redact(record.stack_info))
        return True


def _indented(text: str) -> str:
    """A traceback, each line sanitised and indented: it keeps its line breaks, and no line
    of it (an exception's message may quote a group title) can pose as a record of its own."""
    return "\n".join("  " + sanitise(line) for line in text.split("\n"))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message[, exc]."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        body: dict[str, Any] = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            body["exc"] = record.exc_text
        if record.stack_info:
            body["stack"] = record.stack_info
        return jsonlib.dumps(body, ensure_ascii=False)


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A RotatingFileHandler whose files are created 0600 (the umask would give 0644)."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)
        return open(fd, self.mode, encoding=self.encoding, errors=self.errors)

    def doRollover(self) -> None:
        super().doRollover()
        if self.backupCount == 0 and self.stream is not None:
            # Nothing to rotate into: start the file over rather than let it grow forever.
            self.stream.truncate(0)


def log_file_path(data_dir: Path) -> Path:
    return data_dir / LOG_DIR / LOG_FILE


def setup_logging(
    config: LoggingConfig,
    data_dir: Path,
    *,
    json: bool,
    verbose: bool,
    secrets: Sequence[str] = (),
) -> None:
    """Replace the handlers an earlier call installed; leave anyone else's alone."""
    root = logging.getLogger()
    teardown_logging()
    level = logging.DEBUG if verbose else getattr(logging, config.level.upper())
    root.setLevel(level)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    redact = RedactSecrets(secrets)

    def install(handler: logging.Handler, formatter: logging.Formatter) -> None:
        handler.setFormatter(formatter)
        handler.addFilter(redact)
        setattr(handler, _MARK, True)
        root.addHandler(handler)

    human_stderr = logging.Formatter(_HUMAN_FORMAT, datefmt="%H:%M:%S")
    install(logging.StreamHandler(sys.stderr), JsonFormatter() if json else human_stderr)
    if not config.file:
        return
    path = log_file_path(data_dir)
    try:
        make_dirs(path.parent)
        os.chmod(path.parent, 0o700)  # an existing logs/ folder is narrowed too
        handler = PrivateRotatingFileHandler(
            path, maxBytes=config.max_bytes, backupCount=config.backups, encoding="utf-8"
        )
    except OSError as exc:
        logging.getLogger(__name__).warning(
            "cannot open the log file %s (%s); logging to stderr only", path, one_line(exc)
        )
        return
    human_file = logging.Formatter(_HUMAN_FORMAT, datefmt="%Y-%m-%d %H:%M:%S")
    install(handler, JsonFormatter() if json else human_file)


def teardown_logging() -> None:
    """Remove and close the handlers `setup_logging` installed."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _MARK, False):
            root.removeHandler(handler)
            handler.close()

"""`clawgate doctor`: what would stop the assistant from running well, found before it does.

Each check yields `Finding`s: `problem` (the command exits 1), `note` (worth knowing) or
`ok`. The checks here read files and package metadata only; `online.py` adds the ones that
reach the model and the chat platforms. `render` prints the report.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from clawgate.agent.tools.sandbox import SandboxMissing, bwrap_path
from clawgate.gateway.ops.rendezvous import describe, read_record
from clawgate.gateway.ops.status_file import disk_usage, read_status
from clawgate.kernel.config import MAIN_AGENT, Config, load_config
from clawgate.kernel.errors import ConfigError, one_line
from clawgate.kernel.storage import DiskWriter

if TYPE_CHECKING:
    from rich.console import Console

Level = Literal["ok", "note", "problem"]
COMPROMISED_LITELLM = frozenset({"1.82.7", "1.82.8"})
# Workspace folders holding private data: transcripts, memory, owner downloads, and what
# shared chats put in public/ (readable by them through the bot, not by other local users).
PRIVATE_WORKSPACE_DIRS = ("sessions", "memory", "media", "public")
DISK_FOLDERS = ("media", "public/media", "sessions/archive", "memory/.versions")
_LISTED_PATHS = 5


@dataclass(frozen=True)
class Finding:
    level: Level
    message: str


@dataclass(frozen=True)
class Report:
    findings: tuple[Finding, ...]

    def count(self, level: Level) -> int:
        return sum(1 for f in self.findings if f.level == level)

    @property
    def exit_code(self) -> int:
        return 1 if self.count("problem") else 0


def ok(message: str) -> Finding:
    return Finding("ok", message)


def note(message: str) -> Finding:
    return Finding("note", message)


def problem(message: str) -> Finding:
    return Finding("problem", message)


# -- offline ------------------------------------------------------------------------------


def diagnose(
    config_path: Path,
    *,
    environ: Mapping[str, str] | None = None,
    writer: DiskWriter | None = None,
    package_version: Callable[[str], str] = importlib.metadata.version,
    fix_modes: bool = False,
    agent: str | None = None,
) -> tuple[Config | None, list[Finding]]:
    """Every offline check, of `agent`'s config (None: the default agent); the config is
    None when it does not load (that is a problem). With `fix_modes`, open modes are
    narrowed first, so the check reports what remains."""
    findings: list[Finding] = []
    config: Config | None = None
    environ = os.environ if environ is None else environ
    try:
        config = load_config(config_path, environ)
        gateway_dir = config.data_dir  # one gateway serves every agent
        config = config.for_agent(agent)
    except ConfigError as exc:
        findings.append(problem(f"config: {exc}"))
    else:
        where = config_path if config_path.exists() else f"defaults (no file at {config_path})"
        findings.append(ok(f"config loads: {where}"))
    if fix_modes:
        findings += fix_permissions(config_path, config)
    findings += check_permissions(config_path, config)
    if config is not None:
        findings += check_model(config, environ)
        findings += check_channels(config)
        findings += check_mcp(config)
        findings += check_exec(config)
        findings += check_workspace(config.workspace, writer or DiskWriter())
        findings += check_prices(config)
    findings.append(check_litellm(package_version))
    findings.append(check_vector_extension())
    if config is not None:
        findings.append(check_disk(config))
        findings.append(check_gateway(gateway_dir))
        dashboard = read_record(gateway_dir)
        if dashboard is not None:
            findings.append((ok if dashboard.error is None else problem)(describe(dashboard)))
    return config, findings


def check_permissions(config_path: Path, config: Config | None) -> list[Finding]:
    """The config, data_dir and the private workspace folders: nothing open to group/others.

    An open mode below a private folder of the same tree (a 0755 `channels/` in a 0700
    data_dir) cannot be reached by anyone else: that is a note, not a problem.
    """
    findings: list[Finding] = []
    for label, tree, paths in _permission_targets(config_path, config):
        exposed = [(p, mode) for p in paths if (mode := _mode(p)) is not None and mode & 0o077]
        reachable = [(p, m) for p, m in exposed if tree is None or not _shielded(p, tree)]
        shielded = [(p, m) for p, m in exposed if (p, m) not in reachable]
        if reachable:
            findings.append(problem(f"{label}: open to group/others: {_describe_modes(reachable)}"))
        if shielded:
            findings.append(
                note(
                    f"{label}: open modes inside private folders (unreachable for others "
                    f"today): {_describe_modes(shielded)}"
                )
            )
        if paths and not exposed:
            findings.append(ok(f"{label}: private (no group/other access)"))
    return findings


def _permission_targets(
    config_path: Path, config: Config | None
) -> list[tuple[str, Path | None, list[Path]]]:
    """(label, the tree whose private folders shield what lies below them, paths)."""
    config_path = config_path.absolute()
    targets: list[tuple[str, Path | None, list[Path]]] = [
        ("config file", None, _existing([config_path]))
    ]
    if config is not None:
        workspace = config.workspace.absolute()
        data_dir = config.data_dir.absolute()
        # The workspace is judged by its private folders only, wherever it lives.
        walked = list(_walk(data_dir, skip={workspace, config_path}))
        targets.append(("data_dir", data_dir, walked))
        private = [workspace / name for name in PRIVATE_WORKSPACE_DIRS]
        walked = [p for root in private for p in _walk(root, skip=set())]
        targets.append(("workspace data", workspace, walked))
    return targets


def fix_permissions(config_path: Path, config: Config | None) -> list[Finding]:
    """`doctor --fix-modes`: take group/other access off every path the check flags
    (problems and notes alike); the owner's own bits stay as they are."""
    fixed: list[Path] = []
    failed: list[str] = []
    for _label, _tree, paths in _permission_targets(config_path, config):
        for path in paths:
            mode = _mode(path)
            if mode is None or not mode & 0o077:
                continue
            try:
                os.chmod(path, mode & ~0o077)  # _mode skipped symlinks
            except OSError as exc:
                failed.append(f"{path}: {one_line(exc)}")
            else:
                fixed.append(path)
    findings = [ok(f"modes fixed (go-rwx): {len(fixed)} path{'' if len(fixed) == 1 else 's'}")]
    findings += [problem(f"could not fix mode: {line}") for line in failed]
    return findings


def _shielded(path: Path, tree: Path) -> bool:
    """Whether a folder between `tree` (included) and `path` admits neither group nor others."""
    for folder in path.parents:
        if not (folder == tree or folder.is_relative_to(tree)):
            return False
        mode = _mode(folder)
        if mode is not None and not mode & 0o077:
            return True
    return False


def _describe_modes(exposed: list[tuple[Path, int]]) -> str:
    shown = ", ".join(f"{p} ({mode:04o})" for p, mode in exposed[:_LISTED_PATHS])
    more = f" and {len(exposed) - _LISTED_PATHS} more" if len(exposed) > _LISTED_PATHS else ""
    # The topmost exposed paths: chmod -R on them covers the rest.
    paths = [p for p, _ in exposed]
    tops = [p for p in paths if not any(p != q and p.is_relative_to(q) for q in paths)]
    return f"{shown}{more}; fix: chmod -R go-rwx {' '.join(str(p) for p in tops[:_LISTED_PATHS])}"


def _existing(paths: Sequence[Path]) -> list[Path]:
    return [p for p in paths if p.exists()]


def _walk(root: Path, *, skip: set[Path]) -> Iterator[Path]:
    """`root` and everything below it, not following symlinks, without the `skip` paths
    (and what lies below them)."""
    if not root.is_dir() or root.is_symlink():
        return
    yield root
    for folder, dirs, files in os.walk(root, followlinks=False):
        base = Path(folder)
        dirs[:] = [d for d in dirs if base / d not in skip]
        yield from (base / name for name in (*dirs, *files) if base / name not in skip)


def _mode(path: Path) -> int | None:
    try:
        info = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return None  # a link's own mode means nothing; its target is checked where it lives
    return stat.S_IMODE(info.st_mode)


def check_model(config: Config, environ: Mapping[str, str]) -> list[Finding]:
    """A model is set, and the key its provider needs resolves (agent/llm/providers.py)."""
    from clawgate.agent.llm.providers import check_key

    if not config.agent.model:
        return [
            problem(
                'no model configured: set [agent] model (e.g. "openai/gpt-4o-mini") '
                "or CLAWGATE_AGENT__MODEL"
            )
        ]
    where = f" at {config.agent.api_base}" if config.agent.api_base else ""
    key = check_key(config.agent, environ)
    if not key.found:
        return [problem(f"model {config.agent.model}{where}: {key.text}")]
    return [ok(f"model {config.agent.model}{where} ({key.text})")]


def check_prices(config: Config) -> list[Finding]:
    """Which configured models have no known price, and what the budget does about it: an
    unknown price is never counted as 0, so only `budget.daily_tokens` caps such calls."""
    from clawgate.agent.spend.prices import PriceBook

    agent, budget = config.agent, config.budget
    book = PriceBook(agent.prices)
    models = [agent.model, *agent.fallback_models, config.heartbeat.model]
    book.load_now(*filter(None, models))
    unknown = [m for m in dict.fromkeys(models) if m and book.price(m) is None]
    findings = []
    if not unknown:
        findings.append(ok("every configured model has a known price"))
    elif budget.daily_tokens is not None:
        findings.append(
            note(
                f"no price known for {', '.join(unknown)}: their cost shows as unknown, and "
                f"the budget caps their calls by tokens (budget.daily_tokens = "
                f"{budget.daily_tokens:,} a day); set agent.prices to cap them in USD"
            )
        )
    else:
        usd = [k for k in ("daily_usd", "monthly_usd", "per_chat_daily_usd") if getattr(budget, k)]
        cap = f"; budget.{', budget.'.join(usd)} cannot count them" if usd else ""
        findings.append(
            (problem if usd else note)(
                f"no price known for {', '.join(unknown)}: their cost shows as unknown{cap}. "
                "Set agent.prices, or budget.daily_tokens to cap them by tokens"
            )
        )
    caps = (budget.daily_usd, budget.monthly_usd, budget.per_chat_daily_usd, budget.daily_tokens)
    if any(c is not None for c in caps) and not config.heartbeat.deliver_to:
        findings.append(
            note(
                "budget notices for the owner go to heartbeat.deliver_to, unset: to the "
                "owner's private chat when just one is known, else to the log only"
            )
        )
    return findings


def missing_keys(config: Config, environ: Mapping[str, str]) -> list[str]:
    """Every agent whose model needs a key that does not resolve, one line each (an unset
    api_key_env variable is onboard.missing_setup's line)."""
    from clawgate.agent.llm.providers import check_key

    root = config.root
    lines = []
    for name in root.agent_names():
        agent = root.for_agent(name).agent
        if not agent.model or agent.api_key_env:
            continue
        key = check_key(agent, environ)
        if not key.found:
            section = "agent" if name == MAIN_AGENT else f"agents.{name}"
            lines.append(f"{section}.model {agent.model}: {key.text}")
    return lines


def check_channels(config: Config) -> list[Finding]:
    findings: list[Finding] = []
    enabled = [name for name, channel in config.channels if channel.enabled]
    for name in enabled:
        token = getattr(config.channels, name).token
        if token is None or not token.get_secret_value():
            findings.append(
                problem(
                    f"channels.{name} is enabled but has no token: set [channels.{name}] token "
                    f"or CLAWGATE_CHANNELS__{name.upper()}__TOKEN"
                )
            )
        else:
            findings.append(ok(f"channels.{name}: enabled, token set"))
    if not enabled:
        findings.append(
            note("no chat channel enabled: `clawgate gateway` needs one; `clawgate agent` works")
        )
    return findings


def check_mcp(config: Config) -> list[Finding]:
    """Each MCP server's command is there to run (`--online` starts it and lists its tools)."""
    findings = []
    for server in config.mcp.servers:
        label = f"mcp server {server.name}"
        if not server.enabled:
            findings.append(note(f"{label}: disabled"))
        elif server.command is None:
            findings.append(ok(f"{label}: {server.url} (streamable HTTP)"))
        elif shutil.which(server.command) is None:
            findings.append(
                problem(f"{label}: command {server.command!r} not found or not executable")
            )
        else:
            findings.append(ok(f"{label}: runs {server.command} (stdio)"))
    return findings


def check_exec(config: Config) -> list[Finding]:
    """The sandbox is there when configured (else exec refuses every command); unasked exec
    in shared chats is said plainly."""
    tools = config.tools
    if not tools.exec_enabled:
        return [ok("exec: disabled")]
    net = "with network" if tools.exec_network else "without network"
    findings = [
        problem(str(SandboxMissing()).removeprefix("Error: "))
        if tools.exec_sandbox == "bwrap" and bwrap_path() is None
        else ok(f"exec: approval {tools.exec_approval!r}, in a bwrap sandbox {net}")
        if tools.exec_sandbox == "bwrap"
        else note(f'exec: approval {tools.exec_approval!r}, no sandbox (exec_sandbox = "bwrap")')
    ]
    if tools.exec_in_groups:
        findings.append(note("exec: tools.exec_in_groups: every member has owner power"))
    return findings


def check_workspace(workspace: Path, writer: DiskWriter) -> list[Finding]:
    if not workspace.exists():
        return [problem(f"workspace {workspace} does not exist: run `clawgate onboard`")]
    if not workspace.is_dir():
        return [problem(f"workspace {workspace} is not a folder")]
    probe = workspace / f".clawgate-doctor-{os.getpid()}.tmp"
    try:
        writer.append(probe, "")
    except OSError as exc:
        return [problem(f"workspace {workspace} is not writable: {one_line(exc)}")]
    finally:
        probe.unlink(missing_ok=True)
    return [ok(f"workspace {workspace} is writable")]


def check_litellm(package_version: Callable[[str], str]) -> Finding:
    """Read the installed version from package metadata; never import litellm to do it."""
    try:
        version = package_version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return problem("litellm is not installed: reinstall clawgate from requirements.lock")
    if version in COMPROMISED_LITELLM:
        return problem(
            f"litellm {version} is installed: a compromised release (March 2026 supply-chain "
            "attack). Reinstall from requirements.lock and rotate the API keys and bot tokens "
            "this machine held"
        )
    return ok(f"litellm {version}")


def check_vector_extension() -> Finding:
    reason = _vector_extension_problem()
    if reason is None:
        return ok("sqlite-vec loads")
    return note(
        f"sqlite-vec is not loadable ({reason}); memory search works anyway, with keyword "
        "and numpy vector search"
    )


def _vector_extension_problem() -> str | None:
    if not hasattr(sqlite3.Connection, "enable_load_extension"):
        return "this Python's sqlite3 cannot load extensions"
    try:
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        return "the sqlite-vec package is not installed"
    connection = sqlite3.connect(":memory:")
    try:
        connection.enable_load_extension(True)
        sqlite_vec.load(connection)
        connection.execute("select vec_version()")
    except (sqlite3.Error, AttributeError, OSError) as exc:
        return f"loading it failed: {exc}"
    finally:
        connection.close()
    return None


def check_disk(config: Config) -> Finding:
    usage = disk_usage(config.workspace)
    keep = config.housekeeping
    days = {
        "media": keep.media_days,
        "public/media": keep.media_days,
        "sessions/archive": keep.archive_days,
        "memory/.versions": keep.versions_days,
    }
    parts = []
    for name in DISK_FOLDERS:
        kept = f"kept {days[name]} days" if days[name] else "kept forever"
        parts.append(f"{name} {human_size(usage.get(name, 0))} ({kept})")
    return note("disk use: " + ", ".join(parts))


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def check_gateway(data_dir: Path) -> Finding:
    status = read_status(data_dir) or {}
    pid, started = status.get("pid"), status.get("started_at")
    # read_status counts pid 0 (a torn or empty file) as alive: kill(0, 0) hits our own group.
    if status.get("running") and isinstance(pid, int) and pid > 0:
        since = ""
        if isinstance(started, int | float):
            since = time.strftime(", since %Y-%m-%d %H:%M", time.localtime(started))
        return note(f"a gateway is running on {data_dir} (pid {pid}{since})")
    pid = _lock_pid(data_dir)
    if pid is not None:
        return note(f"a gateway is running on {data_dir} (pid {pid}, holds gateway.lock)")
    return ok(f"no gateway running on {data_dir}")


def _lock_pid(data_dir: Path) -> int | None:
    """The pid the lock file names, if that process is alive. Never takes the lock: a
    gateway starting at that instant would be refused."""
    try:
        pid = int((data_dir / "gateway.lock").read_text(encoding="utf-8").strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


# -- the report ---------------------------------------------------------------------------

_SYMBOLS = {"ok": ("✓", "green"), "note": ("!", "yellow"), "problem": ("✗", "red")}


def render(report: Report, console: Console) -> None:
    """One line per finding, then a summary line."""
    from rich.text import Text

    from clawgate.kernel.sanitise import sanitise

    for finding in report.findings:
        symbol, colour = _SYMBOLS[finding.level]
        line = Text()
        line.append(f"{symbol} ", style=f"bold {colour}")
        line.append(sanitise(finding.message))  # may quote a platform's error description
        console.print(line)
    problems, notes = report.count("problem"), report.count("note")
    summary = (
        f"{problems} problem{'' if problems == 1 else 's'}, {notes} note{'' if notes == 1 else 's'}"
    )
    if problems:
        console.print(Text(f"\n{summary}: fix the ✗ lines.", style="bold red"))
    else:
        console.print(Text(f"\nNo problems ({summary}).", style="bold green"))

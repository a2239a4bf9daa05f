"""`clawgate onboard`: write a starter config and copy the workspace template.

Safe to run any number of times: it only ever adds what is missing and never
overwrites a file, so a self-hoster's edits survive a second run.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from clawgate.kernel.agent_configs import AGENT_NAME, agent_dirs
from clawgate.kernel.config import MAIN_AGENT, Config, load_config
from clawgate.kernel.errors import ConfigError
from clawgate.kernel.program import command
from clawgate.kernel.storage import DiskWriter

TEMPLATE_PACKAGE = "clawgate.workspace"
_SKIP_NAMES = {"__init__.py", "__pycache__", ".gitkeep"}
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


@dataclass
class OnboardResult:
    created: list[Path] = field(default_factory=list)  # files and folders this run made
    kept: list[Path] = field(default_factory=list)  # already there, left untouched


def toml_string(value: str) -> str:
    """A TOML basic string holding `value` exactly (control characters escaped)."""
    escaped = []
    for char in value:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def config_template(workspace: Path | None = None, data_dir: Path | None = None) -> str:
    """The starter config: defaults spelled out, examples commented, no secrets."""
    top = []
    if workspace is not None:
        top.append(f"workspace = {toml_string(str(workspace))}")
    else:
        top.append('# workspace = "~/.clawgate/workspace"')
    if data_dir is not None:
        top.append(
            f"data_dir = {toml_string(str(data_dir))}  # search index and other derived data"
        )
    else:
        top.append('# data_dir = "~/.clawgate"  # search index and other derived data')
    sandbox_line = (
        'exec_sandbox = "bwrap"         # bubblewrap is installed: each command in a sandbox'
        if shutil.which("bwrap")
        else '# exec_sandbox = "bwrap"       # install the bubblewrap package to sandbox exec'
    )
    return f"""\
# clawgate configuration.
#
# Every key is optional; commented lines show examples or defaults. Any key can also
# be set from the environment as CLAWGATE_<SECTION>__<KEY>, which wins over this
# file - the best place for secrets, e.g. CLAWGATE_AGENT__API_KEY or
# CLAWGATE_CHANNELS__TELEGRAM__TOKEN.

{chr(10).join(top)}

[agent]
# Any model litellm knows, as "provider/model". Pick one:
# model = "openai/gpt-4o-mini"
# model = "anthropic/claude-3-5-haiku-latest"
# model = "ollama/llama3.1"
# api_base = "http://localhost:11434"  # only for self-hosted or OpenAI-compatible servers
# api_key = "sk-..."                   # or CLAWGATE_AGENT__API_KEY in the environment
# fallback_models = ["openai/gpt-4o"]  # tried in order when the main model fails
# temperature = 0.7                   # unset: the model's own (reasoning models take no other)
# max_tokens = 4096
# max_tool_iterations = 20
# memory_window = 50                   # messages kept before older ones are consolidated
# context_window_tokens = 128000
# timezone = "Europe/Lisbon"           # default "UTC"

[channels.telegram]
enabled = false
# token = "123456:ABC-..."     # from @BotFather; or CLAWGATE_CHANNELS__TELEGRAM__TOKEN
# allow_from = ["123456789"]   # your numeric Telegram user id; owners of the bot

[channels.discord]
enabled = false
# token = "..."                # bot token; or CLAWGATE_CHANNELS__DISCORD__TOKEN
# allow_from = ["123456789012345678"]

[tools]
restrict_to_workspace = true   # file tools stay inside the workspace
exec_enabled = true            # the shell tool; its deny list is not a sandbox
# exec_timeout = 60.0          # seconds before a shell command is stopped
# exec_approval = "risky"      # ask before commands: "always", "risky" (not read-only), "never"
# exec_allow = ["make test"]   # commands "risky" runs without asking (shell patterns)
{sandbox_line}
# exec_network = true          # false: sandboxed commands get no network
# max_result_chars = 16000     # longer tool output is cut before the model sees it
"""


def _make_dir(path: Path, writer: DiskWriter, result: OnboardResult, *, track: bool) -> None:
    """Create `path` and any missing parents, each private (pathlib gives parents 0777&~umask)."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for directory in reversed(missing):
        writer.mkdir(directory, mode=PRIVATE_DIR)
        os.chmod(directory, PRIVATE_DIR)
        result.created.append(directory)
    if track and not missing:
        result.kept.append(path)


def _write_new(path: Path, data: str | bytes, writer: DiskWriter, result: OnboardResult) -> None:
    if path.exists():
        result.kept.append(path)
        return
    # Atomic replace so a crash never leaves a half file that later runs would keep.
    writer.replace(path, data, mode=PRIVATE_FILE)
    result.created.append(path)


def _copy_template(
    source: Traversable, target: Path, writer: DiskWriter, result: OnboardResult
) -> None:
    _make_dir(target, writer, result, track=True)
    for entry in sorted(source.iterdir(), key=lambda e: e.name):
        if entry.name in _SKIP_NAMES or entry.name.endswith(".pyc"):
            continue
        if entry.is_dir():
            _copy_template(entry, target / entry.name, writer, result)
        else:
            _write_new(target / entry.name, entry.read_bytes(), writer, result)


def onboard(
    config_path: Path,
    workspace: Path | None = None,
    data_dir: Path | None = None,
    *,
    writer: DiskWriter | None = None,
) -> OnboardResult:
    """Create what is missing: the config (0600, folder 0700), then the workspace tree.

    Without `workspace` the location comes from the config (existing or new), so rerunning
    onboard after editing the config fills in the configured workspace. `data_dir` is only
    written into a new config; whoever needs it creates it. Raises ConfigError if the
    existing config does not load.
    """
    writer = writer or DiskWriter()
    result = OnboardResult()
    config_path = config_path.expanduser()
    if workspace is not None:
        workspace = workspace.expanduser().absolute()
    if data_dir is not None:
        data_dir = data_dir.expanduser().absolute()

    _make_dir(config_path.parent, writer, result, track=False)
    _write_new(config_path, config_template(workspace, data_dir), writer, result)

    if workspace is None:
        workspace = load_config(config_path).workspace

    _lay_down(workspace, writer, result)
    return result


def _lay_down(workspace: Path, writer: DiskWriter, result: OnboardResult) -> None:
    _copy_template(resources.files(TEMPLATE_PACKAGE), workspace, writer, result)
    # Empty folders do not survive packaging (a wheel holds files only): make them here.
    for folder in ("memory", "skills", "public"):
        _make_dir(workspace / folder, writer, result, track=False)
    _make_dir(workspace / "sessions", writer, result, track=True)


def check_new_agent(config: Config, name: str, config_path: Path) -> None:
    """Refuse (ConfigError, one line) a name the config could not hold (the kernel's rule:
    it becomes a folder and a session key prefix), or one the config already has."""
    if not AGENT_NAME.fullmatch(name):
        raise ConfigError(
            f"{name!r} cannot name an agent: use lowercase letters, digits, - and _ "
            "(at most 32, starting with a letter or digit)"
        )
    if name in config.agent_names():
        raise ConfigError(f"agent {name!r} already exists in {config_path}")


def agent_workspace(config: Config, name: str) -> Path:
    """Where a new agent's workspace goes by default: `<data_dir>/agents/<name>/workspace`,
    as the config would place it (written into its section all the same, to be seen)."""
    return agent_dirs(config.root, name)[0].absolute()


def lay_down_agent(workspace: Path, *, writer: DiskWriter | None = None) -> OnboardResult:
    """The starter workspace for an added agent (what is there already is kept)."""
    result = OnboardResult()
    _lay_down(workspace.expanduser(), writer or DiskWriter(), result)
    return result


def agent_next_steps(
    name: str, config_path: Path, own_bots: list[str], *, program: str = "clawgate"
) -> list[str]:
    """How to reach an added agent: its own bot (every chat of it is the agent's), or chats
    of the shared bot bound to it - never both on one platform (the config refuses that)."""
    lines = []
    if own_bots:
        lines += [
            f"Every chat of its own bot ({', '.join(own_bots)}) is its own. Once the gateway "
            "runs, message that bot: it answers with a pairing code;",
            f"make yourself its owner: `{program} pairing approve CODE --owner --agent {name}`.",
        ]
    examples = {
        "telegram": '{ channel = "telegram", chat = "-100123" }',
        "discord": '{ channel = "discord", guild = "<guild id>" }',
    }
    shared = [platform for platform in examples if platform not in own_bots]
    if shared:
        lead = (
            "Nothing reaches it yet: bind chats of the shared bot to it"
            if not own_bots
            else "Chats of the shared bot can be bound to it too"
        )
        lines += [
            f"{lead}, in [agents.{name}] of {config_path}:",
            f"  bindings = [{', '.join(examples[p] for p in shared)}]",
        ]
    if not own_bots:
        lines.append(
            f'or give it its own bot: [agents.{name}.channels.telegram] enabled = true, token = "..."'
        )
    lines.append(
        f"Then (re)start the gateway: `{program} gateway`. In the terminal: "
        f"`{program} agent --agent {name}`; every agent: `{program} agents`."
    )
    return lines


def prepare_workspace(workspace: Path, *, writer: DiskWriter | None = None) -> bool:
    """Lay down the starter workspace where `onboard` never ran (no AGENTS.md); True if it did.

    A workspace that has its AGENTS.md is left alone: a file its owner deleted stays deleted.
    """
    if (workspace / "AGENTS.md").exists():
        return False
    _lay_down(workspace, writer or DiskWriter(), OnboardResult())
    return True


def executable() -> str:
    """How to run clawgate again (kernel/program.py)."""
    return command()


def next_steps(
    config_path: Path,
    environ: dict[str, str] | None = None,
    *,
    program: str = "clawgate",
    checked: bool = True,
) -> list[str]:
    """What to do next, from what the config has: the missing pieces, or how to start and
    how the owner pairs. `checked` False: a saved answer failed its live check, so nothing
    is called ready."""
    try:
        config = load_config(config_path, environ)
    except ConfigError as exc:
        return [f"Next: fix the config: {exc}"]
    model = config.agent.model
    if model and not checked:
        return [
            "Not ready: a saved setting failed its check (above). Fix it, then check again "
            f"with `{program} doctor --online`, or run `{program} onboard --again`.",
        ]
    if not model:
        return [
            f"Next: set [agent] model (and api_key / api_base) in {config_path}",
            f"(or run `{program} onboard` in a terminal), then talk to your assistant with "
            f"`{program} agent`.",
        ]
    missing = missing_setup(config)
    if missing:
        return [
            f"Ready to chat in the terminal: `{program} agent` ({model}).",
            f"For the gateway: {'; '.join(missing)}.",
        ]
    return [
        f"Ready. Start the gateway: `{program} gateway` ({model}).",
        "Then send your bot a message from your own account: it answers with a pairing code.",
        f"Approve it as the owner: `{program} pairing approve CODE --owner`.",
        f"Or chat in the terminal: `{program} agent`.",
    ]


def missing_setup(config: Config) -> list[str]:
    """Everything the gateway still lacks, for every agent of the config, one line each."""
    root = config.root
    problems = []
    enabled = False
    for name in root.agent_names():
        agent = root.for_agent(name)
        section = "agent" if name == MAIN_AGENT else f"agents.{name}"
        if not agent.agent.model:
            problems.append(
                'no model: set [agent] model (e.g. "openai/gpt-4o-mini") or CLAWGATE_AGENT__MODEL'
                if name == MAIN_AGENT
                else f"agent {name} has no model: set [agents.{name}] model (or [agent] model)"
            )
        key_env = agent.agent.api_key_env
        if key_env and agent.agent.api_key is None:
            problems.append(
                f"{section}.api_key_env names {key_env}, which is not set in the environment"
            )
        for platform, settings in agent.channels:
            if not getattr(settings, "enabled", False):
                continue
            enabled = True
            if settings.token is not None and settings.token.get_secret_value():
                continue
            if name == MAIN_AGENT:
                problems.append(
                    f"channels.{platform} is enabled but has no token: set "
                    f"[channels.{platform}] token or CLAWGATE_CHANNELS__{platform.upper()}__TOKEN"
                )
            elif not getattr(root.channels, platform).enabled:  # else main's line says it
                problems.append(
                    f"agents.{name}.channels.{platform} is enabled but has no token: set "
                    f"[agents.{name}.channels.{platform}] token"
                )
    if not enabled:
        problems.append(
            "no chat channel enabled: set [channels.telegram] enabled = true and token "
            "(or the same for discord)"
        )
    return problems

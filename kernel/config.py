"""Configuration: one TOML file, overridable key by key from the environment.

`CLAWGATE_<SECTION>__<KEY>=value` overrides `[section] key`; nested sections chain with
`__` (`CLAWGATE_CHANNELS__TELEGRAM__TOKEN`). Values that parse as JSON are taken as JSON.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from clawgate.kernel.agent_configs import check_agents, derive_agent
from clawgate.kernel.config_cluster import ClusterConfig
from clawgate.kernel.config_hints import check_model_names, did_you_mean
from clawgate.kernel.config_sections import (
    SECRET_NAME,
    BudgetConfig,
    McpConfig,
    ModelPrice,
    Section,
    ToolsConfig,
)
from clawgate.kernel.errors import ConfigError, describe_validation

ENV_PREFIX = "CLAWGATE_"
CONFIG_ENV = "CLAWGATE_CONFIG"
DEFAULT_HOME = Path("~/.clawgate")


def _ids_to_str(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [str(v) for v in value]
    return value


IdList = Annotated[list[str], BeforeValidator(_ids_to_str)]


class AgentConfig(Section):
    model: str = ""
    api_base: str | None = None
    api_key: SecretStr | None = None
    # The environment variable that holds the key (e.g. "OPENAI_API_KEY"), read at start:
    # keeps the key out of the file, and names the variable in errors when it is missing.
    api_key_env: str | None = None
    fallback_models: list[str] = Field(default_factory=list)
    # None: not sent, the model's own default. Current reasoning models (openai/gpt-5,
    # o3-mini) refuse any other value than theirs, so a default here would break them.
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int = Field(4096, gt=0)
    max_tool_iterations: int = Field(20, gt=0)
    memory_window: int = Field(50, ge=4)
    context_window_tokens: int = Field(128_000, ge=1024)
    request_timeout: float = Field(60.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10)
    # Chat completions to OpenAI-compatible endpoints as one POST on aiohttp, not via litellm.
    direct_http: bool = True
    max_concurrent_turns: int = Field(8, ge=1)
    # Wall-clock limit of one model turn, tools included: a stuck turn frees its slot.
    turn_timeout_seconds: float = Field(600.0, gt=0)
    # On SIGTERM, how long turns in flight get to finish before they are cancelled (their
    # messages stay unanswered in the journals and are answered after the restart).
    shutdown_grace_seconds: float = Field(20.0, gt=0)
    # Send received images to the model as image content (needs a vision model).
    vision: bool = True
    # e.g. "openai/whisper-1"; empty: voice messages reach the model as a file with a note.
    transcription_model: str = ""
    timezone: str = "UTC"
    # USD per million tokens by model name, over litellm's offline cost map (agent/spend/).
    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value


class _ChatChannelConfig(Section):
    """Access rules every chat platform shares (see channels/access.py)."""

    enabled: bool = False
    token: SecretStr | None = None
    # Who may talk to the bot in private: user ids (Telegram: also usernames), or "*".
    allow_from: IdList = Field(default_factory=list)
    # Who owns the assistant (gets MEMORY.md); None = the allow_from entries ("*" never counts).
    owners: IdList | None = None
    dm_policy: Literal["pairing", "allowlist", "open"] = "pairing"
    # Group chats served (Discord: guild or channel ids); none by default.
    group_allow: IdList = Field(default_factory=list)
    # Group chats whose notes (memory/chats/<chat>/) the owner's sessions see, quoted as
    # other people's words; none by default (Discord: channel ids).
    share_group_memory: IdList = Field(default_factory=list)
    require_mention: bool = True
    # In an allowed group, how many recent messages that did not address the bot go along
    # with the next one that does, as context (0: none).
    group_context: int = Field(10, ge=0, le=100)
    proxy: str | None = None
    # "edit": a reply shows while it is written, by editing one message (channels/live.py);
    # "off": each reply is sent once it is complete.
    streaming: Literal["edit", "off"] = "edit"
    # 👀 on a message when its turn starts, then a mark for how it ended (channels/reactions.py).
    reactions: bool = True

    @model_validator(mode="after")
    def _open_needs_star(self) -> _ChatChannelConfig:
        if self.dm_policy == "open" and "*" not in self.allow_from:
            raise ValueError('dm_policy = "open" requires allow_from = ["*"]')
        return self


class TelegramConfig(_ChatChannelConfig):
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    poll_timeout: int = Field(30, ge=0, le=50)


class DiscordConfig(_ChatChannelConfig):
    api_base: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg/"
    catchup_max_age_hours: float = Field(24.0, gt=0)  # older: not caught up (stale answers confuse)
    shards: int = Field(1, ge=1, le=64)  # the gateway's shards; in a cluster each one is a lease


class ChannelsConfig(Section):
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)


class MemorySearchConfig(Section):
    max_results: int = Field(6, ge=1, le=50)
    candidate_multiplier: int = Field(4, ge=1, le=20)
    # None: by embedder (its measured defaults, else 0.7/0.3 if semantic); normalised to sum 1.
    vector_weight: float | None = Field(None, ge=0)
    text_weight: float | None = Field(None, ge=0)
    half_life_days: float = Field(30.0, gt=0)
    mmr_lambda: float = Field(0.7, ge=0, le=1)
    min_score: float = Field(0.0, ge=0)


class MemoryConfig(Section):
    # "" or "builtin": offline; "none": keyword only; "minilm", "local:PATH": a local model in
    # numpy; else a litellm embedding model. recall_sessions: auto-recall transcripts too.
    embedding_model: str = "builtin"
    auto_recall: bool = True
    recall_sessions: bool = False
    search: MemorySearchConfig = Field(default_factory=MemorySearchConfig)


class CronConfig(Section):
    enabled: bool = True
    missed_grace_minutes: int = Field(60, ge=0)
    # A one-shot later than the grace still runs, with a note saying how late, up to this
    # many hours; later than that the target chat is told it was missed.
    missed_limit_hours: int = Field(24, ge=0)
    allow_from_groups: bool = False
    # A job created from a group or an `allowed` chat repeats at most this often: its runs
    # are model calls the owner pays for. Its runs also spend that chat's messages_per_minute.
    shared_min_interval_minutes: int = Field(10, ge=0)


class HeartbeatConfig(Section):
    enabled: bool = True
    interval_minutes: int = Field(30, ge=1)
    active_hours: str = "08:00-22:00"
    # The owner's private chat, e.g. "telegram:123"; empty = no heartbeat deliveries.
    deliver_to: str = ""
    # The model of heartbeat and cron turns (a cheaper one); empty: the agent's model.
    model: str = ""

    @field_validator("active_hours")
    @classmethod
    def _hours(cls, value: str) -> str:
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d-([01]\d|2[0-4]):[0-5]\d", value):
            raise ValueError('use "HH:MM-HH:MM", e.g. "08:00-22:00"')
        return value


class LimitsConfig(Section):
    # Per sender, across chats; 0 turns it off. The owner's terminal sessions are exempt.
    # Over it an owner's messages wait their turn (never lost); anyone else's get no turn
    # and no model call but are kept in their session, marked over_limit.
    messages_per_minute: int = Field(20, ge=0)


class HousekeepingConfig(Section):
    # Days to keep files; 0: forever. A transcript whose archive has not landed is always kept.
    media_days: int = Field(90, ge=0)
    archive_days: int = Field(365, ge=0)
    versions_days: int = Field(90, ge=0)
    # The newest files of each kind (downloads, archived transcripts, MEMORY.md versions)
    # kept whatever their age, so a clock set years ahead cannot empty a folder; 0: age alone.
    keep_newest: int = Field(10, ge=0)


class LoggingConfig(Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    json_format: bool = False  # one JSON object per line (also: clawgate gateway --log-json)
    # <data_dir>/logs/clawgate.log, rotated at max_bytes, `backups` old files kept.
    file: bool = True
    max_bytes: int = Field(5_000_000, ge=10_000)
    backups: int = Field(5, ge=0)


class DashboardConfig(Section):
    # On by default: it listens on loopback only and every page needs the owner's token, so
    # `clawgate dashboard` just works; a non-loopback host is refused without a token.
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(18790, ge=0, le=65535)  # 0: any free port (the log names it)
    # A browser session unused this long is revoked (its open event streams end with it).
    session_idle_minutes: int = Field(720, ge=1)


MAIN_AGENT = "main"


class Binding(Section):
    """Which chats of a shared bot an agent answers (see gateway/daemon/routing.py). Neither `chat`
    nor `guild`: the whole channel account (every chat the bot sees that no narrower binding
    claims)."""

    channel: Literal["telegram", "discord"]
    chat: str | None = None  # a Telegram chat id, a Discord channel id
    guild: str | None = None  # Discord only

    @model_validator(mode="after")
    def _guild_is_discord(self) -> Binding:
        if self.guild is not None and self.channel != "discord":
            raise ValueError("guild is a Discord binding")
        return self

    def label(self) -> str:
        where = [f"chat {self.chat}"] if self.chat else []
        where += [f"guild {self.guild}"] if self.guild else []
        return f"{self.channel} ({', '.join(where)})" if where else self.channel


class AgentSpec(AgentConfig):
    """`[agents.<name>]`: the `[agent]` keys of this agent (unset ones are inherited from
    `[agent]`), its workspace, its bindings, and sections that override the top-level ones key
    by key (a partial `[agents.x.channels.telegram]` changes only the keys it names)."""

    workspace: Path | None = None  # None: <data_dir>/agents/<name>/workspace
    bindings: list[Binding] = Field(default_factory=list)
    # Agents whose memory this one may search, read-only; nothing else of theirs is shared.
    share_memory_from: list[str] = Field(default_factory=list)
    channels: ChannelsConfig | None = None
    tools: ToolsConfig | None = None
    memory: MemoryConfig | None = None
    cron: CronConfig | None = None
    heartbeat: HeartbeatConfig | None = None
    limits: LimitsConfig | None = None
    budget: BudgetConfig | None = None

    @field_validator("workspace")
    @classmethod
    def _expand_workspace(cls, value: Path | None) -> Path | None:
        try:
            return value.expanduser() if value is not None else None
        except RuntimeError as exc:
            raise ValueError(str(exc)) from None


class Config(Section):
    workspace: Path = DEFAULT_HOME / "workspace"
    data_dir: Path = DEFAULT_HOME
    # Several assistants in one gateway (see kernel/agent_configs.py); "main" is the top-level keys.
    agents: dict[str, AgentSpec] = Field(default_factory=dict)
    default_agent: str = MAIN_AGENT
    # "agent": each agent keeps its own pairing approvals (its data_dir); "global": one
    # pairing.json under the top-level data_dir serves every agent.
    pairing_scope: Literal["agent", "global"] = "agent"
    agent: AgentConfig = Field(default_factory=AgentConfig)
    channels: ChannelsConfig = Field(default_factory=ChannelsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    cron: CronConfig = Field(default_factory=CronConfig)
    heartbeat: HeartbeatConfig = Field(default_factory=HeartbeatConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    housekeeping: HousekeepingConfig = Field(default_factory=HousekeepingConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    mcp: McpConfig = Field(default_factory=McpConfig)
    cluster: ClusterConfig | None = None  # None: one machine, no database (gateway/cluster/)

    @field_validator("workspace", "data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        try:
            return value.expanduser()
        except RuntimeError as exc:  # "~someone" for a user this machine does not have
            raise ValueError(str(exc)) from None

    # Set on the configs `for_agent` derives: whose config it is, and the whole config it
    # came from (so a derived config still knows every agent).
    _agent_name: str = PrivateAttr(MAIN_AGENT)
    _root: Config | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _agents_fit(self) -> Config:
        check_agents(self)
        return self

    @property
    def agent_name(self) -> str:
        """The agent this config belongs to: "main" for a config read from a file."""
        return self._agent_name

    @property
    def root(self) -> Config:
        """The whole config (every agent) this one was derived from; itself if not derived."""
        return self._root or self

    @property
    def pairing_file(self) -> Path:
        """Where this agent's pairing approvals live: its data_dir, or the top-level one for
        every agent when `pairing_scope = "global"`."""
        base = self.root.data_dir if self.root.pairing_scope == "global" else self.data_dir
        return base / "pairing.json"

    def agent_names(self) -> list[str]:
        """ "main" (the top-level keys) first, then every `[agents.X]` in file order."""
        root = self.root
        return [MAIN_AGENT, *(n for n in root.agents if n != MAIN_AGENT)]

    def for_agent(self, name: str | None = None) -> Config:
        """The effective single-agent config of `name` (None: `default_agent`): its workspace
        and data_dir, its `[agent]` keys and sections merged over the top-level ones.
        Raises ConfigError naming the known agents for an unknown name."""
        root = self.root
        name = name or root.default_agent
        if name not in root.agent_names():
            known = ", ".join(root.agent_names())
            raise ConfigError(f"unknown agent {name!r} (known: {known})")
        if name == self._agent_name and (self._root is not None or not self.agents):
            return self
        try:
            derived = derive_agent(root, name)
        except ValidationError as exc:  # unreachable after load: check_agents derived it once
            raise ConfigError(f"agents.{name}: {describe_validation(exc)}") from None
        derived._agent_name = name
        derived._root = root
        return derived

    def secrets(self) -> list[str]:
        """Every configured secret value, so tools can scrub them from what they show: every
        agent's, whichever agent this config is for."""
        root = self.root
        configs = [root] + [derive_agent(root, n) for n in root.agents]
        found = [
            s
            for c in configs
            for s in (
                c.agent.api_key,
                c.channels.telegram.token,
                c.channels.discord.token,
                c.tools.web.brave_api_key,
                c.tools.web.tavily_api_key,
            )
        ]
        found += [v for server in root.mcp.servers for v in server.headers.values()]
        values = [s.get_secret_value() for s in found if s and s.get_secret_value()]
        # An MCP server's key travels in its environment, under a name that says so.
        values += [
            value
            for server in root.mcp.servers
            for name, value in server.env.items()
            if SECRET_NAME.search(name) and value
        ]
        return list(dict.fromkeys(values))


def _resolve_key_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    """Fill `agent.api_key` from the variable `agent.api_key_env` names, when no key is set
    (raw config data, before validation)."""
    agents = data.get("agents")
    specs = list(agents.values()) if isinstance(agents, dict) else []
    for agent in [data.get("agent"), *specs]:
        if isinstance(agent, dict) and agent.get("api_key_env") and not agent.get("api_key"):
            found = env.get(str(agent["api_key_env"]), "")
            if found:
                agent["api_key"] = found


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    return (DEFAULT_HOME / "config.toml").expanduser()


def _parse_env_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    """Merge overrides into `data`; returns each overridden key path -> its variable name."""
    applied: dict[tuple[str, ...], str] = {}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name == CONFIG_ENV:
            continue
        parts = [p.lower() for p in name[len(ENV_PREFIX) :].split("__")]
        if not all(parts):
            raise ConfigError(f"{name}: malformed override name (use CLAWGATE_SECTION__KEY)")
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{name}: '{part}' is a value, not a section")
            node = child
        node[parts[-1]] = _parse_env_value(raw)
        applied[tuple(parts)] = name
    return applied


def _error_source(error: ValidationError, path: Path, overrides: dict[tuple[str, ...], str]) -> str:
    """The env variable behind the first error if an override caused it, else the file."""
    loc = tuple(str(p) for p in error.errors()[0]["loc"])
    for key, name in overrides.items():
        # loc under the key: a bad value; key under loc: an unknown key or section.
        if loc and (loc[: len(key)] == key or key[: len(loc)] == loc):
            return name
    return str(path)


def load_config(
    path: Path | None = None, environ: Mapping[str, str] | None = None, *, text: str | None = None
) -> Config:
    """Read the TOML file (absent means defaults), apply env overrides, validate: the one
    way every part (the gateway, each CLI command, onboard's checks and edits, doctor, the
    dashboard) reads a config. `text` stands for the file's content when a change not yet
    written is checked (onboard, `groups allow`), so it is read exactly as it will be.

    Raises ConfigError with one line naming the file (or the env variable) and the key;
    never falls back silently.
    """
    env = dict(os.environ if environ is None else environ)
    path = path or default_config_path(env)
    data: dict[str, Any] = {}
    if text is None and path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from None
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    overrides = _apply_env(data, env)
    _resolve_key_env(data, env)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        hint = did_you_mean(Config, first["loc"]) if first["type"] == "extra_forbidden" else ""
        raise ConfigError(
            f"{_error_source(exc, path, overrides)}: "
            f"{describe_validation(exc, whole='config')}{hint}"
        ) from None
    check_model_names(config, path, overrides)
    return config


def settings_digest(config: Config) -> str:
    """A fingerprint of every setting, secrets included (hashed): how `clawgate agent` tells
    that the running gateway started with other settings (file, CLAWGATE_*, an edit since).
    16 hex digits: enough, and short of every secret shape the status file's redactor masks."""
    import hashlib

    def plain(value: Any) -> Any:
        return value.get_secret_value() if isinstance(value, SecretStr) else str(value)

    dumped = json.dumps(config.model_dump(), default=plain, sort_keys=True)
    return hashlib.sha256(dumped.encode()).hexdigest()[:16]

"""The base of every config section, and the sections of the tools (`[tools]`, `[tools.web]`,
`[[mcp.servers]]`) and of spend (`[budget]`, `agent.prices`); the rest are in config.py."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    IPvAnyNetwork,
    SecretStr,
    field_validator,
    model_validator,
)

# The config file's layout version: a backup records it, a restore refuses a newer one. Raise
# it when a key moves or changes meaning.
SCHEMA_VERSION = 1


class Section(BaseModel):
    """Unknown keys refused; defaults validated."""

    # Numbers become strings where a string is expected: an all-digit secret or id given
    # through the environment parses as JSON to a number.
    model_config = ConfigDict(extra="forbid", validate_default=True, coerce_numbers_to_str=True)


class WebToolsConfig(Section):
    """`[tools.web]`: web_fetch and web_search (agent/tools/web_*.py)."""

    enabled: bool = True
    # Also in group and `allowed` chats (owner chats only by default, like exec).
    in_groups: bool = False
    search: Literal["duckduckgo", "searxng", "brave", "tavily"] = "duckduckgo"
    duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    searxng_url: str = ""  # your instance, e.g. "http://192.168.1.5:8888"
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    brave_api_key: SecretStr | None = None
    tavily_url: str = "https://api.tavily.com/search"
    tavily_api_key: SecretStr | None = None
    max_bytes: int = Field(2_000_000, ge=1000)
    timeout: float = Field(30.0, gt=0)
    # None: the environment's https_proxy / http_proxy (no_proxy honoured), as the model calls.
    proxy: str | None = None
    # Addresses or networks web_fetch may reach although not public ("127.0.0.1",
    # "192.168.1.0/24"); everything else that is not public is refused.
    allow_private: list[IPvAnyNetwork] = Field(default_factory=list)

    @field_validator("allow_private", mode="before")
    @classmethod
    def _addresses_are_written_out(cls, value: object) -> object:
        # A number would pass as an address (1 is 0.0.0.1, true too): a slip, not a network.
        if isinstance(value, list) and any(isinstance(v, bool | int | float) for v in value):
            raise ValueError('each entry is an address or network in quotes, e.g. "192.168.1.0/24"')
        return value

    @model_validator(mode="after")
    def _searxng_has_url(self) -> WebToolsConfig:
        if self.search == "searxng" and not self.searxng_url:
            raise ValueError('search = "searxng" needs searxng_url')
        return self


class ToolsConfig(Section):
    restrict_to_workspace: bool = True
    exec_enabled: bool = True
    # exec in group and allowed chats: off, since anyone there could drive it.
    exec_in_groups: bool = False
    exec_timeout: float = Field(60.0, gt=0)
    # Extra environment variable names exec passes on (beyond PATH, HOME, LANG, LC_*, ...).
    exec_env_allow: list[str] = Field(default_factory=list)
    # Ask the owner before a command runs (agent/tools/approval.py): every command, all but
    # the read-only ones and `exec_allow` patterns (risky), or none. A timeout is a Deny.
    exec_approval: Literal["always", "risky", "never"] = "risky"
    exec_allow: list[str] = Field(default_factory=list)
    exec_approval_timeout: float = Field(120.0, gt=0)
    # Each command inside bubblewrap (agent/tools/sandbox.py); missing bwrap refuses exec.
    exec_sandbox: Literal["none", "bwrap"] = "none"
    exec_network: bool = True
    max_result_chars: int = Field(16_000, ge=1000)
    web: WebToolsConfig = Field(default_factory=WebToolsConfig)


SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
# A server's tools are offered as "<server>__<tool>": the separator cannot be in its name.
_MCP_NAME = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


class McpServerConfig(Section):
    """One `[[mcp.servers]]`: a stdio command, or a streamable-HTTP url."""

    name: str = Field(pattern=_MCP_NAME)
    enabled: bool = True
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    # Beyond the SDK's safe defaults (PATH, HOME, ...): the gateway's own environment is not passed.
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    # The tools offered (names as the server gives them); None: all of them.
    tools: list[str] | None = None
    # Offered in group and `allowed` chats too; owner chats only by default.
    shared: bool = False

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"mcp server {self.name!r}: set either command or url")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"mcp server {self.name!r}: url must be http:// or https://")
        return self


class McpConfig(Section):
    servers: list[McpServerConfig] = Field(default_factory=list)
    # How often a quiet server is pinged (a dead one is restarted, with backoff).
    ping_seconds: float = Field(30.0, gt=0)
    call_timeout: float = Field(60.0, gt=0)

    @field_validator("servers")
    @classmethod
    def _unique(cls, servers: list[McpServerConfig]) -> list[McpServerConfig]:
        names = [s.name for s in servers]
        for name in names:
            if names.count(name) > 1:
                raise ValueError(f"two mcp servers named {name!r}")
        return servers


class ModelPrice(Section):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    cached_per_mtok: float | None = Field(None, ge=0)  # None: cached tokens cost as input


class BudgetConfig(Section):
    """Spend caps of one agent (agent/spend/budget.py); None: no cap."""

    daily_usd: float | None = Field(None, ge=0)
    monthly_usd: float | None = Field(None, ge=0)
    per_chat_daily_usd: float | None = Field(None, ge=0)  # each group or `allowed` chat
    # The owner's own chats are never stopped (heartbeat and cron runs still are).
    owner_exempt: bool = True
    # The day's cap in tokens while the model in use has no known price.
    daily_tokens: int | None = Field(None, ge=0)

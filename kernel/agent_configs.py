"""Several agents in one config: how `[agents.<name>]` becomes one agent's effective config,
and the checks that keep agents apart (their own workspace, their own bindings and bots).

`Config.for_agent` and the load-time validation call these; nothing else should. Kept out of
config.py so the models stay readable; the models are only referenced for typing here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from clawgate.kernel.errors import describe_validation

if TYPE_CHECKING:
    from clawgate.kernel.config import Config

MAIN = "main"
# Names end up in paths (<data_dir>/agents/<name>) and session keys (work/telegram:1).
AGENT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
# The top-level sections an agent may override key by key.
SECTIONS = ("channels", "tools", "memory", "cron", "heartbeat", "limits", "budget")
PLATFORMS = ("telegram", "discord")


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _merged(base: BaseModel, override: BaseModel | None) -> BaseModel:
    """`base` with the keys `override` names (and only those) replaced, validated again."""
    if override is None:
        return base
    data = _deep_merge(base.model_dump(), override.model_dump(exclude_unset=True))
    return type(base).model_validate(data)


def agent_dirs(root: Config, name: str) -> tuple[Path, Path]:
    """(workspace, data_dir) of an agent. main keeps the top-level ones, so a single-agent
    install keeps every file where it was."""
    spec = root.agents.get(name)
    if name == MAIN:
        data_dir = root.data_dir
        default_workspace = root.workspace
    else:
        data_dir = root.data_dir / "agents" / name
        default_workspace = data_dir / "workspace"
    workspace = spec.workspace if spec is not None and spec.workspace else default_workspace
    return workspace, data_dir


def derive_agent(root: Config, name: str) -> Config:
    """The single-agent config of `name`, unvalidated as a whole (its parts are validated).
    Raises ValidationError when an override does not fit the merged section."""
    spec = root.agents.get(name)
    workspace, data_dir = agent_dirs(root, name)
    # A single-agent config again (it validates as one): who it is for is `agent_name`.
    update: dict[str, Any] = {
        "workspace": workspace,
        "data_dir": data_dir,
        "agents": {},
        "default_agent": MAIN,
    }
    if spec is not None:
        agent_keys = set(type(root.agent).model_fields)
        own = spec.model_dump(exclude_unset=True, include=agent_keys)
        if "api_key_env" in own and "api_key" not in own:
            # Its own key variable, unset: never fall back to another agent's key.
            own["api_key"] = None
        update["agent"] = _merged(root.agent, type(root.agent).model_validate(own))
        for section in SECTIONS:
            update[section] = _merged(getattr(root, section), getattr(spec, section))
    if name != MAIN:
        # The heartbeat goes to the chat its agent names: main's chat is main's to ping.
        heartbeat = update.get("heartbeat", root.heartbeat)
        named = spec.heartbeat.model_fields_set if spec is not None and spec.heartbeat else set()
        if "deliver_to" not in named and heartbeat.deliver_to:
            update["heartbeat"] = heartbeat.model_copy(update={"deliver_to": ""})
    return root.model_copy(update=update)


def check_agents(config: Config) -> None:
    """Raise ValueError (one line) for agents that cannot be kept apart or do not exist."""
    if not config.agents and config.default_agent == MAIN:
        return
    names = [MAIN, *(n for n in config.agents if n != MAIN)]
    for name in names:
        if not AGENT_NAME.fullmatch(name):
            raise ValueError(
                f"agent name {name!r}: use lowercase letters, digits, '-' and '_' (max 32)"
            )
    if config.default_agent not in names:
        raise ValueError(
            f"default_agent {config.default_agent!r} is not an agent ({_known(names)})"
        )
    derived: dict[str, Config] = {}
    for name in names:
        try:
            derived[name] = derive_agent(config, name)
        except ValidationError as exc:
            raise ValueError(f"agents.{name}: {describe_validation(exc)}") from None
    for name, spec in config.agents.items():
        for other in spec.share_memory_from:
            if other not in names or other == name:
                raise ValueError(
                    f"agents.{name}.share_memory_from: {other!r} is not another agent "
                    f"({_known(names)})"
                )
    _check_workspaces(derived)
    _check_bindings(config)
    _check_bots(config, derived)


def _known(names: list[str]) -> str:
    return "known: " + ", ".join(names)


def _check_workspaces(derived: dict[str, Config]) -> None:
    places = [(name, Path(os.path.abspath(c.workspace))) for name, c in derived.items()]
    for i, (name, place) in enumerate(places):
        for other, other_place in places[i + 1 :]:
            if place == other_place:
                raise ValueError(f"agents {name} and {other} have the same workspace {place}")
            for inner, inner_place, outer, outer_place in (
                (name, place, other, other_place),
                (other, other_place, name, place),
            ):
                if inner_place.is_relative_to(outer_place):
                    raise ValueError(
                        f"the workspace of agent {inner} ({inner_place}) is inside agent "
                        f"{outer}'s ({outer_place})"
                    )


def _check_bindings(config: Config) -> None:
    claimed: dict[tuple[str, str | None, str | None], str] = {}
    for name, spec in config.agents.items():
        for binding in spec.bindings:
            key = (binding.channel, binding.chat, binding.guild)
            if key in claimed:
                raise ValueError(
                    f"binding {binding.label()} is claimed by agents {claimed[key]} and {name}"
                )
            claimed[key] = name


def own_token(root: Config, agent: Config, platform: str) -> str | None:
    """The token of an agent's own bot on `platform`, None when it uses the shared one (or
    has none enabled)."""
    mine = getattr(agent.channels, platform)
    shared = getattr(root.channels, platform)
    token = mine.token.get_secret_value() if mine.token else ""
    if not mine.enabled or not token:
        return None
    if shared.token and shared.token.get_secret_value() == token:
        return None
    return token


def _check_bots(config: Config, derived: dict[str, Config]) -> None:
    for name, spec in config.agents.items():
        for binding in spec.bindings:
            if own_token(config, derived[name], binding.channel) is not None:
                raise ValueError(
                    f"agent {name} has its own {binding.channel} bot: its binding "
                    f"{binding.label()} would take chats of the shared bot it cannot answer in"
                )
    for platform in PLATFORMS:
        owners: dict[str, str] = {}
        for name, agent in derived.items():
            if name == MAIN and MAIN not in config.agents:
                continue
            token = own_token(config, agent, platform)
            if token is None:
                continue
            if token in owners:
                raise ValueError(
                    f"agents {owners[token]} and {name} use the same {platform} bot; give one "
                    "of them its own token, or route chats of one bot with bindings"
                )
            owners[token] = name

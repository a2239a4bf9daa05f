"""The settings page: the effective config of the chosen agent, every key with its value
(secrets masked) and where it comes from - the config file, a `CLAWGATE_*` variable, or the
default - and a form for the keys an owner changes most (model, fallback models, the
heartbeat, limits).

A change goes through the round-trip editor `clawgate onboard` uses
(`gateway/setup/wizard.py` `edit_config` + `save`): the file keeps its comments, the result
must load as the gateway will read it (environment included) or nothing is written and the
form comes back with its values and one line saying why, and the write is atomic and 0600.
Only keys whose value the form changes are written. The running gateway applies the file
when it restarts; a key a variable overrides says so beside it.
"""

from __future__ import annotations

import asyncio
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from aiohttp import web
from pydantic import BaseModel, SecretStr

from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.services import DashboardServices
from clawgate.gateway.setup import wizard
from clawgate.kernel.config import CONFIG_ENV, ENV_PREFIX, Config, default_config_path
from clawgate.kernel.errors import ConfigError

MASK = "••••••••"
# Keys whose string values are secrets even when not typed as one.
SECRET_NAMES = ("token", "api_key", "password", "secret")
Path_ = tuple[str, ...]


@dataclass(frozen=True)
class Field:
    section: str
    key: str
    kind: type  # str, int, bool or list (of strings)
    label: str

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


EDITABLE = (
    Field("agent", "model", str, "Model"),
    Field("agent", "fallback_models", list, "Fallback models (comma-separated)"),
    Field("agent", "max_tool_iterations", int, "Tool calls per turn, at most"),
    Field("agent", "max_tokens", int, "Tokens per reply, at most"),
    Field("heartbeat", "enabled", bool, "Heartbeat on"),
    Field("heartbeat", "interval_minutes", int, "Heartbeat every (minutes)"),
    Field("heartbeat", "active_hours", str, "Heartbeat hours (HH:MM-HH:MM)"),
    Field("heartbeat", "deliver_to", str, "Heartbeat goes to (e.g. telegram:123)"),
    Field("limits", "messages_per_minute", int, "Messages per minute per sender (0: no limit)"),
)


@dataclass(frozen=True)
class Row:
    key: str
    value: str
    source: str  # "file", "env CLAWGATE_...", "default"


def routes(_services: DashboardServices) -> list[web.RouteDef]:
    return [web.get("/settings", settings_page), web.post("/settings", save)]


def config_file(svc: DashboardServices) -> Path:
    return svc.config_path or default_config_path()


def env_keys(environ: Mapping[str, str]) -> dict[Path_, str]:
    """Each key path a `CLAWGATE_*` variable overrides -> the variable (as load_config reads
    them)."""
    found = {}
    for name in environ:
        if name.startswith(ENV_PREFIX) and name != CONFIG_ENV:
            found[tuple(p.lower() for p in name[len(ENV_PREFIX) :].split("__"))] = name
    return found


def _has(data: Any, path: Path_) -> bool:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _own_path(agent: str | None, path: Path_) -> Path_:
    """Where `path` of agent `agent`'s effective config is set in its own section."""
    if agent is None:
        return path
    if path[0] == "agent":
        return ("agents", agent, *path[1:])
    return ("agents", agent, *path)


def source(path: Path_, agent: str | None, file_data: Any, env: dict[Path_, str]) -> str:
    for candidate in (_own_path(agent, path), path) if agent else (path,):
        for length in range(len(candidate), 0, -1):
            if candidate[:length] in env:
                return f"env {env[candidate[:length]]}"
        if _has(file_data, candidate):
            return "file" if candidate == path else f"file [agents.{agent}]"
    return "default"


def _flatten(value: Any, path: Path_) -> Iterator[tuple[Path_, Any]]:
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _flatten(getattr(value, name), (*path, name))
    elif isinstance(value, dict) and value and all(isinstance(k, str) for k in value):
        for name, item in value.items():
            yield from _flatten(item, (*path, name))
    else:
        yield path, value


def shown(path: Path_, value: Any) -> str:
    if isinstance(value, SecretStr):
        return MASK if value.get_secret_value() else "(not set)"
    if value and isinstance(value, str) and any(s in path[-1] for s in SECRET_NAMES):
        if not path[-1].endswith("_env"):  # the name of a variable, not its value
            return MASK
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value) or "(empty)"
    return str(value) if value != "" else '""'


def rows(config: Config, agent: str | None, file_data: Any, env: dict[Path_, str]) -> list[Row]:
    found = []
    for name in type(config).model_fields:
        if name == "agents":  # each agent is its own page (the header's switcher)
            continue
        for path, value in _flatten(getattr(config, name), (name,)):
            found.append(
                Row(".".join(path), shown(path, value), source(path, agent, file_data, env))
            )
    return found


def _read_file(path: Path) -> Any:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def current(config: Config, field: Field) -> Any:
    return getattr(getattr(config, field.section), field.key)


def form_value(field: Field, value: Any) -> str:
    if field.kind is list:
        return ", ".join(value)
    return str(value)


async def settings_page(request: web.Request) -> web.StreamResponse:
    svc = services(request)
    values = {f.name: form_value(f, current(svc.config, f)) for f in EDITABLE}
    return await _page(request, values, saved=request.query.get("saved"))


async def _page(
    request: web.Request,
    values: Mapping[str, str],
    *,
    saved: str | None = None,
    error: str = "",
    status: int = 200,
) -> web.Response:
    svc = services(request)
    path = config_file(svc)
    agent = None if svc.agent_name == svc.config.root.default_agent else svc.agent_name
    env = env_keys(os.environ)
    data = await asyncio.to_thread(_read_file, path)
    table = rows(svc.config, agent, data, env)
    text = svc.runtime.redact("\n".join(f"{r.key}\t{r.value}" for r in table))
    # The redactor masks any configured secret that a plain field happens to hold.
    table = [
        Row(r.key, line.split("\t", 1)[1], r.source)
        for r, line in zip(table, text.split("\n"), strict=True)
    ]
    sources = {r.key: r.source for r in table}
    return render(
        request,
        "settings.html",
        title="Settings",
        status=status,
        rows=table,
        fields=[(f, values[f.name], sources.get(f.name, "default")) for f in EDITABLE],
        config_path=str(path),
        saved=saved,
        error=error,
    )


def parse(field: Field, raw: str | None) -> Any:
    """A form field's value as the config holds it; ValueError with a line for a person."""
    if field.kind is bool:
        return raw is not None
    text = (raw or "").strip()
    if field.kind is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{field.name}: a whole number, not {text!r}") from None
    if field.kind is list:
        return [item.strip() for item in text.replace("\n", ",").split(",") if item.strip()]
    return text


async def write_changes(svc: DashboardServices, changes: Mapping[Field, Any]) -> None:
    """Set `changes` in the config file of the chosen agent's section, through onboard's
    round-trip editor; ConfigError (nothing written) if the result would not load."""
    agent = None if svc.agent_name == svc.config.root.default_agent else svc.agent_name
    path = config_file(svc)
    text, _ = await asyncio.to_thread(wizard.edit_config, path, apply(changes, agent))
    await asyncio.to_thread(wizard.save, path, text, svc.runtime.writer)


def apply(
    changes: Mapping[Field, Any], agent: str | None
) -> Callable[[tomlkit.TOMLDocument], None]:
    def change(document: tomlkit.TOMLDocument) -> None:
        for field, value in changes.items():
            table: Any = document
            for part in _own_path(agent, (field.section,)):
                if part not in table:
                    table[part] = tomlkit.table(is_super_table=part == "agents")
                table = table[part]
            table[field.key] = value

    return change


async def save(request: web.Request) -> web.StreamResponse:
    svc = services(request)
    form = await request.post()
    raw = {f.name: None if form.get(f.name) is None else str(form.get(f.name)) for f in EDITABLE}
    # What the form showed, to give back as typed when the change is refused.
    typed = {
        f.name: str(raw[f.name] is not None) if f.kind is bool else raw[f.name] or ""
        for f in EDITABLE
    }
    try:
        parsed = {f: parse(f, raw[f.name]) for f in EDITABLE}
    except ValueError as exc:
        return await _page(request, typed, error=str(exc), status=400)
    changes = {f: v for f, v in parsed.items() if v != current(svc.config, f)}
    if not changes:
        raise web.HTTPSeeOther("/settings?saved=nothing")
    try:
        await write_changes(svc, changes)
    except ConfigError as exc:
        return await _page(request, typed, error=str(exc), status=400)
    raise web.HTTPSeeOther("/settings?saved=1")

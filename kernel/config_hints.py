"""What `load_config` adds to pydantic's checks, so a mistake is told with its fix: the
known key a misspelt one was probably meant to be (`unknown key 'agent.modle' (did you
mean 'agent.model'?)`), and a model name that names no provider (`gpt-4o-mini` for
`openai/gpt-4o-mini`), which would otherwise pass until the first model call.

The models are walked through their fields, so a key added to a section is suggested
without a list kept here.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

from pydantic import BaseModel

from clawgate.kernel.errors import ConfigError

if TYPE_CHECKING:
    from clawgate.kernel.config import AgentConfig, Config

MODEL_EXAMPLE = "openai/gpt-4o-mini"


def did_you_mean(root: type[BaseModel], loc: Sequence[str | int]) -> str:
    """` (did you mean 'a.b'?)` for an unknown key at `loc`, or "" when nothing is close."""
    fields = _fields_at(root, loc[:-1])
    if not fields or not loc:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.6)
    if not close:
        return ""
    where = ".".join(str(part) for part in (*loc[:-1], close[0]))
    return f" (did you mean '{where}'?)"


def _fields_at(root: type[BaseModel], path: Sequence[str | int]) -> list[str] | None:
    """The keys the section at `path` takes; None when the path leads to no section."""
    annotation: Any = root
    for part in path:
        model = _model_in(annotation)
        if model is not None and str(part) in model.model_fields:
            annotation = model.model_fields[str(part)].annotation
            continue
        item = _item_of(annotation)  # `agents.<name>`, `bindings.<index>`
        if item is None:
            return None
        annotation = item
    model = _model_in(annotation)
    return list(model.model_fields) if model is not None else None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _item_of(annotation: Any) -> Any:
    for candidate in (annotation, *get_args(annotation)):
        if get_origin(candidate) in (dict, list) and get_args(candidate):
            return get_args(candidate)[-1]
    return None


def provider_missing(name: str) -> str | None:
    """Why a model name cannot be used as given (no `provider/` prefix), else None."""
    if not name or "/" in name.strip("/"):
        return None
    return f"{name!r} names no provider: write it as provider/name, e.g. {MODEL_EXAMPLE!r}"


def check_model_names(config: Config, path: Path, overrides: dict[tuple[str, ...], str]) -> None:
    """Every configured chat model names its provider (ConfigError naming the key)."""
    sections: list[tuple[tuple[str, ...], AgentConfig]] = [(("agent",), config.agent)]
    sections += [(("agents", name), spec) for name, spec in config.agents.items()]
    checks: list[tuple[tuple[str, ...], list[tuple[str, str]]]] = [
        (("heartbeat",), [("model", config.heartbeat.model)])
    ]
    for where, agent in sections:
        names = [("model", agent.model)]
        names += [(f"fallback_models.{i}", n) for i, n in enumerate(agent.fallback_models)]
        checks.append((where, names))
    for where, names in checks:
        for key, name in names:
            problem = provider_missing(name)
            if problem is None:
                continue
            loc = (*where, *key.split("."))
            source = overrides.get(loc) or overrides.get(loc[:-1]) or str(path)
            raise ConfigError(f"{source}: invalid value for '{'.'.join(loc)}': {problem}")

"""The config file's text, changed for a move with tomlkit (comments and layout kept):
secrets replaced by a placeholder (`backup --no-secrets`, `export`), and the data_dir and
workspaces pointed at the folder a backup is restored into."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import tomlkit

from clawgate.kernel.config import MAIN_AGENT
from clawgate.kernel.config_sections import SECRET_NAME

PLACEHOLDER = "REPLACE-ME-secret-removed-by-clawgate"


def without_secrets(text: str, secrets: Iterable[str]) -> tuple[str, list[str]]:
    """`text` with every value that is one of `secrets` replaced by PLACEHOLDER; and the
    dotted keys replaced, in file order."""
    document = tomlkit.parse(text)
    values = set(secrets)
    removed: list[str] = []
    _scrub(document, "", values, removed)
    return tomlkit.dumps(document), removed


def _scrub(node: Any, where: str, secrets: set[str], removed: list[str]) -> None:
    if isinstance(node, dict):
        for key in list(node.keys()):
            path = f"{where}.{key}" if where else str(key)
            value = node[key]
            if isinstance(value, str) and str(value) in secrets and _holds_secret(path):
                node[key] = PLACEHOLDER
                removed.append(path)
            else:
                _scrub(value, path, secrets, removed)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            _scrub(item, f"{where}[{index}]", secrets, removed)


def _holds_secret(path: str) -> bool:
    """A key the config keeps secrets under: a secret-sounding name (api_key, token, an MCP
    server's secret-named environment variable) or an MCP server's header. A value that only
    happens to equal a secret elsewhere (a model name, say) stays."""
    parent, _, name = path.rpartition(".")
    return bool(SECRET_NAME.search(name)) or parent.endswith(".headers")


def pointed_at(text: str, data_dir: Path, workspaces: dict[str, Path]) -> str:
    """`text` with `data_dir` set, and the workspace of every agent in `workspaces` that the
    file places by hand (main's always: its default is relative to the home, not the data_dir)."""
    document = tomlkit.parse(text)
    document["data_dir"] = str(data_dir)
    agents = document.get("agents")
    for name, workspace in workspaces.items():
        if name == MAIN_AGENT:
            document["workspace"] = str(workspace)
        elif isinstance(agents, dict) and isinstance(agents.get(name), dict):
            if "workspace" in agents[name]:
                agents[name]["workspace"] = str(workspace)
    return tomlkit.dumps(document)


def key_variables(text: str) -> list[str]:
    """The environment variables the config reads model keys from (`api_key_env`): never in
    a backup, so the new machine must set them."""
    document = tomlkit.parse(text)
    agents = document.get("agent"), *dict(document.get("agents") or {}).values()
    found = [str(a["api_key_env"]) for a in agents if isinstance(a, dict) and a.get("api_key_env")]
    return list(dict.fromkeys(found))

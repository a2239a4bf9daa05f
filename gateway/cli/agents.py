"""`clawgate agents`: the agents one config defines, each with its workspace, model and what
reaches it (its own bots, its bindings on a shared one). `clawgate status` shows the same
rows when no gateway runs. Its help is in root.COMMANDS."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import cli_context

if TYPE_CHECKING:
    from clawgate.kernel.config import Config

PLATFORMS = ("telegram", "discord")


@dataclass(frozen=True)
class AgentRow:
    """One agent as the CLI shows it (also its `--json` object)."""

    name: str
    default: bool
    workspace: str
    model: str
    # The bots it answers on: "telegram (own bot)", or the shared "telegram" (as its
    # agent or through bindings).
    channels: list[str]
    # Binding labels, e.g. "telegram (chat -100123)"; none: whatever routing leaves to it.
    bindings: list[str]
    # Agents whose memory it may search, read-only.
    share_memory_from: list[str]


def agent_rows(config: Config) -> list[AgentRow]:
    """Every agent of the whole config `config` belongs to, "main" first, with the bots the
    gateway's router would give it (raises the router's ConfigError for bindings it refuses)."""
    from clawgate.gateway.daemon.routing import Router

    root = config.root
    router = Router(root)
    rows = []
    for name in root.agent_names():
        agent = router.agents[name]
        spec = root.agents.get(name)
        channels = []
        for key in router.accounts_of(name):
            account = router.accounts[key]
            channels.append(f"{account.platform} (own bot)" if account.owner else key)
        rows.append(
            AgentRow(
                name=name,
                default=name == root.default_agent,
                workspace=str(agent.workspace),
                model=agent.agent.model,
                channels=channels,
                bindings=[b.label() for b in spec.bindings] if spec else [],
                share_memory_from=list(spec.share_memory_from) if spec else [],
            )
        )
    return rows


def describe(row: AgentRow) -> str:
    """One line: `work: workspace W, model M, channels telegram (own bot), bindings ...`."""
    name = f"{row.name} (default)" if row.default else row.name
    parts = [
        f"workspace {row.workspace}",
        f"model {row.model or '(none)'}",
        f"channels {', '.join(row.channels) or 'none'}",
    ]
    if row.bindings:
        parts.append(f"bindings {'; '.join(row.bindings)}")
    if row.share_memory_from:
        parts.append(f"reads the memory of {', '.join(row.share_memory_from)}")
    return f"{name}: {', '.join(parts)}"


def agents(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="A JSON array of the agents instead of lines.")
    ] = False,
) -> None:
    rows = agent_rows(cli_context(ctx).file_config())
    if as_json:
        typer.echo(json.dumps([asdict(row) for row in rows], indent=2, ensure_ascii=False))
        return
    for row in rows:
        typer.echo(describe(row))

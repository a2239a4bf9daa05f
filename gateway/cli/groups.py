"""`clawgate groups`: the groups that mentioned the bot, and letting one in.

The channels record every group that mentions the bot without being in `group_allow` in
`<data_dir>/groups.json` (see channels/groups.py); this is how the owner learns a group's
id. `allow` adds it to the config with tomlkit, so the file keeps its comments and layout.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail
from clawgate.gateway.cli.pairing import print_table

if TYPE_CHECKING:
    from clawgate.channels.groups import SeenGroup, SeenGroups
    from clawgate.kernel.config import Config

CHANNELS = ("telegram", "discord")

groups_app = typer.Typer(
    help="Groups that mentioned the bot, with their ids; `allow` lets one in.",
    invoke_without_command=True,
)


def _seen(config: Config) -> SeenGroups:
    from clawgate.channels.groups import SeenGroups

    return SeenGroups(config.data_dir / "groups.json")


def _allowed(config: Config, group: SeenGroup) -> bool:
    entries = {e.strip() for e in getattr(config.channels, group.channel).group_allow}
    return group.group_id in entries or (group.guild_id or "") in entries


@groups_app.callback()
def groups_list(
    ctx: typer.Context,
    agent: AgentOption = None,
) -> None:
    """Groups that mentioned the bot: id, title, last seen, and whether they are served."""
    if ctx.invoked_subcommand is not None:
        return
    config = cli_context(ctx).config()
    groups = _seen(config).seen()
    if not groups:
        typer.echo(
            "no groups seen yet: add the bot to a group and mention it there (with BotFather's "
            "privacy mode on, a Telegram bot only sees messages that mention it)"
        )
        return
    rows = [
        (
            g.channel,
            g.group_id,
            g.title or "-",
            datetime.fromtimestamp(g.last_seen).astimezone().strftime("%Y-%m-%d %H:%M"),
            g.mentioned_by or "-",
            "yes" if _allowed(config, g) else "no",
        )
        for g in groups
    ]
    print_table(("channel", "group id", "title", "last seen", "mentioned by", "allowed"), rows)
    if not all(_allowed(config, g) for g in groups):
        typer.echo("to serve a group: clawgate groups allow ID")


def _channel_of(config: Config, group_id: str, channel: str | None) -> str:
    if channel is not None:
        if channel not in CHANNELS:
            fail(f"unknown channel {channel!r} (use {' or '.join(CHANNELS)})")
        return channel
    found = {g.channel for g in _seen(config).seen() if group_id in (g.group_id, g.guild_id)}
    if len(found) == 1:
        return found.pop()
    if found:
        fail(f"group {group_id} was seen on {' and '.join(sorted(found))}: add --channel")
    fail(f"group {group_id} has not mentioned the bot yet: add --channel telegram or discord")


# Telegram group ids are negative: without this click would read "-100123" as an option.
@groups_app.command("allow", context_settings={"ignore_unknown_options": True})
def groups_allow(
    ctx: typer.Context,
    group_id: Annotated[str, typer.Argument(help="The group's id, as `clawgate groups` shows.")],
    channel: Annotated[
        str | None, typer.Option("--channel", help="telegram or discord (found when seen).")
    ] = None,
    agent: AgentOption = None,
) -> None:
    """Add a group to the channel's group_allow in the config file (comments are kept). For
    an agent sharing the bot with others, also bind the group to it, so it is routed there."""
    import tomlkit

    from clawgate.gateway.onboard_setup import edit_config, save
    from clawgate.kernel.agents import own_token
    from clawgate.kernel.config import MAIN_AGENT

    context = cli_context(ctx)
    config = context.config()
    group_id = group_id.strip()
    name = _channel_of(config, group_id, channel)
    path = context.config_path
    agent_name = config.agent_name
    present = group_id in {e.strip() for e in getattr(config.channels, name).group_allow}
    # main's access rules are the top-level ones, whatever [agents.main] says.
    spec = config.root.agents.get(agent_name) if agent_name != MAIN_AGENT else None
    bound = spec is None or any(
        b.channel == name and group_id in (b.chat, b.guild) for b in spec.bindings
    )
    # An agent with its own bot gets that bot's chats; on a shared bot only what is bound.
    bound = bound or own_token(config.root, config, name) is not None
    if present and bound:
        typer.echo(f"{name} group {group_id} is already in group_allow of {path}")
        return
    guild = any(g.guild_id == group_id for g in _seen(config).seen() if g.channel == name)

    def add(document: tomlkit.TOMLDocument) -> None:
        root: Any = document
        if spec is not None:
            root = document.setdefault("agents", tomlkit.table(is_super_table=True)).setdefault(
                agent_name, tomlkit.table()
            )
        channels = root.setdefault("channels", tomlkit.table(is_super_table=True))
        section = channels.setdefault(name, tomlkit.table())
        if not present:
            # An agent's own list replaces the inherited one: start from what it has now.
            if "group_allow" not in section:
                section["group_allow"] = tomlkit.array()
                if spec is not None:
                    section["group_allow"].extend(
                        _id(e) for e in getattr(config.channels, name).group_allow
                    )
            section["group_allow"].append(_id(group_id))
        if not bound:
            binding = tomlkit.inline_table()
            binding.update({"channel": name, "guild" if guild else "chat": _id(group_id)})
            root.setdefault("bindings", tomlkit.array()).append(binding)

    new_text, _ = edit_config(path, add)
    save(path, new_text)
    where = f"[channels.{name}]" if spec is None else f"[agents.{agent_name}.channels.{name}]"
    done = [] if present else [f"added {group_id} to {where} group_allow"]
    done += [] if bound else [f"bound it to agent {agent_name} ([agents.{agent_name}] bindings)"]
    typer.echo(f"{' and '.join(done)} in {path}; restart the gateway to apply it")


def _id(value: str) -> int | str:
    # Ids as numbers, the way the README writes them; anything else stays a string.
    return int(value) if re.fullmatch(r"-?\d+", value) else value

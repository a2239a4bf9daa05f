"""`clawgate groups`: the groups that mentioned the bot, and letting one in.

The channels record every group that mentions the bot without being in `group_allow` in
`<data_dir>/groups.json` (see channels/groups.py); this is how the owner learns a group's
id. `allow` adds it to the config with tomlkit, so the file keeps its comments and layout.

With several agents a group is let in by the bot it writes to (gateway/routing.py): an
agent's own bot has its own rules and groups.json; a bot several agents share has its
agent's (the default agent's), and a group reaches another agent only through a binding.
`--agent NAME` therefore lists the groups NAME's bots saw, and `allow` writes the rules of
the bot NAME answers through, plus NAME's own list and binding where it needs them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import tomlkit
import typer

from clawgate.gateway.cli.agents import bot_config
from clawgate.gateway.cli.context import AgentOption, cli_context, fail
from clawgate.gateway.cli.pairing import print_table
from clawgate.kernel.config import MAIN_AGENT

if TYPE_CHECKING:
    from clawgate.channels.groups import SeenGroup
    from clawgate.kernel.config import Config

CHANNELS = ("telegram", "discord")

groups_app = typer.Typer(
    help="Groups that mentioned the bot, with their ids; `allow` lets one in.",
    invoke_without_command=True,
)


def _seen(config: Config) -> list[SeenGroup]:
    from clawgate.channels.groups import SeenGroups

    found = []
    for platform in CHANNELS:
        bot = bot_config(config, platform)
        seen = SeenGroups(bot.data_dir / "groups.json").seen()
        found += [g for g in seen if g.channel == platform]
    return sorted(found, key=lambda g: g.last_seen, reverse=True)


def _allowed(config: Config, group: SeenGroup) -> bool:
    rules = getattr(bot_config(config, group.channel).channels, group.channel)
    entries = {e.strip() for e in rules.group_allow}
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
    groups = _seen(config)
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
    found = {g.channel for g in _seen(config) if group_id in (g.group_id, g.guild_id)}
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
    an agent that shares the bot with others, also bind the group to it."""
    from clawgate.gateway.onboard_setup import edit_config, save
    from clawgate.kernel.agents import own_token

    context = cli_context(ctx)
    config = context.config()
    group_id = group_id.strip()
    name = _channel_of(config, group_id, channel)
    path = context.config_path
    bot = bot_config(config, name)
    # The bot's rules let the group in; the agent's own list, if it has one, must agree.
    targets = [bot]
    spec = config.root.agents.get(config.agent_name)
    if bot.agent_name != config.agent_name and spec is not None and spec.channels is not None:
        if "group_allow" in getattr(spec.channels, name).model_fields_set:
            targets.append(config)
    missing = [t for t in targets if group_id not in _entries(t, name)]
    guild = any(g.guild_id == group_id for g in _seen(config) if g.channel == name)
    bind = (
        spec is not None
        and config.agent_name != bot.agent_name
        and own_token(config.root, config, name) is None
        and not any(b.channel == name and group_id in (b.chat, b.guild) for b in spec.bindings)
    )
    if not missing and not bind:
        typer.echo(f"{name} group {group_id} is already in group_allow of {path}")
        return

    def add(document: tomlkit.TOMLDocument) -> None:
        for target in missing:
            # main's list is the file's own; another agent's starts from what it inherits.
            start = [] if target.agent_name == MAIN_AGENT else _entries(target, name)
            _allow_in(_section_of(document, target), name, group_id, start)
        if bind:
            binding = tomlkit.inline_table()
            binding.update({"channel": name, "guild" if guild else "chat": _id(group_id)})
            section = _section_of(document, config)
            section.setdefault("bindings", tomlkit.array()).append(binding)

    new_text, _ = edit_config(path, add)
    save(path, new_text)
    done = [f"added {group_id} to [{_where(t)}channels.{name}] group_allow" for t in missing]
    if bind:
        done.append(
            f"bound it to agent {config.agent_name} ([agents.{config.agent_name}] bindings)"
        )
    typer.echo(f"{' and '.join(done)} in {path}; restart the gateway to apply it")


def _entries(config: Config, platform: str) -> list[str]:
    return [e.strip() for e in getattr(config.channels, platform).group_allow]


def _where(config: Config) -> str:
    return "" if config.agent_name == MAIN_AGENT else f"agents.{config.agent_name}."


def _section_of(document: tomlkit.TOMLDocument, config: Config) -> Any:
    """The table holding `config`'s agent's keys: the top level for main (its rules are the
    top-level ones), else `[agents.<name>]`."""
    if config.agent_name == MAIN_AGENT:
        return document
    agents = document.setdefault("agents", tomlkit.table(is_super_table=True))
    return agents.setdefault(config.agent_name, tomlkit.table())


def _allow_in(section: Any, platform: str, group_id: str, start: list[str]) -> None:
    rules = section.setdefault("channels", tomlkit.table(is_super_table=True)).setdefault(
        platform, tomlkit.table()
    )
    if "group_allow" not in rules:
        # A list of its own replaces what an agent inherits, so it starts from that.
        rules["group_allow"] = tomlkit.array()
        rules["group_allow"].extend(_id(e) for e in start)
    rules["group_allow"].append(_id(group_id))


def _id(value: str) -> int | str:
    # Ids as numbers, the way the README writes them; anything else stays a string.
    return int(value) if re.fullmatch(r"-?\d+", value) else value

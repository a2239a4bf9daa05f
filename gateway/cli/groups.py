"""`clawgate groups`: the groups that mentioned the bot, and letting one in.

The channels record every group that mentions the bot without being in `group_allow` in
`<data_dir>/groups.json` (see channels/groups.py); this is how the owner learns a group's
id. `allow` adds it to the config with tomlkit, so the file keeps its comments and layout.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

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
    """Add a group to the channel's group_allow in the config file (comments are kept)."""
    import tomlkit

    from clawgate.gateway.onboard_setup import edit_config, save

    context = cli_context(ctx)
    config = context.config()
    group_id = group_id.strip()
    name = _channel_of(config, group_id, channel)
    path = context.config_path
    present = False

    def add(document: tomlkit.TOMLDocument) -> None:
        nonlocal present
        section = document.setdefault("channels", tomlkit.table()).setdefault(name, tomlkit.table())
        entries = section.setdefault("group_allow", tomlkit.array())
        present = group_id in {str(e).strip() for e in entries}
        if not present:
            # Ids as numbers, the way the README writes them; anything else stays a string.
            entries.append(int(group_id) if re.fullmatch(r"-?\d+", group_id) else group_id)

    new_text, _ = edit_config(path, add)
    if present:
        typer.echo(f"{name} group {group_id} is already in group_allow of {path}")
        return
    save(path, new_text)
    typer.echo(
        f"added {group_id} to [channels.{name}] group_allow in {path}; "
        "restart the gateway to apply it"
    )

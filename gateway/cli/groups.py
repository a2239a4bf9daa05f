"""`clawgate groups`: the groups that mentioned the bot, and letting one in.

The channels record every group that mentions the bot without being in `group_allow` in
`<data_dir>/groups.json` (see channels/groups.py); this is how the owner learns a group's
id. `allow` adds it to the config with tomlkit, so the file keeps its comments and layout.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import cli_context
from clawgate.gateway.cli.pairing import print_table

if TYPE_CHECKING:
    from clawgate.channels.groups import SeenGroups
    from clawgate.kernel.config import Config

groups_app = typer.Typer(
    help="Groups that mentioned the bot, with their ids; `allow` lets one in.",
    invoke_without_command=True,
)


def _seen(config: Config) -> SeenGroups:
    from clawgate.gateway.people import seen_groups

    return seen_groups(config)


@groups_app.callback()
def groups_list(ctx: typer.Context) -> None:
    """Groups that mentioned the bot: id, title, last seen, and whether they are served."""
    if ctx.invoked_subcommand is not None:
        return
    from clawgate.gateway.people import group_allowed

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
            "yes" if group_allowed(config, g) else "no",
        )
        for g in groups
    ]
    print_table(("channel", "group id", "title", "last seen", "mentioned by", "allowed"), rows)
    if not all(group_allowed(config, g) for g in groups):
        typer.echo("to serve a group: clawgate groups allow ID")


# Telegram group ids are negative: without this click would read "-100123" as an option.
@groups_app.command("allow", context_settings={"ignore_unknown_options": True})
def groups_allow(
    ctx: typer.Context,
    group_id: Annotated[str, typer.Argument(help="The group's id, as `clawgate groups` shows.")],
    channel: Annotated[
        str | None, typer.Option("--channel", help="telegram or discord (found when seen).")
    ] = None,
) -> None:
    """Add a group to the channel's group_allow in the config file (comments are kept)."""
    from clawgate.gateway.people import allow_group

    context = cli_context(ctx)
    edit = allow_group(context.config_path, context.config(), group_id, channel)
    if not edit.changed:
        typer.echo(f"{edit.channel} group {edit.group_id} is already in group_allow of {edit.path}")
        return
    typer.echo(
        f"added {edit.group_id} to [channels.{edit.channel}] group_allow in {edit.path}; "
        "restart the gateway to apply it"
    )

"""`clawgate groups`: the groups that mentioned the bot, and letting one in.

The channels record every group that mentions the bot without being in `group_allow` in
`<data_dir>/groups.json` (see channels/groups.py); this is how the owner learns a group's
id. `allow` adds it to the config with tomlkit, so the file keeps its comments and layout.
With several agents, `--agent NAME` lists the groups NAME's bots saw, and `allow` writes the
rules of the bot NAME answers through, plus NAME's own list and binding where it needs them
(gateway/setup/approvals.py, which the dashboard's people page uses too).
Its help is in root.COMMANDS."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context
from clawgate.gateway.cli.pairing import print_table

groups_app = typer.Typer(invoke_without_command=True)


@groups_app.callback()
def groups_list(
    ctx: typer.Context,
    agent: AgentOption = None,
) -> None:
    """Groups that mentioned the bot: id, title, last seen, and whether they are served."""
    if ctx.invoked_subcommand is not None:
        return
    from clawgate.gateway.setup.approvals import group_allowed, seen

    config = cli_context(ctx).config()
    groups = seen(config)
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
    agent: AgentOption = None,
) -> None:
    """Add a group to the channel's group_allow in the config file (comments are kept). For
    an agent that shares the bot with others, also bind the group to it."""
    from clawgate.gateway.setup.approvals import allow_group

    context = cli_context(ctx)
    typer.echo(allow_group(context.config_path, context.config(), group_id, channel).summary())

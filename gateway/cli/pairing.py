"""`clawgate pairing`: the owner lets people in (or out). The running gateway picks up every
change from `<data_dir>/pairing.json` on the next message, without a restart. Approvals
belong to a bot: `--agent NAME` manages those of NAME's own bot
(`<data_dir>/agents/NAME/pairing.json`), or of the shared bot when NAME has none; one file
for all when the config sets `pairing_scope = "global"`. Its help is in root.COMMANDS."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail

if TYPE_CHECKING:
    from clawgate.channels.pairing import Approval, PairingStore
    from clawgate.kernel.config import Config

pairing_app = typer.Typer(no_args_is_help=True)


def _bot(ctx: typer.Context) -> Config:
    """The config whose approvals and owner rules the command works on: the agent's own
    bot's, or the shared bot's (see `pairing_config`)."""
    from clawgate.gateway.setup.approvals import pairing_config

    return pairing_config(cli_context(ctx).config())


def _store(ctx: typer.Context) -> PairingStore:
    from clawgate.channels.pairing import PairingStore

    # Everyone's approvals in one file when the config says pairing_scope = "global".
    return PairingStore(_bot(ctx).pairing_file)


ChannelOption = Annotated[
    str | None, typer.Option("--channel", help="Only on this channel, e.g. telegram.")
]


def print_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    """A table of `rows`; every cell sanitised and shown as plain text, since titles and
    names come from outsiders: no control character reaches the terminal, and rich markup in
    a name ("[link=...]") stays text."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from clawgate.kernel.sanitise import sanitise

    table = Table(*headers)
    for row in rows:
        table.add_row(*(Text(sanitise(cell)) for cell in row))
    # Outside a terminal rich would assume 80 columns and cut ids with "…"; nothing here is
    # long, so give it room instead.
    width = None if sys.stdout.isatty() else 200
    Console(width=width).print(table)


@pairing_app.command("list")
def pairing_list(
    ctx: typer.Context,
    agent: AgentOption = None,
) -> None:
    """Pending pairing requests, with the code each person was given."""
    import time

    from clawgate.channels.pairing import CODE_TTL_SECONDS
    from clawgate.gateway.setup.approvals import channels_with_configured_owner

    store = _store(ctx)
    pending = store.pending()
    config = _bot(ctx)
    configured = channels_with_configured_owner(config)
    if not pending:
        typer.echo("no pending pairing requests")
        for channel in ("telegram", "discord"):
            enabled = getattr(config.channels, channel).enabled
            if enabled and channel not in configured and not store.has_owner(channel):
                typer.echo(
                    f"{channel} has no owner yet: send the bot a private message, it answers "
                    "with the command that makes you the owner"
                )
        return
    now = time.time()
    rows = []
    for p in pending:
        minutes = max(0, int((p.created_at + CODE_TTL_SECONDS - now) // 60))
        rows.append((p.channel, p.user_id, p.username or "-", p.code, f"{minutes} min"))
    print_table(("channel", "user id", "username", "code", "expires in"), rows)
    for channel in sorted({p.channel for p in pending}):
        if channel not in configured and not store.has_owner(channel):
            typer.echo(
                f"{channel} has no owner yet: `clawgate pairing approve CODE` makes that person "
                "the owner (add --allowed for a plain user); the bot told you your user id, "
                "check it is yours"
            )


@pairing_app.command("approve")
def pairing_approve(
    ctx: typer.Context,
    code: Annotated[str, typer.Argument(help="The 8-character code the person was sent.")],
    owner: Annotated[
        bool, typer.Option("--owner", help="Make them an owner: they get your private memory.")
    ] = False,
    allowed: Annotated[
        bool,
        typer.Option("--allowed", help="A plain user, even when the channel has no owner yet."),
    ] = False,
    agent: AgentOption = None,
) -> None:
    """Let the person who was sent CODE chat with the assistant. While a channel has no owner,
    the first person approved becomes its owner (unless --allowed)."""
    if owner and allowed:
        fail("--owner and --allowed exclude each other")
    from clawgate.gateway.setup.approvals import approve

    role: bool | None = True if owner else False if allowed else None
    config = _bot(ctx)
    approval = approve(_store(ctx), config, code, role)
    if role is None and approval.owner:
        typer.echo(
            f"approved {approval.who} as the owner (the first approval makes the owner; "
            f"`clawgate pairing demote {approval.user_id}` makes them a plain user); "
            "they can chat now"
        )
    else:
        typer.echo(f"approved {approval.who} as {approval.role}; they can chat now")
    _welcome(config, approval)


def _welcome(config: Config, approval: Approval) -> None:
    """Tell them (their first message got the code, not an answer): see setup/welcome.py."""
    import asyncio

    from clawgate.gateway.setup.welcome import tell_approved, welcome_text

    outcome = asyncio.run(tell_approved(config, approval))
    if outcome == "sent":
        typer.echo(f'told them: "{welcome_text(approval)}"')
    elif outcome:
        typer.echo(f"could not tell them ({outcome}): ask them to send their message again")


@pairing_app.command("promote")
def pairing_promote(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="Their user id (or @username).")],
    channel: ChannelOption = None,
    agent: AgentOption = None,
) -> None:
    """Make an approved person an owner: they get your private memory."""
    for approval in _store(ctx).set_owner(user, channel, True):
        typer.echo(f"{approval.who} is now an owner")


@pairing_app.command("demote")
def pairing_demote(
    ctx: typer.Context,
    user: Annotated[str, typer.Argument(help="Their user id (or @username).")],
    channel: ChannelOption = None,
    agent: AgentOption = None,
) -> None:
    """Make an owner approved through pairing a plain allowed user."""
    for approval in _store(ctx).set_owner(user, channel, False):
        typer.echo(f"{approval.who} is now an allowed user")


@pairing_app.command("deny")
def pairing_deny(
    ctx: typer.Context,
    code: Annotated[str, typer.Argument(help="The code of the request to drop.")],
    agent: AgentOption = None,
) -> None:
    """Drop a pending request.

    If they write again, they get a new code."""
    dropped = _store(ctx).deny(code)
    typer.echo(f"denied {dropped.who} (code {dropped.code})")


@pairing_app.command("clear")
def pairing_clear(
    ctx: typer.Context,
    channel: ChannelOption = None,
    agent: AgentOption = None,
) -> None:
    """Drop every pending request."""
    dropped = _store(ctx).clear(channel)
    if not dropped:
        typer.echo("no pending pairing requests")
        return
    for pending in dropped:
        typer.echo(f"dropped {pending.who} (code {pending.code})")


@pairing_app.command("revoke")
def pairing_revoke(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Argument(help="Their user id (or @username).")],
    channel: ChannelOption = None,
    agent: AgentOption = None,
) -> None:
    """Withdraw an approval. People listed in the config's allow_from are not affected."""
    removed = _store(ctx).revoke(user_id, channel)
    for approval in removed:
        typer.echo(f"revoked {approval.who}")


@pairing_app.command("approved")
def pairing_approved(
    ctx: typer.Context,
    channel: ChannelOption = None,
    agent: AgentOption = None,
) -> None:
    """Everyone approved through pairing (allow_from in the config comes on top)."""
    approvals: list[Approval] = _store(ctx).approved(channel)
    if not approvals:
        typer.echo("nobody approved through pairing yet")
        return
    rows = [
        (
            a.channel,
            a.user_id,
            a.username or "-",
            "owner" if a.owner else "allowed",
            datetime.fromtimestamp(a.approved_at).astimezone().strftime("%Y-%m-%d %H:%M"),
        )
        for a in sorted(approvals, key=lambda a: (a.channel, a.approved_at))
    ]
    print_table(("channel", "user id", "username", "role", "approved"), rows)

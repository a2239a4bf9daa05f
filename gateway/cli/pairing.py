"""`clawgate pairing`: the owner lets people in (or out). The running gateway picks up every
change from `<data_dir>/pairing.json` on the next message, without a restart."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import cli_context

if TYPE_CHECKING:
    from clawgate.channels.pairing import Approval, PairingStore

pairing_app = typer.Typer(
    help="Approve who may chat with the assistant in private.", no_args_is_help=True
)


def _store(ctx: typer.Context) -> PairingStore:
    from clawgate.channels.pairing import PairingStore

    config = cli_context(ctx).config()
    return PairingStore(config.data_dir / "pairing.json")


def _who(channel: str, user_id: str, username: str | None) -> str:
    name = f" (@{username.removeprefix('@')})" if username else ""
    return f"{channel} user {user_id}{name}"


def _print_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*headers)
    for row in rows:
        table.add_row(*row)
    # Outside a terminal rich would assume 80 columns and cut ids with "…"; nothing here is
    # long, so give it room instead.
    width = None if sys.stdout.isatty() else 200
    Console(width=width).print(table)


@pairing_app.command("list")
def pairing_list(ctx: typer.Context) -> None:
    """Pending pairing requests, with the code each person was given."""
    import time

    from clawgate.channels.pairing import CODE_TTL_SECONDS

    pending = _store(ctx).pending()
    if not pending:
        typer.echo("no pending pairing requests")
        return
    now = time.time()
    rows = []
    for p in pending:
        minutes = max(0, int((p.created_at + CODE_TTL_SECONDS - now) // 60))
        rows.append((p.channel, p.user_id, p.username or "-", p.code, f"{minutes} min"))
    _print_table(("channel", "user id", "username", "code", "expires in"), rows)


@pairing_app.command("approve")
def pairing_approve(
    ctx: typer.Context,
    code: Annotated[str, typer.Argument(help="The 8-character code the person was sent.")],
    owner: Annotated[
        bool, typer.Option("--owner", help="Make them an owner: they get your private memory.")
    ] = False,
) -> None:
    """Let the person who was sent CODE chat with the assistant."""
    approval = _store(ctx).approve(code, owner=owner)
    role = "an owner" if approval.owner else "an allowed user"
    who = _who(approval.channel, approval.user_id, approval.username)
    typer.echo(f"approved {who} as {role}; they can chat now")


@pairing_app.command("revoke")
def pairing_revoke(
    ctx: typer.Context,
    user_id: Annotated[str, typer.Argument(help="Their user id (or @username).")],
    channel: Annotated[
        str | None, typer.Option("--channel", help="Only on this channel, e.g. telegram.")
    ] = None,
) -> None:
    """Withdraw an approval. People listed in the config's allow_from are not affected."""
    removed = _store(ctx).revoke(user_id, channel)
    for approval in removed:
        typer.echo(f"revoked {_who(approval.channel, approval.user_id, approval.username)}")


@pairing_app.command("approved")
def pairing_approved(
    ctx: typer.Context,
    channel: Annotated[
        str | None, typer.Option("--channel", help="Only this channel, e.g. telegram.")
    ] = None,
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
    _print_table(("channel", "user id", "username", "role", "approved"), rows)

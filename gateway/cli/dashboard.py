"""`clawgate dashboard`: a one-time login link for the browser dashboard the gateway serves
(and `--rotate`, a new token that logs every browser out). Imports no web server: the
gateway serves; this command only writes a login code the gateway will accept once.
It prints one link: with a browser to open, the dashboard's address (the code reaches the
browser through a 0600 page, dashboard/login_link.py); otherwise the login link itself.
Its help is in root.COMMANDS."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlsplit

import typer

from clawgate.gateway.cli.context import cli_context

if TYPE_CHECKING:
    from clawgate.gateway.setup.onboard import OnboardResult


def dashboard(
    ctx: typer.Context,
    rotate: Annotated[
        bool, typer.Option("--rotate", help="Make a new token: every browser is logged out.")
    ] = False,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Print the link only; do not open a browser.")
    ] = False,
) -> None:
    from clawgate.gateway.dashboard.auth import (
        LOGIN_CODE_SECONDS,
        ensure_token,
        issue_login_code,
        read_token,
        rotate_token,
        token_path,
    )
    from clawgate.gateway.dashboard.login_link import open_login_page, site_url, write_login_page
    from clawgate.gateway.ops.rendezvous import prove, read_record

    config = cli_context(ctx).config()
    settings = config.dashboard
    if rotate:
        rotate_token(config.data_dir)
        typer.echo(f"new token in {token_path(config.data_dir)}; every browser is logged out")
    elif ensure_token(config.data_dir):
        typer.echo(f"created  {token_path(config.data_dir)}")
    if not settings.enabled:
        typer.echo("the dashboard is off: set [dashboard] enabled = true and restart the gateway")
        return
    # Any account can listen on the port first: make a link only for the gateway's own.
    record = read_record(config.data_dir)
    if record is None:
        typer.echo(
            "the gateway is not running: start it with `clawgate gateway`, then run "
            "`clawgate dashboard` again for a login link"
        )
        return
    url = site_url(settings, read_token(config.data_dir) or "")
    site = urlsplit(url).hostname or ""
    refused = prove(record, _listen_address(settings.host), settings.port, site=site)
    if refused is not None:
        typer.echo(f"clawgate: {refused}", err=True)
        raise typer.Exit(1)
    link = f"{url}login?code={issue_login_code(config.data_dir)}"
    minutes = LOGIN_CODE_SECONDS // 60
    # The code goes to the browser through a file only this account reads: a command line
    # is readable by every account.
    if not no_open and _has_display():
        page = write_login_page(config.data_dir, link)
        if open_login_page(page):
            typer.echo(f"dashboard: {url}")
            typer.echo(f"logging in through {page} (once, within {minutes} minutes)")
            return
    typer.echo(f"log in (once, within {minutes} minutes): {link}")


def _listen_address(host: str) -> str:
    """Where this machine reaches a dashboard bound to `host`."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host.strip("[]")


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def add_dashboard_token(config_path: Path, result: OnboardResult) -> None:
    """Onboard's part: the dashboard token beside the other data, made once."""
    from clawgate.gateway.dashboard.auth import ensure_token, token_path
    from clawgate.kernel.config import load_config

    data_dir = load_config(config_path).data_dir
    made = ensure_token(data_dir)
    (result.created if made else result.kept).append(token_path(data_dir))

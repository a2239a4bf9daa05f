"""`clawgate dashboard`: a one-time login link for the browser dashboard the gateway serves
(and `--rotate`, a new token that logs every browser out). Imports no web server: the
gateway serves; this command only writes a login code the gateway will accept once.
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
    from clawgate.kernel.config import DashboardConfig


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
        rotate_token,
        token_path,
    )
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
    address = urlsplit(base_url(settings))
    refused = prove(record, address.hostname or "127.0.0.1", address.port or 80)
    if refused is not None:
        typer.echo(f"clawgate: {refused}", err=True)
        raise typer.Exit(1)
    link = f"{base_url(settings)}login?code={issue_login_code(config.data_dir)}"
    typer.echo(f"dashboard: {base_url(settings)}")
    typer.echo(f"log in (once, within {LOGIN_CODE_SECONDS // 60} minutes): {link}")
    if not no_open and _has_display():
        import webbrowser

        webbrowser.open(link)


def base_url(settings: DashboardConfig) -> str:
    host = settings.host
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # listening everywhere: this machine reaches it on loopback
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}/"


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

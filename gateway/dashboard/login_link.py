"""The login link `clawgate dashboard` hands out, and how it reaches the browser.

The link's host is the site host (auth.site_host) when the dashboard listens on loopback or
on every address: the name the server answers under and the one the cookie is scoped to.
A dashboard bound to one other address is reached under that address, as configured.

A browser's command line is readable by every account on the machine (/proc/*/cmdline), so
the link with its one-time code never goes there. Instead the code goes into a small page,
`<data_dir>/dashboard-login/login.html` (0600, in a 0700 folder, replaced on each run),
which sends the browser on to the link; the browser is started with that file's path only.
The code is still single-use and expires after auth.LOGIN_CODE_SECONDS.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from clawgate.gateway.dashboard.auth import is_loopback, site_host
from clawgate.kernel.config import DashboardConfig
from clawgate.kernel.storage import DiskWriter

LOGIN_PAGE_DIR = "dashboard-login"
LOGIN_PAGE = "login.html"
_EVERY_ADDRESS = ("0.0.0.0", "::", "")


def site_url(settings: DashboardConfig, token: str) -> str:
    """The dashboard's address as a browser on this machine opens it."""
    host = settings.host
    if host in _EVERY_ADDRESS or is_loopback(host):
        host = site_host(token)
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{settings.port}/"


def write_login_page(data_dir: Path, link: str, writer: DiskWriter | None = None) -> Path:
    """The page that takes a browser to `link`, readable by this account only; its path."""
    folder = data_dir / LOGIN_PAGE_DIR
    writer = writer or DiskWriter()
    writer.mkdir(folder, mode=0o700)
    os.chmod(folder, 0o700)  # an older folder keeps the mode it was made with
    target = html.escape(link, quote=True)
    page = (
        "<!doctype html>\n"
        '<meta charset="utf-8">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f'<meta http-equiv="refresh" content="0;url={target}">\n'
        "<title>clawgate: logging in</title>\n"
        f'<p>Logging in to <a href="{target}">the dashboard</a>.</p>\n'
    )
    path = folder / LOGIN_PAGE
    writer.replace(path, page, mode=0o600)
    return path


def open_login_page(page: Path) -> bool:
    """Start the browser on `page` (its path alone on the command line); False if none
    could be started."""
    import webbrowser

    return webbrowser.open(page.as_uri())

"""No login code on the browser's command line (#33 item 3).

Every account on the machine reads every process's command line (/proc/*/cmdline), so a
login link passed to the browser there is another account's to use first. `clawgate
dashboard` starts the browser ($BROWSER: here a fake that records its arguments) with the
path of a 0600 page in a 0700 folder; that page, opened by headless Chromium, logs in once.
As root, a second numeric uid cannot read the page.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.dashboard_harness import (
    Browser,
    DashboardGateway,
    browser,
)
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import CLAWGATE, child_env

__all__ = ["browser"]

OTHER_UID = 65534  # nobody


def fake_browser(folder: Path) -> tuple[Path, Path]:
    """A browser command that writes its arguments, one a line, and exits: (command, record)."""
    record = folder / "browser-argv"
    command = folder / "fake-browser"
    command.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\n", encoding="utf-8")
    command.chmod(0o755)
    return command, record


async def clawgate_dashboard(home: Path, config_path: Path, browser_command: Path) -> str:
    """`clawgate dashboard` with a display and $BROWSER set; its output."""
    child = await asyncio.create_subprocess_exec(
        str(CLAWGATE),
        "--config",
        str(config_path),
        "dashboard",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=child_env(home, {"BROWSER": str(browser_command), "DISPLAY": ":99"}),
        cwd=home,
    )
    raw, _ = await asyncio.wait_for(child.communicate(), 60)
    output = raw.decode(errors="replace")
    assert child.returncode == 0, output
    return output


async def open_through_the_fake(home: Path, config_path: Path) -> tuple[str, Path, str]:
    """Run `clawgate dashboard`: (the browser's one argument, the page it names, output).
    Nothing on the browser's command line may log anyone in."""
    command, record = fake_browser(home)
    output = await clawgate_dashboard(home, config_path, command)
    argv = record.read_text(encoding="utf-8").splitlines()
    assert argv, output
    assert not any("code=" in arg for arg in argv), argv
    [uri] = argv
    assert uri.startswith("file://"), argv
    page = Path(unquote(urlsplit(uri).path))
    assert login_code(page) not in uri
    return uri, page, output


def login_code(page: Path) -> str:
    return page.read_text(encoding="utf-8").split("code=")[1].split('"')[0]


def as_other_account(*command: str) -> subprocess.CompletedProcess[str]:
    """`command` as OTHER_UID: forked, setgid/setuid (subprocess's user= and group=), exec."""
    return subprocess.run(
        command,
        user=OTHER_UID,
        group=OTHER_UID,
        extra_groups=[],
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )


async def test_the_browser_gets_a_private_page_not_the_code(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM, browser: Browser
) -> None:
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        uri, page, output = await open_through_the_fake(gateway.home, gateway.config_path)
        assert stat.S_IMODE(page.stat().st_mode) == 0o600
        assert stat.S_IMODE(page.parent.stat().st_mode) == 0o700
        # The code is in the page only; the terminal shows the dashboard's address.
        assert "code=" in page.read_text(encoding="utf-8")
        assert "code=" not in output and "dashboard: http://" in output, output

        # The browser that was meant to opens the page and is logged in, once.
        await browser.get(uri)
        await browser.find("nav a[href='/memory']")
        assert "code=" not in browser.current_url
        await browser.call(browser.driver.delete_all_cookies)
        await browser.get(uri)
        await browser.wait_for_text("main", "used or expired")


async def test_another_account_cannot_read_the_login_page(
    telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    if os.geteuid() != 0:
        pytest.skip("acting as a second account needs root (setuid in the forked child)")
    # Not under pytest's tmp_path: its folders are 0700, which would hide the page anyway.
    home = Path(tempfile.mkdtemp(prefix="clawgate-login-"))
    try:
        # A link is made only for a running gateway's dashboard (it proves itself first).
        async with DashboardGateway(home, telegram, fake_llm) as gateway:
            _, page, _ = await open_through_the_fake(home, gateway.config_path)
        # Only the page's own folder and mode stand in the way: every folder above it is
        # open to all (the control file shows the other account reads what it may).
        for folder in (home, page.parent.parent):
            folder.chmod(0o711)
        control = page.parent.parent / "readable"
        control.write_text("anyone\n", encoding="utf-8")
        control.chmod(0o644)
        assert as_other_account("/bin/cat", str(control)).stdout == "anyone\n"
        code = login_code(page)
        refused = as_other_account("/bin/cat", str(page))
        assert refused.returncode != 0 and code not in refused.stdout
        assert "Permission denied" in refused.stderr
        listing = as_other_account("/bin/ls", str(page.parent))
        assert listing.returncode != 0 and "Permission denied" in listing.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)

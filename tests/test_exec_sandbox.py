"""exec under bubblewrap, through a real gateway: what a command can read, what outlives
it, the network switch, and fail-closed when bwrap is missing (exec and doctor both).

Skipped only where the kernel refuses the namespaces bwrap needs, with bwrap's own words.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.tools.sandbox import PACKAGE, sandboxed_argv
from clawgate.gateway.ops.doctor import diagnose
from clawgate.kernel.config import AgentConfig, ToolsConfig
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.harness import Harness, make_config, wait_until

TIMEOUT = 30.0


def _namespaces_refused() -> str | None:
    """Why bwrap cannot run here (no binary, or the kernel refuses), None when it can."""
    if shutil.which("bwrap") is None:
        return None  # CI installs it; the fail-closed tests below need no binary
    argv = sandboxed_argv(("/bin/true",), root=Path("/tmp"), workspace=Path("/tmp"), network=False)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        return f"the kernel refuses bwrap's namespaces here: {done.stderr.strip()}"
    return None


REFUSED = _namespaces_refused()
needs_bwrap = pytest.mark.skipif(REFUSED is not None, reason=REFUSED or "")


def require_bwrap() -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail(f"bwrap is missing: .ci/run installs the {PACKAGE} package")
        pytest.skip(f"bwrap is not installed (the {PACKAGE} package)")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A home with what a gateway's account keeps: the config and an ssh key."""
    home = tmp_path / "home"
    (home / ".clawgate").mkdir(parents=True)
    (home / ".clawgate" / "config.toml").write_text('token = "bot-token-in-config"\n')
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY MATERIAL\n")
    monkeypatch.setenv("HOME", str(home))
    yield home


async def exec_results(
    tmp_path: Path, agent: AgentConfig, fake_llm: FakeLLM, commands: list[str], **tools: Any
) -> list[str]:
    """One owner turn per command under the sandbox; each call's tool result."""
    for command in commands:
        fake_llm.script(tool_call("exec", command=command), text("ok"))
    settings = {"exec_approval": "never", "exec_sandbox": "bwrap", **tools}
    config = make_config(tmp_path, agent, tools=ToolsConfig(**settings))
    results = []
    async with Harness(config) as harness:
        for _ in commands:
            await harness.channel.say("run it")
            assert (await harness.channel.next_reply(timeout=TIMEOUT)).text == "ok"
            results.append(str(fake_llm.requests[-1]["messages"][-1]["content"]))
    return results


def alive(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found


@needs_bwrap
async def test_a_sandboxed_command_reads_no_secret_and_nothing_outlives_it(
    tmp_path: Path, home: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    require_bwrap()
    config_file = tmp_path / "data" / "config.toml"
    results = await exec_results(
        tmp_path,
        agent_config,
        fake_llm,
        [
            "cat ~/.clawgate/config.toml",
            f"cat {config_file}",
            f"cat /proc/{os.getpid()}/environ",
            "ls ~/.ssh",
            "ls -A ~",
            "setsid nohup sleep 600.25 >/dev/null 2>&1 & echo started",
            "sh -c '(sleep 601.25 </dev/null >/dev/null 2>&1 &) &' ; echo forked",
            "echo kept > made.txt && cat made.txt",
        ],
    )
    config_home, config_data, environ, ssh, listing, detached, daemon, written = results
    assert "No such file" in config_home and "bot-token-in-config" not in config_home
    assert "No such file" in config_data
    assert "No such file" in environ
    assert "No such file" in ssh and "PRIVATE KEY" not in ssh
    assert listing.startswith("(no output)"), listing  # an empty home
    assert detached.startswith("started") and daemon.startswith("forked")
    await wait_until(lambda: not alive("600.25") and not alive("601.25"), timeout=10)
    assert written.startswith("kept")  # the workspace is writable
    assert (tmp_path / "workspace" / "made.txt").read_text() == "kept\n"


@needs_bwrap
async def test_with_the_network_off_curl_fails(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    require_bwrap()
    url = f"{fake_llm.url}/models"
    command = f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 {url}"
    [on] = await exec_results(tmp_path / "on", agent_config, fake_llm, [command])
    [off] = await exec_results(
        tmp_path / "off", agent_config, fake_llm, [command], exec_network=False
    )
    assert on.endswith("exit code 0"), on
    assert "exit code 7" in off, off  # curl: could not connect


async def test_bwrap_configured_but_missing_refuses_exec_and_fails_doctor(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    [refused] = await exec_results(tmp_path, agent_config, fake_llm, ["echo hi"])
    assert refused == (
        'Error: exec refused: tools.exec_sandbox is "bwrap" but bwrap is not installed '
        f"(install the {PACKAGE} package)"
    )
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'workspace = "{tmp_path / "workspace"}"\ndata_dir = "{tmp_path / "data"}"\n'
        '[tools]\nexec_sandbox = "bwrap"\n'
    )
    _, findings = diagnose(config_path, environ={})
    problems = [f.message for f in findings if f.level == "problem"]
    assert f"(install the {PACKAGE} package)" in " ".join(problems), problems
    assert not any(message.startswith("Error") for message in problems)


def test_doctor_flags_unasked_exec_in_groups(tmp_path: Path) -> None:
    config_path = tmp_path / "config.toml"
    config_path.write_text(
        f'workspace = "{tmp_path / "workspace"}"\ndata_dir = "{tmp_path / "data"}"\n'
        "[tools]\nexec_in_groups = true\n"
    )
    _, findings = diagnose(config_path, environ={})
    assert any("every member has owner power" in f.message for f in findings)


@needs_bwrap
def test_the_sandbox_works_for_an_unprivileged_account_too() -> None:
    # A gateway run as a normal user needs unprivileged user namespaces (Debian's bwrap is
    # not setuid); this suite runs as root in CI, so the other account is taken by setpriv.
    require_bwrap()
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to become another account")
    # pytest's own temporary folders are closed to other accounts.
    with tempfile.TemporaryDirectory(prefix="clawgate-nobody-") as folder:
        os.chmod(folder, 0o777)
        done = _as_nobody(Path(folder))
    if done.returncode != 0 and "namespace" in done.stderr:
        pytest.skip(f"the kernel refuses user namespaces to other accounts: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["65534", "x"]


def _as_nobody(root: Path) -> subprocess.CompletedProcess[str]:
    argv = sandboxed_argv(
        ("/bin/sh", "-c", "id -u; echo x > f && cat f"), root=root, workspace=root, network=True
    )
    nobody = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--")
    return subprocess.run((*nobody, *argv), capture_output=True, text=True, timeout=30)

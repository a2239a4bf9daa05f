"""Issue #33 item 5: the local rendezvous points cannot be squatted by another account.

With $XDG_RUNTIME_DIR set, a long data_dir's control socket lives in a folder of it.

Two-account cases run as root, the second account a numeric uid with no name; elsewhere they
are skipped. The owner's side is always a real `clawgate` process.

- The control socket's fallback folder (data_dir too long for a socket path) made first by
  another account: `clawgate agent` refuses it and sends nothing.
- A control socket in the owner's own folder whose listener is another account's process:
  `clawgate agent` reads the peer's uid before sending a byte, and refuses.
- The dashboard's port held by another process (another account's, as root) when the
  gateway starts: `clawgate status` and doctor say so with the fix, `clawgate dashboard`
  makes no login link for whatever listens there, and the gateway binds once it is free.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from clawgate.gateway.daemon.control import ControlChannel, ControlClient, socket_path
from clawgate.kernel.bus import MessageBus
from tests.dashboard_harness import DashboardGateway, clawgate_output, free_port
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.process import CLAWGATE, child_env, fake_model, write_config

OTHER_UID = 4242
RUN_TIMEOUT = 60  # seconds: a cold CLI start on a loaded machine

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="acting as a second account needs root (os.setuid)"
)

# Listens at argv[1] as another account and answers like a gateway would, printing what it
# sees. argv[2] = "make-folder": create the socket's folder first (0755, as that account);
# "listen-as-other": bind as the owner (the folder is the owner's), then switch accounts
# before listen(), which is when the kernel records the listener's credentials.
SQUATTER = f"""\
import json, os, socket, sys
path, how = sys.argv[1], sys.argv[2]
if how == "make-folder":
    os.setuid({OTHER_UID})
    os.mkdir(os.path.dirname(path), 0o755)
server = socket.socket(socket.AF_UNIX)
server.bind(path)
os.chmod(path, 0o777)
if how == "listen-as-other":
    os.setuid({OTHER_UID})
server.listen()
print("ready", flush=True)
conn, _ = server.accept()
print("connected", flush=True)
line = conn.makefile("rb").readline()
if not line:
    sys.exit(print("closed unread", flush=True))
print("got", line.decode().strip(), flush=True)
asked = json.loads(line)
answer = {{"channel": "cli", "chat_id": asked["session"], "text": "squatter here",
          "reply_to": asked["id"]}}
conn.sendall(json.dumps(answer).encode() + b"\\n")
"""


# Holds 127.0.0.1:argv[1] (as another account when run as root), answering every request
# with 200 and printing its request line: it would accept a login code or a proof request.
PORT_SQUATTER = f"""\
import http.server, os, sys
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("request", self.path, flush=True)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"trust me")
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Answer)
if os.geteuid() == 0:
    os.setuid({OTHER_UID})
print("ready", flush=True)
server.serve_forever()
"""


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temp directory like /tmp (1777): every account may create in it."""
    folder = Path(tempfile.mkdtemp(prefix="clawgate-squat-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder)


@asynccontextmanager
async def squatter(*args: str) -> AsyncIterator[list[str]]:
    """The other account's listener (`python -c *args`), ready; yields the lines it printed,
    complete once the block ends, which stops it."""
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
    )
    assert child.stdout is not None
    seen: list[str] = []
    try:
        ready = await asyncio.wait_for(child.stdout.readline(), RUN_TIMEOUT)
        assert ready == b"ready\n"
        yield seen
    finally:
        if child.returncode is None:
            child.kill()
        rest, _ = await child.communicate()
        seen.extend(rest.decode().splitlines())


async def ask(home: Path, config: Path, extra_env: dict[str, str]) -> tuple[int, str]:
    env = child_env(home, extra_env)
    env.pop("XDG_RUNTIME_DIR", None)
    child = await asyncio.create_subprocess_exec(
        str(CLAWGATE),
        *("--config", str(config), "agent", "-m", "my secret plan"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        cwd=home,
    )
    out, _ = await asyncio.wait_for(child.communicate(), RUN_TIMEOUT)
    assert child.returncode is not None
    return child.returncode, out.decode(errors="replace")


async def test_a_long_data_dirs_socket_lives_in_the_runtime_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A short 0700 folder, as $XDG_RUNTIME_DIR is (/run/user/<uid>): tmp_path under xdist is
    # itself too long for a socket path.
    runtime = Path(tempfile.mkdtemp(prefix="cg-run-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    data_dir = tmp_path / ("d" * 100)
    channel = ControlChannel(MessageBus(), data_dir)
    await channel.start()
    try:
        assert channel.path.parent == runtime / "clawgate"
        assert channel.path.parent.stat().st_mode & 0o777 == 0o700
        client = await ControlClient.connect(data_dir, "default")
        assert client is not None
        try:
            await client.say("hello", "id-1", "ann")
            message = await asyncio.wait_for(channel.bus.inbound.get(), timeout=10)
        finally:
            await client.close()
        assert message.text == "hello"
    finally:
        await channel.stop()
        await channel.close()
        shutil.rmtree(runtime, ignore_errors=True)


@needs_root
async def test_a_squatted_fallback_folder_is_refused(
    tmp_path: Path, fake_llm: FakeLLM, shared_tmp: Path
) -> None:
    fake_llm.script(text("the real model"))
    home = tmp_path / ("h" * 100)  # data_dir too long for a socket path: the fallback
    home.mkdir()
    config = write_config(home, agent=fake_model(fake_llm))
    fallback = shared_tmp / f"clawgate-{os.getuid()}" / socket_path(home / "data").name
    async with squatter(SQUATTER, str(fallback), "make-folder") as seen:
        code, out = await ask(home, config, {"TMPDIR": str(shared_tmp)})
    assert seen == [], seen  # never connected, let alone read the message
    assert code == 1, out
    assert "belongs to another account or is open to others" in out
    assert "squatter here" not in out


@needs_root
async def test_a_listener_of_another_account_gets_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("the real model"))
    config = write_config(tmp_path, agent=fake_model(fake_llm))
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    async with squatter(SQUATTER, str(socket_path(data_dir)), "listen-as-other") as seen:
        code, out = await ask(tmp_path, config, {})
    assert seen == ["connected", "closed unread"], seen  # sent nothing
    assert code == 1, out
    assert f"served by another account (uid {OTHER_UID})" in out
    assert "squatter here" not in out


async def test_a_taken_dashboard_port_is_reported_never_linked_and_retried(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    gateway = DashboardGateway(tmp_path, telegram, fake_llm)
    address = f"127.0.0.1:{gateway.port}"
    config = ("--config", str(gateway.config_path))
    try:
        async with squatter(PORT_SQUATTER, str(gateway.port)) as seen:
            await gateway.process.start()
            await gateway.process.wait_for_log("gateway running", RUN_TIMEOUT)
            code, out = await clawgate_output(tmp_path, *config, "status")
            assert f"dashboard port {address} is taken" in out, out
            assert "set [dashboard] port to a free port" in out
            code, out = await clawgate_output(tmp_path, *config, "doctor")
            assert f"dashboard port {address} is taken" in out, out
            code, out = await clawgate_output(tmp_path, *config, "dashboard", "--no-open")
            assert code == 1, out
            assert "login?code=" not in out
        assert not any("code=" in line for line in seen), seen
        # Freed: the gateway takes the port on its next try, and proves itself.
        await gateway.process.wait_for_log("dashboard listening on", RUN_TIMEOUT)
        link = urlsplit(await gateway.login_link())
        assert (link.port, link.path) == (gateway.port, "/login"), link
        assert link.query.startswith("code="), link
        code, out = await clawgate_output(tmp_path, *config, "status")
        assert f"dashboard listening on http://{address}/" in out, out
    finally:
        await gateway.__aexit__(None, None, None)  # SIGTERM, wait, close


async def test_a_listener_that_cannot_prove_itself_gets_no_link(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    # The config now names another port (the gateway not restarted yet), which someone else
    # holds: the link would send the owner's browser and code there.
    async with DashboardGateway(tmp_path, telegram, fake_llm) as gateway:
        other = free_port()
        moved = tmp_path / "moved.toml"
        moved.write_text(
            gateway.config_path.read_text().replace(f"port = {gateway.port}", f"port = {other}")
        )
        async with squatter(PORT_SQUATTER, str(other)) as seen:
            code, out = await clawgate_output(
                tmp_path, "--config", str(moved), "dashboard", "--no-open"
            )
    assert code == 1, out
    assert f"what listens on 127.0.0.1:{other} is not your gateway's dashboard" in out
    assert "code=" not in out
    # Asked for a proof it could not give, and for nothing else.
    assert [line.split("?")[0] for line in seen] == ["request /proof"], seen

"""`clawgate agent`: through the running gateway when there is one, else in this process
while it holds the instance lock, so one process at a time writes a workspace's sessions.

    gateway listening on the control socket  -> the daemon serves the turns
    lock free                                -> a Gateway with only the terminal, here
    lock held by `clawgate agent`/`cron run` -> wait for it (said once on stderr)
    lock held by a gateway still starting    -> wait for its socket

With `--agent NAME` the request names the agent: one gateway serves every agent through one
socket and one lock on the whole config's data_dir (`home`), and the in-process fallback
runs that agent's workspace, sessions and model.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from clawgate.channels.terminal import Terminal, TerminalChannel, TerminalLink
from clawgate.gateway.daemon.control import ControlClient
from clawgate.gateway.daemon.lock import AGENT, GATEWAY, AlreadyRunning, Holder, InstanceLock
from clawgate.kernel.config import Config

POLL_SECONDS = 0.2
# The terminal asked to quit: a turn still running was already sent /stop.
TERMINAL_GRACE_SECONDS = 5.0


async def run_agent(
    config: Config,
    message: str | None,
    session: str,
    *,
    home: Path,
    agent: str | None = None,
    settings: str = "",
) -> int:
    """`config` is the agent's effective config; `home` the data_dir of the gateway that
    would serve it; `agent` the name the user chose (None: the default agent); `settings`
    the digest of the whole config as this command loaded it (kernel.config.settings_digest)."""
    lock = InstanceLock(home, role=AGENT)
    told: Holder | None = None
    while True:
        client = await ControlClient.connect(home, session, agent)
        if client is not None:
            _say_if_settings_differ(home, settings)
            try:
                return await _converse(client, message)
            finally:
                await client.close()
        try:
            lock.acquire()
            break
        except AlreadyRunning:
            holder = lock.holder()
            # An empty file: the holder took the lock an instant ago and is writing its pid.
            if holder != told and holder.pid != "unknown":
                told = holder
                print(f"clawgate: {_waiting_for(holder)}", file=sys.stderr, flush=True)
            await asyncio.sleep(POLL_SECONDS)
    try:
        return await _in_process(config, message, session)
    finally:
        lock.release()


def _say_if_settings_differ(home: Path, settings: str) -> None:
    """The running gateway answers with the settings it started with: say so once when
    this command's (its --config, its CLAWGATE_* variables) are not those."""
    from clawgate.gateway.ops.status_file import read_status

    status = read_status(home)
    if not settings or status is None or not status.get("running"):
        return
    theirs = status.get("settings")
    if theirs and theirs != settings:
        print(
            f"clawgate: the running gateway (pid {status.get('pid')}) answers with the settings "
            "it started with; this command's --config and CLAWGATE_* settings differ and are "
            "not used (stop the gateway to run with them)",
            file=sys.stderr,
            flush=True,
        )


def _waiting_for(holder: Holder) -> str:
    if holder.role != GATEWAY:
        return (
            f"waiting for {holder.describe()} to finish: one process at a time "
            "uses a workspace (Ctrl-C to give up)"
        )
    return f"waiting for {holder.describe()} to start listening (Ctrl-C to give up)"


async def _converse(link: TerminalLink, message: str | None) -> int:
    terminal = Terminal(link)
    if message is not None:
        return await terminal.one_shot(message)
    if not sys.stdin.isatty():
        return await terminal.pipe(sys.stdin)
    return await terminal.interactive()


async def _in_process(config: Config, message: str | None, session: str) -> int:
    from clawgate.agent.runtime import AgentRuntime
    from clawgate.agent.tools.shell import forbid_environ_reads
    from clawgate.gateway.daemon.gateway import Gateway
    from clawgate.kernel.bus import MessageBus

    forbid_environ_reads()  # exec'd commands must not read our environment or memory
    bus = MessageBus()
    channel = TerminalChannel(bus, session)
    runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
    gateway = Gateway([(runtime, bus)], [channel], bus)
    await gateway.start()
    try:
        return await _converse(channel, message)
    finally:
        await gateway.stop(grace=TERMINAL_GRACE_SECONDS)

"""MCP tool servers: each `[[mcp.servers]]` entry started, watched, restarted, and its tools offered.

`McpHub.run` is one long task (the gateway starts it in its TaskGroup) holding one supervisor
per enabled server. A supervisor connects through the official SDK (`mcp`: a stdio child
process, or streamable HTTP with the configured headers), initialises, lists the tools,
then waits: a call that finds the connection closed, or a ping every `mcp.ping_seconds` that
fails, ends the connection, and the server is started again after a backoff (reset once a
connection has lived a minute). Only the SDK's default environment (PATH, HOME, ...) plus
the entry's own `env` reaches a stdio server, never the gateway's secrets.

The tools of the servers that are up are `McpHub.tools()`, a source the tool registry asks
at each turn (agent/tools/mcp_tools.py), named `<server>__<tool>`. A call that arrives while
its server restarts waits for it, up to `mcp.call_timeout`. `snapshot` is what the status
file, `clawgate mcp list` and the dashboard show.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from clawgate.agent.tools.mcp_tools import mcp_tool
from clawgate.kernel.config_sections import McpConfig, McpServerConfig
from clawgate.kernel.errors import ToolError, one_line
from clawgate.kernel.retry import Backoff

if TYPE_CHECKING:
    from mcp import ClientSession

    from clawgate.agent.tools.base import Tool

log = logging.getLogger(__name__)

# "failed": only from `probe`, a one-off look that does not retry.
State = Literal["starting", "running", "restarting", "disabled", "failed"]
# A connection that lived this long was healthy: the next failure starts the backoff over.
HEALTHY_SECONDS = 60.0
INIT_TIMEOUT = 30.0
RESTART_BACKOFF = Backoff(first=1.0, factor=2.0, cap=300.0)


@dataclass(frozen=True)
class ServerStatus:
    """One server as the status file, `clawgate mcp list` and the dashboard show it."""

    name: str
    transport: Literal["stdio", "http"]
    state: State
    tools: tuple[str, ...] = ()
    error: str = ""  # why the last connection ended or failed
    starts: int = 0  # connections made since the gateway started
    shared: bool = False


def transport_of(server: McpServerConfig) -> Literal["stdio", "http"]:
    return "stdio" if server.command is not None else "http"


@dataclass
class _Server:
    config: McpServerConfig
    state: State = "starting"
    session: ClientSession | None = None
    tools: list[Any] = field(default_factory=list)  # mcp.types.Tool, allowlisted
    error: str = ""
    starts: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    dead: asyncio.Event = field(default_factory=asyncio.Event)

    def status(self) -> ServerStatus:
        return ServerStatus(
            self.config.name,
            transport_of(self.config),
            self.state,
            tuple(t.name for t in self.tools) if self.state == "running" else (),
            self.error,
            self.starts,
            self.config.shared,
        )


class McpHub:
    """The configured MCP servers of one gateway and their tools."""

    def __init__(self, config: McpConfig, *, backoff: Backoff = RESTART_BACKOFF) -> None:
        self._config = config
        self._backoff = backoff
        self._servers = {
            s.name: _Server(s, state="starting" if s.enabled else "disabled")
            for s in config.servers
        }
        self._tools: dict[tuple[str, str], Tool[Any]] = {}
        # Notified at every change of a server's state, which also counts up `changes`: a
        # watcher busy when one came compares the count instead of missing it.
        self.changed = asyncio.Condition()
        self.changes = 0

    def snapshot(self) -> list[ServerStatus]:
        return [server.status() for server in self._servers.values()]

    def tools(self) -> Sequence[Tool[Any]]:
        """The tools of every running server, in configuration order."""
        found = []
        for server in self._servers.values():
            if server.state != "running":
                continue
            for spec in server.tools:
                key = (server.config.name, spec.name)
                if key not in self._tools:
                    self._tools[key] = mcp_tool(self, server.config, spec)
                found.append(self._tools[key])
        return found

    async def run(self) -> None:
        """Supervise every enabled server until cancelled."""
        async with asyncio.TaskGroup() as group:
            for server in self._servers.values():
                if server.config.enabled:
                    group.create_task(self._supervise(server), name=f"mcp {server.config.name}")

    async def call(self, name: str, tool: str, arguments: dict[str, Any]) -> Any:
        """Call one tool; waits for a restarting server. The SDK's CallToolResult, or
        ToolError with one line."""
        from mcp import MCPError

        server = self._servers[name]
        timeout = self._config.call_timeout
        try:
            async with asyncio.timeout(timeout):
                await server.ready.wait()
                session = server.session
                assert session is not None  # set whenever `ready` is
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ToolError(f"{name}__{tool}: no answer within {timeout:g} s") from None
        except MCPError as exc:
            if _closed(exc):
                server.dead.set()
                raise ToolError(
                    f"{name}__{tool}: the MCP server {name!r} closed the connection; "
                    "it is being restarted"
                ) from None
            raise ToolError(f"{name}__{tool}: {one_line(exc)}") from None

    async def _supervise(self, server: _Server) -> None:
        failures = 0
        while True:
            started = time.monotonic()
            try:
                await self._serve(server)
                server.error = "the server closed the connection"
            except Exception as exc:
                server.error = describe(server.config, exc)
            server.ready.clear()
            server.session = None
            await self._set_state(server, "restarting")
            failures = 1 if time.monotonic() - started >= HEALTHY_SECONDS else failures + 1
            delay = self._backoff.delay(failures)
            log.warning(
                "mcp server %s: %s; restarting in %.0f s", server.config.name, server.error, delay
            )
            await asyncio.sleep(delay)

    async def _set_state(self, server: _Server, state: State) -> None:
        server.state = state
        async with self.changed:
            self.changes += 1
            self.changed.notify_all()

    async def _serve(self, server: _Server) -> None:
        """One connection's life: returns or raises when the server is gone."""
        from mcp import ClientSession

        async with (
            _transport(server.config) as (read, write),
            ClientSession(read, write) as session,
        ):
            async with asyncio.timeout(INIT_TIMEOUT):
                await session.initialize()
                listed = await list_tools(session)
            allowed = server.config.tools
            server.tools = [t for t in listed if allowed is None or t.name in allowed]
            # A restarted server may have changed its tools: their wrappers are made anew.
            self._tools = {k: v for k, v in self._tools.items() if k[0] != server.config.name}
            server.session = session
            server.starts += 1
            server.error = ""
            server.dead.clear()
            server.ready.set()
            await self._set_state(server, "running")
            log.info(
                "mcp server %s: running, tools %s",
                server.config.name,
                ", ".join(t.name for t in server.tools) or "none",
            )
            while not server.dead.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._config.ping_seconds):
                        await server.dead.wait()
                        return
                async with asyncio.timeout(INIT_TIMEOUT):
                    await session.send_ping()


async def list_tools(session: ClientSession) -> list[Any]:
    """Every tool of a server, page after page."""
    from mcp.types import PaginatedRequestParams

    tools: list[Any] = []
    cursor: str | None = None
    while True:
        page = await session.list_tools(
            params=PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


@contextlib.asynccontextmanager
async def _transport(server: McpServerConfig) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's read and write streams to one server."""
    if server.command is not None:
        from mcp import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=server.command, args=server.args, env=server.env or None
        )
        # The server's stderr is the gateway's own (descriptor 2). The SDK's default is the
        # `sys.stderr` of the moment `mcp` was first imported: under a CLI runner's capture
        # that stream has no descriptor, and every stdio server then failed to start.
        errlog = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert server.url is not None  # the config allows command or url, exactly one
    headers = {k: v.get_secret_value() for k, v in server.headers.items()}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as client,
        streamable_http_client(server.url, http_client=client) as streams,
    ):
        yield streams


@contextlib.asynccontextmanager
async def connect(server: McpServerConfig) -> AsyncIterator[ClientSession]:
    """One initialised session to a server, for a one-off look (`clawgate mcp list`,
    doctor), outside the gateway's supervision."""
    from mcp import ClientSession

    async with _transport(server) as (read, write), ClientSession(read, write) as session:
        async with asyncio.timeout(INIT_TIMEOUT):
            await session.initialize()
        yield session


async def probe(server: McpServerConfig) -> ServerStatus:
    """Start a server once, list its tools, stop it: `clawgate mcp list` when no gateway
    runs, and `clawgate doctor --online`."""
    transport = transport_of(server)
    if not server.enabled:
        return ServerStatus(server.name, transport, "disabled", shared=server.shared)
    try:
        async with asyncio.timeout(INIT_TIMEOUT), connect(server) as session:
            listed = await list_tools(session)
    except Exception as exc:
        return ServerStatus(
            server.name, transport, "failed", error=describe(server, exc), shared=server.shared
        )
    names = tuple(t.name for t in listed if server.tools is None or t.name in server.tools)
    return ServerStatus(server.name, transport, "running", names, starts=1, shared=server.shared)


def describe(server: McpServerConfig, exc: BaseException) -> str:
    """One line for why a connection failed (the SDK's task groups wrap the cause)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, OSError) and exc.strerror:
        target = f"start {server.command}" if server.command else f"reach {server.url}"
        return f"cannot {target}: {exc.strerror}"
    if isinstance(exc, TimeoutError):
        return f"no answer to the handshake within {INIT_TIMEOUT:g} s"
    if _closed(exc):
        if server.command:
            return "the server exited or closed its output (its error output goes to the gateway's)"
        return "the server closed the connection"
    if server.url and type(exc).__module__.startswith("httpx"):
        return f"cannot reach {server.url}: {one_line(exc)}"
    return one_line(exc)


def _closed(exc: BaseException) -> bool:
    """Whether an SDK error means the connection itself is gone."""
    from mcp_types import CONNECTION_CLOSED

    return getattr(exc, "code", None) == CONNECTION_CLOSED

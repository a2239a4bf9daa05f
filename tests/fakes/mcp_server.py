"""A real MCP server, written with the same SDK the gateway's client uses: `shout`, `add`,
`whoami` (the environment it was given), `pid`, `crash` (the process dies mid-call), `notes.search`
(a name no model API takes as is) and `hidden` (for allowlists). Run as a script it serves
over stdio; `serve_http` serves it over streamable HTTP on 127.0.0.1 inside the test's
event loop."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import AsyncIterator

from mcp.server.mcpserver import MCPServer


def build() -> MCPServer:
    server = MCPServer("fake-tools")

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def whoami() -> str:
        """The FAKE_MCP_TOKEN and GATEWAY_SECRET variables this process sees."""
        token = os.environ.get("FAKE_MCP_TOKEN", "-")
        return f"token={token} gateway={os.environ.get('GATEWAY_SECRET', '-')}"

    @server.tool()
    def pid() -> int:
        """This server's process id (a test kills it from outside)."""
        return os.getpid()

    @server.tool()
    def crash() -> str:
        """Die at once, as a crashing server does."""
        os._exit(3)

    @server.tool(name="notes.search")
    def notes_search(query: str) -> str:
        """A name with a dot, as some servers use."""
        return f"found {query}"

    @server.tool()
    def hidden() -> str:
        """A tool an allowlist leaves out."""
        return "should not be offered"

    return server


@contextlib.asynccontextmanager
async def serve_http() -> AsyncIterator[str]:
    """The server over streamable HTTP on a free loopback port; yields its URL."""
    import asyncio

    import uvicorn

    app = build().streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening already: a client's first request waits in the backlog until uvicorn is up.
    sock.listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await task
        sock.close()


if __name__ == "__main__":
    build().run("stdio")

"""MCP servers through the official SDK's client: a stdio server (tests/fakes/mcp_stdio.py, the
SDK server's messages without its import cost) and the SDK's own server over streamable HTTP
(tests/fakes/mcp_server.py), their tools offered as `<server>__<tool>` with their own
schemas, allowlists, the environment a stdio server gets, a crash and its restart, trust."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.tools import ToolRegistry, default_tools
from clawgate.agent.tools.mcp_hub import McpHub, ServerStatus
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import McpConfig, load_config
from clawgate.kernel.retry import Backoff
from tests.web_helpers import tool_context

SERVER = str(Path(__file__).parent / "fakes" / "mcp_stdio.py")
SDK_SERVER = str(Path(__file__).parent / "fakes" / "mcp_server.py")
QUICK = Backoff(first=0.05, factor=1.0, cap=0.05)
TOKEN = "fake-mcp-token-0123456789"


def stdio(name: str = "fake", **keys: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [SERVER], **keys}


@contextlib.asynccontextmanager
async def running(*servers: dict[str, Any], **mcp: Any) -> AsyncIterator[McpHub]:
    hub = McpHub(McpConfig(servers=servers, **mcp), backoff=QUICK)
    task = asyncio.create_task(hub.run())
    try:
        yield hub
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(hub: McpHub, test: Callable[[dict[str, ServerStatus]], bool]) -> None:
    async with asyncio.timeout(30), hub.changed:
        await hub.changed.wait_for(lambda: test({s.name: s for s in hub.snapshot()}))


def up(name: str, starts: int = 1) -> Callable[[dict[str, ServerStatus]], bool]:
    return lambda s: s[name].state == "running" and s[name].starts >= starts


async def call(hub: McpHub, ctx: Any, name: str, **args: Any) -> str:
    import json

    return await ToolRegistry(default_tools(), [hub]).execute(name, json.dumps(args), ctx)


async def test_a_stdio_servers_tools_are_offered_with_their_schemas(tmp_path: Path) -> None:
    async with running(stdio()) as hub:
        await until(hub, up("fake"))
        registry = ToolRegistry(default_tools(), [hub])
        ctx = tool_context(tmp_path)
        names = registry.names(Trust.OWNER, ctx.config)
        assert [n for n in names if "__" in n] == [
            "fake__shout",
            "fake__add",
            "fake__whoami",
            "fake__pid",
            "fake__crash",
            "fake__notes_search",
            "fake__hidden",
        ]
        schema = next(
            s["function"]
            for s in registry.schemas(Trust.OWNER, ctx.config)
            if s["function"]["name"] == "fake__add"
        )
        assert schema["description"] == "Add two integers."
        assert schema["parameters"]["required"] == ["a", "b"]
        assert schema["parameters"]["properties"]["a"]["type"] == "integer"
        assert await call(hub, ctx, "fake__shout", text="low tide") == "LOW TIDE"
        assert await call(hub, ctx, "fake__add", a=2, b=40) == "42"
        # Offered under a name model APIs accept, called by its own.
        assert await call(hub, ctx, "fake__notes_search", query="tides") == "found tides"
        wrong = await call(hub, ctx, "fake__add", a="two", b=40)
        assert wrong.startswith("Error: fake__add: ") and "a" in wrong


async def test_an_allowlist_offers_only_its_tools(tmp_path: Path) -> None:
    async with running(stdio(tools=["shout", "add"])) as hub:
        await until(hub, up("fake"))
        assert [t.name for t in hub.tools()] == ["fake__shout", "fake__add"]
        hidden = await call(hub, tool_context(tmp_path), "fake__hidden")
        assert hidden.startswith("Error: unknown tool 'fake__hidden'")


async def test_a_stdio_server_gets_its_env_not_the_gateways_and_secrets_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_SECRET", "the-gateways-own-secret")
    entry = stdio(env={"FAKE_MCP_TOKEN": TOKEN})
    config = load_config(environ={}, text="").model_validate({"mcp": {"servers": [entry]}})
    assert TOKEN in config.secrets()  # a variable named *TOKEN* is a secret
    async with running(entry) as hub:
        await until(hub, up("fake"))
        ctx = tool_context(tmp_path, secrets=tuple(config.secrets()))
        assert await call(hub, ctx, "fake__whoami") == "token=[REDACTED] gateway=-"


async def test_a_crashed_server_is_restarted_and_answers_again(tmp_path: Path) -> None:
    async with running(stdio()) as hub:
        await until(hub, up("fake"))
        ctx = tool_context(tmp_path)
        crashed = await call(hub, ctx, "fake__crash")
        assert crashed == (
            "Error: fake__crash: the MCP server 'fake' closed the connection; it is being restarted"
        )
        await until(hub, up("fake", starts=2))
        assert await call(hub, ctx, "fake__shout", text="back") == "BACK"
        assert {s.name: s.starts for s in hub.snapshot()} == {"fake": 2}


async def test_a_server_killed_while_idle_is_found_by_its_ping_and_restarted(
    tmp_path: Path,
) -> None:
    async with running(stdio(), ping_seconds=0.2) as hub:
        await until(hub, up("fake"))
        ctx = tool_context(tmp_path)
        pid = int(await call(hub, ctx, "fake__pid"))
        os.kill(pid, signal.SIGKILL)
        await until(hub, up("fake", starts=2))
        assert int(await call(hub, ctx, "fake__pid")) != pid


async def test_a_server_that_cannot_start_is_retried_and_shown(tmp_path: Path) -> None:
    broken = {"name": "broken", "command": str(tmp_path / "no-such-server")}
    async with running(broken, stdio()) as hub:
        await until(
            hub, lambda s: s["broken"].state == "restarting" and s["fake"].state == "running"
        )
        status = {s.name: s for s in hub.snapshot()}["broken"]
        assert status.starts == 0 and "no-such-server" in status.error
        # The other server is not held back by it.
        assert await call(hub, tool_context(tmp_path), "fake__add", a=1, b=1) == "2"


async def test_a_streamable_http_server_with_headers(tmp_path: Path) -> None:
    # Imported here: the SDK's server takes ~0.9 s of CPU, which every test process would
    # pay to collect this module.
    from tests.fakes.mcp_server import serve_http

    async with (
        serve_http() as url,
        running(
            {"name": "remote", "url": url, "headers": {"Authorization": "Bearer abc-123-456-789"}}
        ) as hub,
    ):
        await until(hub, up("remote"))
        assert (await call(hub, tool_context(tmp_path), "remote__shout", text="hi")) == "HI"
        assert {s.name: s.transport for s in hub.snapshot()} == {"remote": "http"}


@pytest.mark.parametrize("trust", [Trust.ALLOWED, Trust.GROUP])
async def test_other_chats_get_mcp_tools_only_from_shared_servers(
    tmp_path: Path, trust: Trust
) -> None:
    async with running(stdio("private"), stdio("open", shared=True)) as hub:
        await until(hub, lambda s: s["private"].state == s["open"].state == "running")
        # in_groups opens the web tools, never an MCP server that is not shared.
        ctx = tool_context(tmp_path, trust, in_groups=True)
        refused = await call(hub, ctx, "private__shout", text="x")
        assert refused.startswith("Error: unknown tool 'private__shout'")
        assert "private__" not in refused.split("Available tools:")[1]
        assert await call(hub, ctx, "open__shout", text="x") == "X"


async def test_the_stdio_fake_answers_as_the_sdk_server_does() -> None:
    # The other tests' stdio server is a hand-written fake; this holds it to what the SDK's
    # own server (the same tools) sends, message for message.
    def initialize(version: str) -> dict[str, Any]:
        client = {"name": "t", "version": "1"}
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": client}
        return {"method": "initialize", "params": params}

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"method": "tools/call", "params": {"name": name, "arguments": arguments}}

    asked = [
        initialize("2025-06-18"),
        {"method": "notifications/initialized"},
        {"method": "tools/list", "params": {}},
        call("shout", text="hi"),
        call("add", a=2, b=3),
        call("add", a="4", b=5),
        call("whoami"),
        call("notes.search", query="boat"),
        call("hidden"),
        call("nope"),
        {"method": "ping"},
        {"method": "resources/list"},
        {"method": "prompts/list"},
        initialize("1999-01-01"),
        call("add", a="x"),
    ]

    async def replies(script: str) -> list[dict[str, Any]]:
        env = {"FAKE_MCP_TOKEN": "t", "PATH": os.environ.get("PATH", "")}
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            script,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
        )
        assert child.stdin is not None and child.stdout is not None
        got = []
        for n, message in enumerate(asked):
            request = {"jsonrpc": "2.0", **message}
            if message["method"] != "notifications/initialized":
                request["id"] = n
            child.stdin.write(json.dumps(request).encode() + b"\n")
            await child.stdin.drain()
            if "id" in request:
                line = await asyncio.wait_for(child.stdout.readline(), 60)
                got.append(json.loads(line))
        child.stdin.close()
        await child.wait()
        return got

    sdk, fake = await asyncio.gather(replies(SDK_SERVER), replies(SERVER))
    assert len(fake) == len(sdk) == len(asked) - 1
    # Bad arguments: an error result from both, its words their own.
    for reply in (sdk[-1], fake[-1]):
        assert reply["result"]["isError"] is True
        assert reply["result"]["content"][0]["text"].startswith("Error executing tool add")
    assert fake[:-1] == sdk[:-1]

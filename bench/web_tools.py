"""What the web and MCP tools cost: the readers' import, one web_fetch, one search, an MCP
server's start and one MCP call.

  import        seconds to import each lazily loaded library in a fresh interpreter
  fetch         web_fetch of the fake site's article (HTML -> Markdown), of a page grown
                to ~1 MB, of a PDF: median wall time per call through the tool registry
  search        web_search through the fake DuckDuckGo endpoint (HTML parsed with lxml)
  mcp start     spawning the test suite's stdio MCP server, initialize, list tools
  mcp call      one tools/call round trip to that running server

Everything is on loopback (tests/fakes/), so these are our costs, not the network's.
Run: python bench/web_tools.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiohttp import web

from clawgate.agent.tools import ToolRegistry, default_tools
from clawgate.agent.tools.mcp_hub import connect
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import McpServerConfig
from tests.fakes.search import FakeSearch
from tests.fakes.web import ARTICLE, FakeWeb
from tests.web_helpers import tool_context

SERVER = Path(__file__).resolve().parent.parent / "tests" / "fakes" / "mcp_server.py"


class BigWeb(FakeWeb):
    """The fake site plus /big: the article's paragraphs repeated to about 1 MB."""

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        body = ARTICLE.split("<article>")[1].split("</article>")[0]
        page = ARTICLE.replace(body, body * (1_000_000 // len(body)))
        app.router.add_get("/big", lambda _r: web.Response(text=page, content_type="text/html"))


def import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


async def median_ms(rounds: int, work: Callable[[], Awaitable[object]]) -> float:
    await work()  # warm: imports and first connections are not the steady state
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        await work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def main(rounds: int) -> None:
    for module in ("readability", "markdownify", "pypdf", "lxml.html", "mcp"):
        print(f"import {module:<22} {import_seconds(module) * 1000:8.0f} ms")
    registry = ToolRegistry(default_tools())
    with tempfile.TemporaryDirectory() as tmp:
        async with BigWeb() as site, FakeSearch() as providers:
            ctx = tool_context(Path(tmp), Trust.OWNER, allow_private=["127.0.0.2"])
            search_ctx = tool_context(Path(tmp), Trust.OWNER, **providers.urls())
            for label, path in (
                ("article", "/article"),
                ("1 MB page", "/big"),
                ("pdf", "/paper.pdf"),
            ):
                args = json.dumps({"url": f"{site.base}{path}"})
                ms = await median_ms(rounds, lambda a=args: registry.execute("web_fetch", a, ctx))
                print(f"fetch {label:<24} {ms:8.1f} ms")
            query = json.dumps({"query": "tides"})
            ms = await median_ms(rounds, lambda: registry.execute("web_search", query, search_ctx))
            print(f"search duckduckgo (fake)       {ms:8.1f} ms")
    server = McpServerConfig(name="bench", command=sys.executable, args=[str(SERVER)])
    starts = []
    for _ in range(max(3, rounds // 5)):
        start = time.perf_counter()
        async with connect(server) as session:
            await session.list_tools()
        starts.append(time.perf_counter() - start)
    print(f"mcp start (stdio, to tools)    {statistics.median(starts) * 1000:8.0f} ms")
    async with connect(server) as session:
        ms = await median_ms(rounds, lambda: session.call_tool("add", {"a": 1, "b": 2}))
    print(f"mcp call (stdio round trip)    {ms:8.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(main(parser.parse_args().rounds))

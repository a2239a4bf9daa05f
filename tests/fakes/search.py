"""The four search providers web_search speaks to, each in its own API shape, on one
loopback server: DuckDuckGo's HTML form endpoint (/ddg/html/), a SearXNG instance's JSON
API (/searx/search), Brave's web search API (/brave/res/v1/web/search, key in
X-Subscription-Token) and Tavily's (/tavily/search, key as a Bearer token). Every provider
answers a query with the same RESULTS; `requests` records (provider, query, key)."""

from __future__ import annotations

import html
import urllib.parse

from aiohttp import web

from tests.fakes.server import LoopbackServer

RESULTS = [
    ("Saint-Malo tides", "https://tides.example/saint-malo", "Tide times & coefficients"),
    ("Grand Bé causeway", "https://walks.example/grand-be", "Walk out at low tide"),
    ("Equinox tides", "https://sea.example/equinox", "The biggest tides of the year"),
]
BRAVE_KEY = "brave-key-1234567890"
TAVILY_KEY = "tvly-key-1234567890"


class FakeSearch(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, str]] = []
        self.searx_json = True  # False: an instance with the JSON format off (403)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def urls(self) -> dict[str, str]:
        """`tools.web` settings pointing every provider here."""
        return {
            "duckduckgo_url": f"{self.base}/ddg/html/",
            "searxng_url": f"{self.base}/searx",
            "brave_url": f"{self.base}/brave/res/v1/web/search",
            "tavily_url": f"{self.base}/tavily/search",
        }

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/ddg/html/", self._ddg)
        app.router.add_get("/searx/search", self._searx)
        app.router.add_get("/brave/res/v1/web/search", self._brave)
        app.router.add_post("/tavily/search", self._tavily)

    async def _ddg(self, request: web.Request) -> web.Response:
        form = await request.post()
        self.requests.append(("duckduckgo", str(form["q"]), ""))
        # An ad first, as DuckDuckGo puts them, then the organic results behind its redirect.
        rows = [
            '<div class="result result--ad"><a class="result__a" href="https://ads.example/">'
            "Cheap tides</a></div>"
        ]
        for title, url, snippet in RESULTS:
            link = "//duckduckgo.com/l/?uddg=" + urllib.parse.quote(url, safe="") + "&rut=x"
            rows.append(
                f'<div class="result results_links web-result"><h2 class="result__title">'
                f'<a class="result__a" href="{html.escape(link)}">{html.escape(title)}</a></h2>'
                f'<a class="result__snippet" href="{html.escape(link)}">{html.escape(snippet)}</a>'
                "</div>"
            )
        page = f"<html><body><div id='links'>{''.join(rows)}</div></body></html>"
        return web.Response(text=page, content_type="text/html")

    async def _searx(self, request: web.Request) -> web.Response:
        if not self.searx_json or request.query.get("format") != "json":
            raise web.HTTPForbidden()
        self.requests.append(("searxng", request.query["q"], ""))
        results = [{"title": t, "url": u, "content": s, "engine": "x"} for t, u, s in RESULTS]
        return web.json_response({"query": request.query["q"], "results": results})

    async def _brave(self, request: web.Request) -> web.Response:
        key = request.headers.get("X-Subscription-Token", "")
        if key != BRAVE_KEY:
            return web.json_response({"type": "ErrorResponse"}, status=401)
        self.requests.append(("brave", request.query["q"], key))
        count = int(request.query.get("count", "20"))
        results = [
            {"title": t, "url": u, "description": f"<strong>{html.escape(s)}</strong>"}
            for t, u, s in RESULTS[:count]
        ]
        return web.json_response({"type": "search", "web": {"results": results}})

    async def _tavily(self, request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        if auth != f"Bearer {TAVILY_KEY}":
            return web.json_response({"detail": {"error": "Unauthorized"}}, status=401)
        body = await request.json()
        self.requests.append(("tavily", body["query"], auth.removeprefix("Bearer ")))
        results = [
            {"title": t, "url": u, "content": s, "score": 0.9}
            for t, u, s in RESULTS[: body.get("max_results", 5)]
        ]
        return web.json_response({"query": body["query"], "results": results})

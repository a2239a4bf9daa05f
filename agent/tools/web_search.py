"""The web_search tool: a query to the provider `tools.web.search` names, results as title,
URL and snippet.

    duckduckgo  its keyless HTML endpoint (a form POST; results read with lxml's CSS selectors)
    searxng     your instance's JSON API (`format=json` must be on in its settings.yml)
    brave       the Brave Search API (`tools.web.brave_api_key`)
    tavily      the Tavily API (`tools.web.tavily_api_key`)

Each base URL is `tools.web.<provider>_url`. The endpoint is the owner's choice, not the
model's, so it is not behind web_fetch's address guard (a SearXNG instance is often on the
LAN); the proxy settings, timeout and size cap are web_fetch's.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.web_fetch import USER_AGENT, read_capped, web_available
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import ToolsConfig, WebToolsConfig
from clawgate.kernel.errors import ToolError
from clawgate.kernel.net import env_proxy, tls_context

if TYPE_CHECKING:
    import aiohttp

_TAGS = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str


class WebSearch(Tool["WebSearch.Params"]):
    name = "web_search"
    description = (
        "Search the web: each hit with its name, URL and snippet. Read a page with web_fetch."
    )

    class Params(ToolParams):
        query: str = Field(min_length=1, description="What to search for")
        max_results: int = Field(5, ge=1, le=20, description="How many results")

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        return web_available(ctx_trust, config)

    async def run(self, params: Params, ctx: ToolContext) -> str:
        results = await search(params.query, params.max_results, ctx.config.web)
        if not results:
            return f"No results for {params.query!r}."
        return "\n\n".join(
            f"{n}. {r.title}\n   {r.url}" + (f"\n   {r.snippet}" if r.snippet else "")
            for n, r in enumerate(results, 1)
        )


async def search(query: str, limit: int, web: WebToolsConfig) -> list[SearchResult]:
    """The provider's first `limit` results; ToolError with one line when it fails."""
    import aiohttp

    provider = _PROVIDERS[web.search]
    url = getattr(web, f"{web.search}_url")
    timeout = aiohttp.ClientTimeout(total=web.timeout)
    connector = aiohttp.TCPConnector(ssl=tls_context())
    headers = {"User-Agent": USER_AGENT}
    async with aiohttp.ClientSession(connector=connector, timeout=timeout, headers=headers) as s:
        try:
            found = await provider(s, url, query, limit, web)
        except TimeoutError:
            raise ToolError(f"{web.search} did not answer within {web.timeout:g} s") from None
        except aiohttp.ClientError as exc:
            raise ToolError(f"{web.search}: {type(exc).__name__}: {exc}") from None
    return found[:limit]


async def _body(response: aiohttp.ClientResponse, web: WebToolsConfig) -> bytes:
    if response.status >= 400:
        hint = _HINTS.get((web.search, response.status), "")
        raise ToolError(
            f"{web.search}: HTTP {response.status} {response.reason or ''}".rstrip() + hint
        )
    body, _cut = await read_capped(response, web.max_bytes)
    return body


def _json(body: bytes, web: WebToolsConfig) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise ToolError(f"{web.search}: the answer is not JSON") from None
    if not isinstance(data, dict):
        raise ToolError(f"{web.search}: unexpected answer")
    return data


def _key(web: WebToolsConfig) -> str:
    secret = getattr(web, f"{web.search}_api_key")
    if secret is None or not secret.get_secret_value():
        raise ToolError(f"{web.search} needs tools.web.{web.search}_api_key")
    return str(secret.get_secret_value())


def _text(value: Any) -> str:
    """Plain text of a provider's field (Brave marks matches with <strong>)."""
    return html.unescape(_TAGS.sub("", str(value or ""))).strip()


def _listed(items: Any, snippet_key: str) -> list[SearchResult]:
    if not isinstance(items, list):
        return []
    return [
        SearchResult(_text(item.get("title")), str(item["url"]), _text(item.get(snippet_key)))
        for item in items
        if isinstance(item, dict) and item.get("url")
    ]


async def _duckduckgo(
    s: aiohttp.ClientSession, url: str, query: str, limit: int, web: WebToolsConfig
) -> list[SearchResult]:
    async with s.post(url, data={"q": query}, proxy=web.proxy or env_proxy(url)) as response:
        page = (await _body(response, web)).decode(response.charset or "utf-8", "replace")
    return await asyncio.to_thread(_duckduckgo_results, page)


def _duckduckgo_results(body: str) -> list[SearchResult]:
    from lxml import html as lxml_html

    page = lxml_html.fromstring(body)
    found = []
    for result in page.cssselect("div.result"):
        if "result--ad" in (result.get("class") or ""):
            continue
        links = result.cssselect("a.result__a")
        if not links:
            continue
        snippets = result.cssselect(".result__snippet")
        href = links[0].get("href") or ""
        found.append(
            SearchResult(
                links[0].text_content().strip(),
                _unwrap(href),
                snippets[0].text_content().strip() if snippets else "",
            )
        )
    if not found and page.cssselect("form#challenge-form, .anomaly-modal"):
        raise ToolError("duckduckgo asked for a captcha: try later, or use searxng or brave")
    return found


def _unwrap(href: str) -> str:
    """DuckDuckGo's redirect link (//duckduckgo.com/l/?uddg=<target>) -> the target."""
    parts = urllib.parse.urlsplit(href)
    target = urllib.parse.parse_qs(parts.query).get("uddg")
    if parts.path.endswith("/l/") and target:
        return target[0]
    return href


async def _searxng(
    s: aiohttp.ClientSession, url: str, query: str, limit: int, web: WebToolsConfig
) -> list[SearchResult]:
    endpoint = url.rstrip("/") + "/search"
    params = {"q": query, "format": "json"}
    async with s.get(endpoint, params=params, proxy=web.proxy or env_proxy(url)) as response:
        data = _json(await _body(response, web), web)
    return _listed(data.get("results"), "content")


async def _brave(
    s: aiohttp.ClientSession, url: str, query: str, limit: int, web: WebToolsConfig
) -> list[SearchResult]:
    headers = {"X-Subscription-Token": _key(web), "Accept": "application/json"}
    params = {"q": query, "count": str(limit)}
    proxy = web.proxy or env_proxy(url)
    async with s.get(url, params=params, headers=headers, proxy=proxy) as response:
        data = _json(await _body(response, web), web)
    web_part = data.get("web")
    return _listed(web_part.get("results") if isinstance(web_part, dict) else None, "description")


async def _tavily(
    s: aiohttp.ClientSession, url: str, query: str, limit: int, web: WebToolsConfig
) -> list[SearchResult]:
    headers = {"Authorization": f"Bearer {_key(web)}"}
    payload = {"query": query, "max_results": limit}
    proxy = web.proxy or env_proxy(url)
    async with s.post(url, json=payload, headers=headers, proxy=proxy) as response:
        data = _json(await _body(response, web), web)
    return _listed(data.get("results"), "content")


_PROVIDERS: dict[
    str,
    Callable[[aiohttp.ClientSession, str, str, int, WebToolsConfig], Awaitable[list[SearchResult]]],
] = {"duckduckgo": _duckduckgo, "searxng": _searxng, "brave": _brave, "tavily": _tavily}

_HINTS = {
    ("searxng", 403): " (turn the JSON format on: `search: formats: [html, json]` in settings.yml)",
    ("brave", 401): " (check tools.web.brave_api_key)",
    ("brave", 422): " (check tools.web.brave_api_key)",
    ("tavily", 401): " (check tools.web.tavily_api_key)",
}

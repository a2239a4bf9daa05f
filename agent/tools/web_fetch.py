"""The web_fetch tool: one URL over http(s), as Markdown or text, behind the SSRF guard.

Each request of a redirect chain (at most MAX_REDIRECTS) is its own hop: its host is
checked by `web_guard` (an IP literal before the request, a name inside the connector's
resolver, on the very answer the connection uses), so a public page cannot redirect the
gateway to 127.0.0.1, the LAN or 169.254.169.254. The body is read up to
`tools.web.max_bytes` (a longer text page is cut there, a longer PDF refused), the whole
fetch within `tools.web.timeout`. Through a proxy (`tools.web.proxy`, else the
environment's) the proxy makes the connection: the target's addresses are then checked by a
lookup of our own first, and the proxy's own host is trusted.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.web_extract import extract, kind_of
from clawgate.agent.tools.web_guard import AddressRefused, check, check_literal, make_resolver
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import ToolsConfig, WebToolsConfig
from clawgate.kernel.errors import ToolError
from clawgate.kernel.net import env_proxy, tls_context

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver

MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}
USER_AGENT = "clawgate-web-fetch/1 (+https://pypi.org/project/clawgate/)"


def web_available(trust: Trust, config: ToolsConfig) -> bool:
    """web_fetch and web_search: owner chats, and the others with `tools.web.in_groups`."""
    return config.web.enabled and (trust.is_owner or config.web.in_groups)


@dataclass(frozen=True)
class Fetched:
    url: str  # the last hop's
    content_type: str
    charset: str | None
    body: bytes
    truncated: bool


class WebFetch(Tool["WebFetch.Params"]):
    name = "web_fetch"
    description = (
        "Fetch a web page (http or https) and return its main text as Markdown (headings, "
        "links, tables); PDFs and plain text too."
    )

    class Params(ToolParams):
        url: str = Field(description="The http:// or https:// address")
        max_chars: int = Field(
            12_000,
            ge=100,
            le=200_000,
            description="Return at most this many characters",
        )

    def __init__(self, resolver: Callable[[], AbstractResolver] | None = None) -> None:
        # The DNS lookups under the guard: aiohttp's threaded resolver unless given.
        self._resolver = resolver

    def available(self, ctx_trust: Trust, config: ToolsConfig) -> bool:
        return web_available(ctx_trust, config)

    async def run(self, params: Params, ctx: ToolContext) -> str:
        fetched = await fetch(params.url, ctx.config.web, self._resolver)
        page = await extract(fetched.body, fetched.content_type, fetched.charset, fetched.url)
        head = [f"URL: {fetched.url}"]
        if page.title:
            head.insert(0, f"# {page.title}")
        if fetched.truncated:
            head.append(
                f"(only the first {len(fetched.body)} bytes were read: tools.web.max_bytes)"
            )
        text = page.text
        if len(text) > params.max_chars:
            text = text[: params.max_chars] + f"\n\n[... cut at {params.max_chars} characters]"
        return "\n".join(head) + "\n\n" + text


def _proxy_for(url: str, web: WebToolsConfig) -> str | None:
    return web.proxy or env_proxy(url)


async def fetch(
    url: str, web: WebToolsConfig, resolver: Callable[[], AbstractResolver] | None = None
) -> Fetched:
    """GET `url`, following at most MAX_REDIRECTS redirects, every hop checked."""
    import aiohttp
    from yarl import URL

    proxies = {p for p in (web.proxy, env_proxy("http://x"), env_proxy("https://x")) if p}
    connector = aiohttp.TCPConnector(
        resolver=make_resolver(
            web.allow_private,
            trusted_hosts={URL(p).host or "" for p in proxies},
            inner=resolver() if resolver else None,
        ),
        use_dns_cache=False,
        ssl=tls_context(),
    )
    async with aiohttp.ClientSession(
        connector=connector, headers={"User-Agent": USER_AGENT}
    ) as session:
        try:
            async with asyncio.timeout(web.timeout):
                return await _follow(session, _parse(url), web)
        except TimeoutError:
            raise ToolError(f"{url}: no complete answer within {web.timeout:g} s") from None
        except aiohttp.ClientConnectorError as exc:
            cause = exc.__cause__ or exc.os_error
            if isinstance(cause, AddressRefused):
                raise ToolError(str(cause)) from None
            raise ToolError(f"{url}: cannot connect ({exc.os_error.strerror or exc})") from None
        except aiohttp.ClientError as exc:
            raise ToolError(f"{url}: {type(exc).__name__}: {exc}") from None


def _parse(url: str) -> Any:
    from yarl import URL

    try:
        parsed = URL(url.strip())
    except ValueError:
        raise ToolError(f"{url!r} is not a URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ToolError(f"{url!r}: only http:// and https:// addresses can be fetched")
    return parsed


async def _follow(session: aiohttp.ClientSession, url: Any, web: WebToolsConfig) -> Fetched:
    for _hop in range(MAX_REDIRECTS + 1):
        check_literal(url.host, web.allow_private)
        proxy = _proxy_for(str(url), web)
        if proxy:
            await _check_name(url.host, url.port, web)
        async with session.get(url, allow_redirects=False, proxy=proxy) as response:
            location = response.headers.get("Location")
            if response.status in _REDIRECTS and location:
                url = _parse(str(response.url.join(_location(location))))
                continue
            if response.status >= 400:
                raise ToolError(f"{url}: HTTP {response.status} {response.reason or ''}".rstrip())
            content_type = response.content_type if "Content-Type" in response.headers else ""
            body, truncated = await read_capped(response, web.max_bytes)
            if truncated and kind_of(content_type, body) == "pdf":
                raise ToolError(f"{url}: a PDF over {web.max_bytes} bytes (tools.web.max_bytes)")
            return Fetched(str(response.url), content_type, response.charset, body, truncated)
    raise ToolError(f"more than {MAX_REDIRECTS} redirects, stopped at {url}")


def _location(location: str) -> Any:
    from yarl import URL

    try:
        return URL(location)
    except ValueError:
        raise ToolError(f"a redirect to {location!r}, which is not a URL") from None


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the body, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


async def _check_name(host: str, port: int | None, web: WebToolsConfig) -> None:
    """Through a proxy: the target's addresses, looked up here, checked before asking it."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(f"{host}: cannot resolve ({exc.strerror})") from None
    try:
        check(host, [str(info[4][0]) for info in infos], web.allow_private)
    except AddressRefused as exc:
        raise ToolError(str(exc)) from None

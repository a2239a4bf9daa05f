"""web_fetch through aiohttp against a fake web site on 127.0.0.2: Markdown out of HTML,
redirects, the SSRF guard on every hop, the size cap, PDF and text, trust."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from clawgate.agent.tools import WebFetch
from clawgate.agent.tools.web_guard import refusal
from clawgate.kernel.bus import Trust
from tests.fakes.web import FakeProxy, FakeWeb
from tests.web_helpers import call, tool_context

SITE = ["127.0.0.2"]  # the fake's address: loopback, so allowed explicitly


@pytest.fixture
async def site():
    async with FakeWeb() as fake:
        yield fake


async def test_an_article_becomes_markdown_with_headings_links_and_a_table(
    tmp_path: Path, site: FakeWeb
) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE)
    result = await call(ctx, "web_fetch", url=f"{site.base}/article")
    assert result.startswith("# Tide tables of Saint-Malo\nURL: ")
    assert "## This week" in result
    assert f"[harbour office]({site.base}/harbour)" in result  # made absolute
    assert "| Monday | 06:12 | 12:31 |" in result
    assert "thirteen metres" in result
    # Navigation, ads and the footer are not the article.
    assert "Buy one, get one free" not in result
    assert "Cookies policy" not in result


async def test_a_redirect_chain_is_followed_up_to_five_hops(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE)
    result = await call(ctx, "web_fetch", url=f"{site.base}/hop/4")
    assert f"URL: {site.base}/article" in result
    assert "thirteen metres" in result
    too_long = await call(ctx, "web_fetch", url=f"{site.base}/hop/5")
    assert too_long == f"Error: more than 5 redirects, stopped at {site.base}/article"


async def test_loopback_is_refused_unless_allowed(tmp_path: Path, site: FakeWeb) -> None:
    refused = await call(tool_context(tmp_path), "web_fetch", url=f"{site.base}/article")
    assert refused.startswith("Error: 127.0.0.2: 127.0.0.2 is a loopback address, not fetched")
    assert "tools.web.allow_private" in refused
    assert site.hosts == []  # nothing reached the site


async def test_a_redirect_to_127_0_0_1_is_refused_when_only_the_site_is_allowed(
    tmp_path: Path, site: FakeWeb
) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE)
    result = await call(ctx, "web_fetch", url=f"{site.base}/to-loopback")
    assert result.startswith("Error: 127.0.0.1: 127.0.0.1 is a loopback address")
    metadata = await call(ctx, "web_fetch", url=f"{site.base}/to-metadata")
    assert metadata.startswith("Error: 169.254.169.254: 169.254.169.254 is a link-local")
    assert site.hosts == []
    # Allowed, the hop is tried: nothing of the fake listens on 127.0.0.1.
    allowed = tool_context(tmp_path, allow_private=["127.0.0.0/8"])
    tried = await call(allowed, "web_fetch", url=f"{site.base}/to-loopback")
    assert "cannot connect (Connect call failed ('127.0.0.1'" in tried


async def test_a_name_is_checked_on_the_answer_the_connection_uses(
    tmp_path: Path, site: FakeWeb
) -> None:
    """DNS rebinding: a name that answers an allowed address first and 127.0.0.1 after.
    The one answer checked is the one connected to; the next lookup is checked again."""
    answers = ["127.0.0.2", "127.0.0.1"]
    lookups: list[str] = []

    class Rebinding(AbstractResolver):
        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            lookups.append(host)
            address = answers[min(len(lookups) - 1, 1)]
            return [
                {
                    "hostname": host,
                    "host": address,
                    "port": port,
                    "family": socket.AF_INET,
                    "proto": 0,
                    "flags": 0,
                }
            ]

        async def close(self) -> None:
            pass

    ctx = tool_context(tmp_path, allow_private=SITE)
    tools = [WebFetch(resolver=Rebinding)]
    url = f"http://rebind.example:{site.port}/article"
    first = await call(ctx, "web_fetch", tools, url=url)
    assert "thirteen metres" in first
    assert site.hosts == [f"rebind.example:{site.port}"]
    second = await call(ctx, "web_fetch", tools, url=url)
    assert second.startswith("Error: rebind.example: 127.0.0.1 is a loopback address")
    assert lookups == ["rebind.example", "rebind.example"]
    assert len(site.hosts) == 1


async def test_localhost_by_name_is_refused(tmp_path: Path, site: FakeWeb) -> None:
    result = await call(
        tool_context(tmp_path, allow_private=SITE),
        "web_fetch",
        url=f"http://localhost:{site.port}/",
    )
    assert "is a loopback address, not fetched" in result


async def test_a_huge_body_is_cut_at_max_bytes(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE, max_bytes=5_000)
    result = await call(ctx, "web_fetch", url=f"{site.base}/huge", max_chars=100_000)
    assert "(only the first 5000 bytes were read: tools.web.max_bytes)" in result
    body = result.split("\n\n", 1)[1]
    assert len(body) == 5_000
    assert body.startswith("all work and no play")


async def test_max_chars_cuts_the_text(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE)
    result = await call(ctx, "web_fetch", url=f"{site.base}/huge", max_chars=500)
    assert result.endswith("\n\n[... cut at 500 characters]")
    assert len(result) < 1000


async def test_a_page_that_never_comes_ends_at_the_timeout(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE, timeout=0.2)
    result = await call(ctx, "web_fetch", url=f"{site.base}/slow")
    assert result == f"Error: {site.base}/slow: no complete answer within 0.2 s"


async def test_a_pdf_and_plain_text_are_read(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE)
    pdf = await call(ctx, "web_fetch", url=f"{site.base}/paper.pdf")
    assert "[page 1]\nQuarterly tide report" in pdf
    text = await call(ctx, "web_fetch", url=f"{site.base}/notes.txt")
    assert text == f"URL: {site.base}/notes.txt\n\nmilk\neggs\nbread\n"


async def test_a_page_declaring_its_charset_in_meta_only_is_decoded(
    tmp_path: Path, site: FakeWeb
) -> None:
    result = await call(
        tool_context(tmp_path, allow_private=SITE), "web_fetch", url=f"{site.base}/latin1"
    )
    assert "Crêpes à la façon de Saint-Malo" in result


async def test_what_cannot_be_read_is_one_error_line(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, allow_private=SITE)
    image = await call(ctx, "web_fetch", url=f"{site.base}/image.png")
    assert image == f"Error: {site.base}/image.png is image/png, not text, HTML or PDF"
    missing = await call(ctx, "web_fetch", url=f"{site.base}/missing")
    assert missing == f"Error: {site.base}/missing: HTTP 404 Not Found"
    ftp = await call(ctx, "web_fetch", url="ftp://example.org/file")
    assert (
        ftp == "Error: 'ftp://example.org/file': only http:// and https:// addresses can be fetched"
    )


async def test_secrets_in_a_page_are_redacted(tmp_path: Path, site: FakeWeb) -> None:
    ctx = tool_context(tmp_path, secrets=("thirteen metres",), allow_private=SITE)
    result = await call(ctx, "web_fetch", url=f"{site.base}/article")
    assert "thirteen metres" not in result
    assert "[REDACTED]" in result


@pytest.mark.parametrize("trust", [Trust.ALLOWED, Trust.GROUP])
async def test_other_chats_get_web_fetch_only_with_in_groups(
    tmp_path: Path, site: FakeWeb, trust: Trust
) -> None:
    refused = await call(
        tool_context(tmp_path, trust, allow_private=SITE), "web_fetch", url=f"{site.base}/article"
    )
    assert refused.startswith("Error: unknown tool 'web_fetch'")
    ctx = tool_context(tmp_path, trust, allow_private=SITE, in_groups=True)
    assert "thirteen metres" in await call(ctx, "web_fetch", url=f"{site.base}/article")


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.1.2.3", "a private"),
        ("172.16.0.1", "a private"),
        ("192.168.1.1", "a private"),
        ("127.0.0.1", "a loopback"),
        ("169.254.169.254", "a link-local"),
        ("0.0.0.0", "an unspecified"),
        ("224.0.0.251", "a multicast"),
        ("239.255.255.250", "a multicast"),
        ("100.64.0.1", "a reserved"),  # carrier-grade NAT
        ("::1", "a loopback"),
        ("::", "an unspecified"),
        ("fc00::1", "a private"),
        ("fd12:3456::1", "a private"),
        ("fe80::1", "a link-local"),
        ("ff02::1", "a multicast"),
        ("::ffff:127.0.0.1", "a loopback"),
        ("::ffff:169.254.169.254", "a link-local"),
        ("::ffff:10.0.0.1", "a private"),
        ("64:ff9b::a9fe:a9fe", "a link-local"),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", "a loopback"),  # 6to4 of 127.0.0.1
        ("::7f00:1", "a loopback"),  # IPv4-compatible 127.0.0.1
    ],
)
def test_the_classifier_refuses_what_is_not_public(address: str, kind: str) -> None:
    reason = refusal(ipaddress.ip_address(address))
    assert reason is not None and f"is {kind} address" in reason


@pytest.mark.parametrize(
    "address", ["93.184.215.14", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.215.14"]
)
def test_the_classifier_lets_public_addresses_through(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


def test_allow_private_names_addresses_and_networks() -> None:
    allowed = [ipaddress.ip_network("127.0.0.1"), ipaddress.ip_network("fd00::/8")]
    assert refusal(ipaddress.ip_address("127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("fd00::5"), allowed) is None
    assert refusal(ipaddress.ip_address("127.0.0.2"), allowed) is not None
    assert refusal(ipaddress.ip_address("::1"), allowed) is not None


async def test_a_proxy_is_used_and_the_target_still_checked(tmp_path: Path, site: FakeWeb) -> None:
    async with FakeProxy() as proxy:
        proxy_url = f"http://127.0.0.1:{proxy.port}"
        ctx = tool_context(tmp_path, allow_private=SITE, proxy=proxy_url)
        result = await call(ctx, "web_fetch", url=f"{site.base}/notes.txt")
        assert result.endswith("served by the proxy")
        assert proxy.asked == [f"{site.base}/notes.txt"]
        # The proxy's own address is the owner's choice; the target is checked all the same.
        refused = await call(ctx, "web_fetch", url=f"http://localhost:{site.port}/")
        assert "is a loopback address, not fetched" in refused
        assert len(proxy.asked) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1]:{port}/article",
        "http://[::ffff:127.0.0.1]:{port}/article",
        "http://2130706433:{port}/article",  # 127.0.0.1 as one number
        "http://127.1:{port}/article",
        "http://0.0.0.0:{port}/article",
    ],
)
async def test_loopback_in_other_spellings_is_refused(
    tmp_path: Path, site: FakeWeb, url: str
) -> None:
    result = await call(
        tool_context(tmp_path, allow_private=SITE), "web_fetch", url=url.format(port=site.port)
    )
    assert result.startswith("Error: ")
    assert site.hosts == []

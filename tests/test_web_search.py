"""web_search against fakes of each provider's API, through aiohttp: results as title, URL and
snippet, keys sent the provider's way, one clear line for what goes wrong, trust."""

from __future__ import annotations

from pathlib import Path

import pytest

from clawgate.kernel.bus import Trust
from tests.fakes.search import BRAVE_KEY, TAVILY_KEY, FakeSearch
from tests.web_helpers import call, tool_context

EXPECTED = (
    "1. Saint-Malo tides\n   https://tides.example/saint-malo\n   Tide times & coefficients\n\n"
    "2. Grand Bé causeway\n   https://walks.example/grand-be\n   Walk out at low tide"
)
KEYS = {"brave_api_key": BRAVE_KEY, "tavily_api_key": TAVILY_KEY}


@pytest.fixture
async def providers():
    async with FakeSearch() as fake:
        yield fake


@pytest.mark.parametrize("provider", ["duckduckgo", "searxng", "brave", "tavily"])
async def test_each_provider_answers_in_the_same_form(
    tmp_path: Path, providers: FakeSearch, provider: str
) -> None:
    ctx = tool_context(tmp_path, search=provider, **providers.urls(), **KEYS)
    result = await call(ctx, "web_search", query="tides saint-malo", max_results=2)
    assert result == EXPECTED
    assert providers.requests[0][:2] == (provider, "tides saint-malo")


async def test_keys_go_where_the_provider_wants_them_and_never_into_the_result(
    tmp_path: Path, providers: FakeSearch
) -> None:
    for provider, key in (("brave", BRAVE_KEY), ("tavily", TAVILY_KEY)):
        ctx = tool_context(tmp_path, search=provider, **providers.urls(), **KEYS)
        assert (await call(ctx, "web_search", query="q")).startswith("1. Saint-Malo tides")
        assert providers.requests[-1] == (provider, "q", key)


async def test_a_missing_or_wrong_key_is_one_line(tmp_path: Path, providers: FakeSearch) -> None:
    missing = tool_context(tmp_path, search="brave", **providers.urls())
    assert await call(missing, "web_search", query="q") == (
        "Error: brave needs tools.web.brave_api_key"
    )
    wrong = tool_context(
        tmp_path, search="tavily", tavily_api_key="not-the-key", **providers.urls()
    )
    assert await call(wrong, "web_search", query="q") == (
        "Error: tavily: HTTP 401 Unauthorized (check tools.web.tavily_api_key)"
    )


async def test_a_searxng_without_json_output_says_how_to_turn_it_on(
    tmp_path: Path, providers: FakeSearch
) -> None:
    providers.searx_json = False
    ctx = tool_context(tmp_path, search="searxng", **providers.urls())
    result = await call(ctx, "web_search", query="q")
    assert result.startswith("Error: searxng: HTTP 403 Forbidden (turn the JSON format on")


async def test_a_provider_that_is_down_is_one_line(tmp_path: Path, providers: FakeSearch) -> None:
    ctx = tool_context(tmp_path, searxng_url="http://127.0.0.1:9/", search="searxng")
    result = await call(ctx, "web_search", query="q")
    assert result.startswith("Error: searxng: ClientConnectorError: Cannot connect to host")


@pytest.mark.parametrize("trust", [Trust.ALLOWED, Trust.GROUP])
async def test_other_chats_search_only_with_in_groups(
    tmp_path: Path, providers: FakeSearch, trust: Trust
) -> None:
    refused = await call(tool_context(tmp_path, trust, **providers.urls()), "web_search", query="q")
    assert refused.startswith("Error: unknown tool 'web_search'")
    assert providers.requests == []
    ctx = tool_context(tmp_path, trust, in_groups=True, **providers.urls())
    assert (await call(ctx, "web_search", query="q")).startswith("1. Saint-Malo tides")

"""The ledger: every model call lands in <data_dir>/usage/YYYY-MM.jsonl with its purpose,
through both model paths against the fake model (which reports usage)."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.llm import LLMClient
from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.spend.prices import COST_MAP_FILE, PriceBook, entries_in
from clawgate.agent.spend.scope import tagged
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import ModelPrice
from tests.fakes.llm import text
from tests.harness import Harness, make_config, wait_until
from tests.memory_helpers import save


@pytest.fixture(params=["direct", "litellm"])
def model_path(request):
    return str(request.param)


def cost_map_file() -> bytes:
    spec = importlib.util.find_spec("litellm")
    assert spec is not None and spec.submodule_search_locations
    return (Path(next(iter(spec.submodule_search_locations))) / COST_MAP_FILE).read_bytes()


@functools.cache
def whole_cost_map() -> dict[str, Any]:
    """litellm's bundled cost map parsed whole: what the ledger's prices must agree with
    (it parses only the entries it needs)."""
    parsed: dict[str, Any] = json.loads(cost_map_file())
    return parsed


def test_the_entries_read_alone_are_those_of_the_whole_map() -> None:
    data, whole = cost_map_file(), whole_cost_map()
    keys = list(whole)
    names = [*keys[::40], keys[-1], "no-such-model", "gpt-4o-mini"]
    assert entries_in(data, names) == {name: whole.get(name) for name in names}
    # A key of an entry (not a model) is not taken for a model.
    assert entries_in(data, ["input_cost_per_token"]) == {"input_cost_per_token": None}
    # A file of another layout is parsed whole.
    compact = json.dumps({"m": {"input_cost_per_token": 1}, "n": 2}).encode()
    assert entries_in(compact, ["m", "x"]) == {"m": {"input_cost_per_token": 1}, "x": None}


async def test_prices_come_from_the_cost_map_without_its_provider_prefix() -> None:
    book = PriceBook({"openai/mine": ModelPrice(input_per_mtok=2, output_per_mtok=4)})
    assert book.price("openai/gpt-4o-mini") is None  # not loaded yet: never guessed
    await book.load("openai/gpt-4o-mini", "openai/mine", "anthropic/gpt-4o-mini")
    entry = whole_cost_map()["gpt-4o-mini"]
    price = book.price("openai/gpt-4o-mini")
    assert price is not None
    assert (price.input, price.output) == (
        entry["input_cost_per_token"],
        entry["output_cost_per_token"],
    )
    mine = book.price("openai/mine")
    assert mine is not None and (mine.input, mine.output) == (2e-6, 4e-6)
    # The bare name's entry is OpenAI's: another provider's prefix finds no price.
    assert book.price("anthropic/gpt-4o-mini") is None


def ledger_lines(data_dir: Path) -> list[dict]:
    files = sorted((data_dir / "usage").glob("*.jsonl"))
    return [json.loads(line) for path in files for line in path.read_text().splitlines()]


async def test_a_priced_model_call_is_recorded_with_its_cost(tmp_path, fake_llm, agent_config):
    agent = agent_config.model_copy(update={"model": "openai/gpt-4o-mini"})
    config = make_config(tmp_path, agent)
    async with Harness(config) as harness:
        fake_llm.script(text("Hello there, Ann."))
        assert (await harness.ask("hi")).text == "Hello there, Ann."
    [usage] = fake_llm.usages
    [record] = ledger_lines(config.data_dir)
    entry = whole_cost_map()["gpt-4o-mini"]
    expected = (
        usage["prompt_tokens"] * entry["input_cost_per_token"]
        + usage["completion_tokens"] * entry["output_cost_per_token"]
    )
    assert record["purpose"] == "chat" and record["agent"] == "main"
    assert record["session_key"] == "test:1" and record["trust"] == "owner"
    assert record["model"] == "openai/gpt-4o-mini"
    assert (record["input_tokens"], record["output_tokens"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert record["cost_usd"] == pytest.approx(expected) and record["cost_usd"] > 0
    assert record["price_unknown"] is False


async def test_a_model_without_a_price_is_unknown_never_zero(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config)  # openai/fake-model: no price anywhere
    async with Harness(config) as harness:
        fake_llm.script(text("Hi."))
        await harness.ask("hello")
    [record] = ledger_lines(config.data_dir)
    assert record["cost_usd"] is None and record["price_unknown"] is True
    assert record["input_tokens"] > 0 and record["output_tokens"] == 1


async def test_configured_prices_override_the_cost_map(tmp_path, fake_llm, agent_config):
    prices = {"openai/fake-model": ModelPrice(input_per_mtok=1_000_000, output_per_mtok=2_000_000)}
    config = make_config(tmp_path, agent_config.model_copy(update={"prices": prices}))
    async with Harness(config) as harness:
        fake_llm.script(text("one two three"))
        await harness.ask("count")
    [record] = ledger_lines(config.data_dir)
    assert record["cost_usd"] == pytest.approx(record["input_tokens"] * 1 + 3 * 2)


async def test_a_compaction_carries_its_purpose(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config.model_copy(update={"memory_window": 4}))
    async with Harness(config) as harness:
        for word in ("one", "two", "three"):
            fake_llm.script(text(f"ok {word}"))
            await harness.ask(word)
        fake_llm.script(text("A summary."))
        reply = await harness.ask("/compact")
        assert reply.text.startswith("Compacted")
    purposes = [line["purpose"] for line in ledger_lines(config.data_dir)]
    assert purposes.count("chat") == 3 and "compaction" in purposes


def ledger_for(data_dir: Path) -> Ledger:
    return Ledger(data_dir, agent="main", prices=PriceBook({}))


async def test_a_streamed_call_with_cached_tokens_is_priced_at_the_cache_rate(
    tmp_path, fake_llm, agent_config
):
    ledger = ledger_for(tmp_path)
    config = agent_config.model_copy(update={"model": "openai/gpt-4o-mini"})
    client = LLMClient(config, ledger=ledger)
    fake_llm.cached_tokens = 3
    fake_llm.script(text("streamed words here"))
    pieces: list[str] = []

    async def on_delta(delta: Any) -> None:
        pieces.append(delta.text)

    with tagged("chat", session_key="telegram:7", trust=Trust.ALLOWED):
        response = await client.chat(
            [{"role": "user", "content": "one two three four five"}],
            on_delta=on_delta,
        )
    await client.aclose()
    assert response.content == "streamed words here" and pieces
    [usage] = fake_llm.usages
    [record] = ledger_lines(tmp_path)
    entry = whole_cost_map()["gpt-4o-mini"]
    fresh = usage["prompt_tokens"] - 3
    expected = (
        fresh * entry["input_cost_per_token"]
        + 3 * entry["cache_read_input_token_cost"]
        + usage["completion_tokens"] * entry["output_cost_per_token"]
    )
    assert (record["cached_tokens"], record["trust"], record["session_key"]) == (
        3,
        "allowed",
        "telegram:7",
    )
    assert record["cost_usd"] == pytest.approx(expected)


async def test_embeddings_and_transcriptions_are_recorded_with_their_purpose(
    tmp_path, fake_llm, agent_config
):
    ledger = ledger_for(tmp_path)
    client = LLMClient(agent_config, ledger=ledger)
    audio = tmp_path / "voice.ogg"
    audio.write_bytes(b"\0" * 50)
    with tagged(session_key="telegram:7", trust=Trust.OWNER):
        await client.embed(["buy milk", "walk the dog"], model="openai/embed-small")
        await client.transcribe(audio, model="openai/whisper-1")
    await client.aclose()
    embedding, transcription = ledger_lines(tmp_path)
    assert (embedding["purpose"], embedding["model"]) == ("embedding", "openai/embed-small")
    assert embedding["input_tokens"] == 5 and embedding["session_key"] == "telegram:7"
    assert embedding["cost_usd"] is None and embedding["price_unknown"] is True
    assert (transcription["purpose"], transcription["model"]) == (
        "transcription",
        "openai/whisper-1",
    )
    # Whisper is priced per second of audio, which the response does not tell: unknown.
    assert transcription["cost_usd"] is None and transcription["price_unknown"] is True


async def test_a_consolidation_carries_its_purpose(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config)
    async with Harness(config) as harness:
        fake_llm.script(text("Lisbon in May sounds good."))
        await harness.ask("I plan a trip to Lisbon in May")
        fake_llm.script(save())
        assert (await harness.ask("/new")).text == "New session started."
        await wait_until(
            lambda: any(r["purpose"] == "consolidation" for r in ledger_lines(config.data_dir))
        )
    chat, consolidation = ledger_lines(config.data_dir)
    assert chat["purpose"] == "chat" and consolidation["session_key"] == "test:1"
    assert consolidation["trust"] == "owner"

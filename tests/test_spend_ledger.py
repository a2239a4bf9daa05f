"""The ledger: every model call lands in <data_dir>/usage/YYYY-MM.jsonl with its purpose,
through both model paths against the fake model (which reports usage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawgate.agent.spend.prices import read_cost_map
from clawgate.kernel.config import ModelPrice
from tests.fakes.llm import text
from tests.harness import Harness, make_config


@pytest.fixture(params=["direct", "litellm"])
def model_path(request):
    return str(request.param)


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
    entry = read_cost_map()["gpt-4o-mini"]
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

"""Seeing the spend: /usage in chat (owner only), /status's heartbeat line, and
`clawgate usage` over the ledger a real run wrote."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from clawgate.gateway.cli.root import app as clawgate_app
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import ModelPrice
from tests.fakes.llm import text
from tests.harness import Harness, make_config

PRICE = {"openai/fake-model": ModelPrice(input_per_mtok=1_000_000, output_per_mtok=1_000_000)}


async def _two_chats(harness: Harness, fake_llm) -> None:
    fake_llm.script(text("Hello owner."), text("Hello group."))
    await harness.ask("hi")
    await harness.ask("hi all", chat_id="-5", trust=Trust.GROUP)


async def test_usage_in_chat_is_for_the_owner_only(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config.model_copy(update={"prices": PRICE}))
    async with Harness(config) as harness:
        await _two_chats(harness, fake_llm)
        calls = len(fake_llm.requests)
        report = (await harness.ask("/usage")).text
        refused = (await harness.ask("/usage", chat_id="-5", trust=Trust.GROUP)).text
        status = (await harness.ask("/status")).text
        group_status = (await harness.ask("/status", chat_id="-5", trust=Trust.GROUP)).text
    assert len(fake_llm.requests) == calls  # none of these asked the model
    ledger = next((config.data_dir / "usage").glob("*.jsonl"))
    records = [json.loads(line) for line in ledger.read_text().splitlines()]
    spent = sum(record["cost_usd"] for record in records)
    assert "calls" in report and f"${spent:.4f}, 2 calls" in report
    assert "By purpose this month:\n  chat: " in report
    assert "test:1" in report and "test:-5" in report
    assert refused == "Only the owner can see the usage."
    assert "Heartbeat today: $0.0000, 0 model calls" in status
    assert "Heartbeat" not in group_status  # what the owner spends is the owner's business


async def test_the_usage_command_sums_by_chat_with_unknown_prices(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, agent_config)  # no price for openai/fake-model
    async with Harness(config) as harness:
        await _two_chats(harness, fake_llm)
    toml = tmp_path / "usage.toml"
    toml.write_text(f'workspace = "{config.workspace}"\ndata_dir = "{config.data_dir}"\n')
    runner = CliRunner()
    shown = runner.invoke(clawgate_app, ["--config", str(toml), "usage", "--by", "chat"])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith("usage of main since ") and lines[0].endswith("(by chat)")
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {"test:1", "test:-5", "total"}
    assert all("unknown (" in row and "tokens)" in row for row in rows.values())
    raw = runner.invoke(
        clawgate_app, ["--config", str(toml), "usage", "--by", "purpose", "--json", "--since", "1d"]
    )
    document = json.loads(raw.output)
    [chat] = document["rows"]
    assert chat["name"] == "chat" and chat["calls"] == 2
    assert chat["cost_usd"] is None and chat["price_unknown"] is True
    assert document["total"]["unknown_tokens"] == chat["input_tokens"] + chat["output_tokens"]
    wrong = runner.invoke(clawgate_app, ["--config", str(toml), "usage", "--by", "colour"])
    assert wrong.exit_code == 2 and "--by 'colour'" in wrong.output

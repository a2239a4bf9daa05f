"""One fsync per turn: the delivery record rides on the session's next fsync (or a batch)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from clawgate.agent.session import store as store_module
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.storage import DiskWriter
from tests.fakes.llm import FakeLLM, text
from tests.harness import Harness, make_config, wait_until


class CountingWriter(DiskWriter):
    def __init__(self) -> None:
        super().__init__()
        self.fsyncs: Counter[str] = Counter()

    def fsync(self, path: Path) -> None:
        self.fsyncs[path.name] += 1
        super().fsync(path)


def deliveries(path: Path) -> list[int]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line["seq"] for line in lines if line.get("type") == "delivery"]


async def settled(gw: Harness) -> None:
    await gw.gateway.default.dispatcher.wait_idle(5)
    await asyncio.wait_for(gw.bus.outbound.join(), 5)


async def test_a_turn_and_its_delivery_cost_one_fsync(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SYNC_LATER_SECONDS", 3600.0)
    writer = CountingWriter()
    fake_llm.script(text("one"), text("two"))
    async with Harness(make_config(tmp_path, agent_config), writer=writer) as gw:
        path = gw.runtime.sessions.path_for("test:1")
        assert (await gw.ask("first")).text == "one"
        await settled(gw)
        assert (await gw.ask("second")).text == "two"
        await settled(gw)
        # Both deliveries are written at once; the second turn's fsync covered the first.
        assert deliveries(path) == [2, 4]
        assert writer.fsyncs[path.name] == 2
    # Stopping makes the last delivery durable too.
    assert writer.fsyncs[path.name] == 3


async def test_a_waiting_delivery_is_fsynced_without_another_turn(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "SYNC_LATER_SECONDS", 0.01)
    writer = CountingWriter()
    fake_llm.script(text("one"))
    async with Harness(make_config(tmp_path, agent_config), writer=writer) as gw:
        path = gw.runtime.sessions.path_for("test:1")
        await gw.ask("first")
        await settled(gw)
        await wait_until(lambda: writer.fsyncs[path.name] == 2)
        assert deliveries(path) == [2]

"""Per-turn overhead of the agent loop around a zero-latency fake model.

For sessions of 10, 1,000 and 10,000 stored messages: time inside the litellm call and
outside it (context building, persistence, fsync, history repair), p50/p99 each; and the
wall time of `clawgate --help`.

Run: python bench/turn_overhead.py [--turns 200] [--no-recall]

--no-recall turns memory.auto_recall off, to see the turn without the memory search that
otherwise runs on every owner turn.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.llm import LLMClient, LLMResponse
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import Message, State
from clawgate.gateway.onboard import onboard
from clawgate.kernel.bus import InboundMessage, Trust
from clawgate.kernel.config import AgentConfig, Config, MemoryConfig
from tests.fakes.llm import FakeLLM, text

LIVE_TAIL = 40  # what consolidation leaves unconsolidated in a long session


class TimedLLM(LLMClient):
    """Records the wall time spent inside each model call."""

    def __init__(self, config: AgentConfig) -> None:
        super().__init__(config)
        self.inside: list[float] = []

    async def chat(self, messages, **kwargs) -> LLMResponse:  # type: ignore[override]
        start = time.perf_counter()
        try:
            return await super().chat(messages, **kwargs)
        finally:
            self.inside.append(time.perf_counter() - start)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def measure(
    size: int, turns: int, fake: FakeLLM, root: Path, recall: bool
) -> tuple[list[float], list[float]]:
    agent = AgentConfig(model="openai/fake", api_base=fake.url, api_key="x", max_retries=0)
    config = Config(
        workspace=root / f"ws{size}",
        data_dir=root / "data",
        agent=agent,
        memory=MemoryConfig(auto_recall=recall),
    )
    onboard(root / "data" / f"config{size}.toml", workspace=config.workspace)
    runtime = AgentRuntime.build(config)
    llm = TimedLLM(agent)
    runtime.loop.llm = llm
    session = await runtime.sessions.get("bench:1")
    for i in range(size):
        role = "user" if i % 2 == 0 else "assistant"
        runtime.sessions.append(session, Message(role=role, content=f"message {i} " * 20))
    runtime.sessions.append(session, State(last_consolidated=max(0, size - LIVE_TAIL)))
    runtime.sessions.forget("bench:1")  # the first turn loads the file like after a restart

    totals: list[float] = []
    for i in range(turns + 5):
        message = InboundMessage(
            channel="bench", chat_id="1", message_id=str(i), text=f"turn {i}", trust=Trust.OWNER
        )
        start = time.perf_counter()
        await runtime.loop.handle(message)
        totals.append(time.perf_counter() - start)
        # Keep the live tail the size consolidation would keep it.
        live = runtime.sessions._cache["bench:1"]
        if len(live.unconsolidated()) > LIVE_TAIL:
            runtime.sessions.append(live, State(last_consolidated=live.next_seq - LIVE_TAIL))
    inside = llm.inside[5:]
    outside = [t - m for t, m in zip(totals[5:], inside, strict=True)]
    return inside, outside


def help_time() -> float:
    exe = Path(sys.executable).with_name("clawgate")
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([str(exe), "--help"], capture_output=True, check=True)
        runs.append(time.perf_counter() - start)
    return min(runs)


async def main_async(turns: int, recall: bool) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    async with FakeLLM() as fake:
        fake.handler = lambda request: text("ok")
        with tempfile.TemporaryDirectory() as tmp:
            print(f"auto-recall {'on' if recall else 'off'}")
            print(
                f"{'messages':>9} {'inside p50':>11} {'inside p99':>11} {'outside p50':>12} {'outside p99':>12}  (ms)"
            )
            for size in (10, 1_000, 10_000):
                inside, outside = await measure(size, turns, fake, Path(tmp), recall)
                print(
                    f"{size:>9} {_pct(inside, 0.5):>11.2f} {_pct(inside, 0.99):>11.2f}"
                    f" {_pct(outside, 0.5):>12.2f} {_pct(outside, 0.99):>12.2f}"
                )
    print(f"clawgate --help: {help_time() * 1000:.0f} ms (best of 5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--no-recall", dest="recall", action="store_false", help="memory.auto_recall off"
    )
    args = parser.parse_args()
    asyncio.run(main_async(args.turns, args.recall))


if __name__ == "__main__":
    main()

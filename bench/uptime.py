"""Per-turn cost over a long uptime: many turns in one session, no restart.

One owner session takes `--turns` turns (default 100,000) through the real AgentLoop,
session store and delivery records, against an in-process model that answers at once (a
FunctionModel: no socket, so every microsecond is the gateway's own). After each reply the
gateway's delivery record is appended as in the daemon, and consolidation is imitated by
moving the consolidated mark so the live tail stays the size consolidation keeps it: the
record list and the file grow as over weeks of uptime, the history sent stays flat.

Printed: the p50 per turn (handle + delivery record) of the first and of the last
`--window` turns and their ratio, plus the p50 of each tenth of the run, so a cost that
grows with the record count shows as a slope.

Run: python bench/uptime.py [--turns 100000] [--window 1000] [--recall]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.llm import LLMClient, ModelRequest
from clawgate.agent.llm.function import FunctionModel
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import State
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import InboundMessage, Trust
from clawgate.kernel.config import AgentConfig, Config, MemoryConfig

LIVE_TAIL = 40  # what consolidation leaves unconsolidated in a long session


def _answer(request: ModelRequest) -> str:
    return "ok, noted."


async def run(turns: int, root: Path, recall: bool) -> list[float]:
    agent = AgentConfig(model="scripted", max_retries=0)
    config = Config(
        workspace=root / "ws",
        data_dir=root / "data",
        agent=agent,
        memory=MemoryConfig(auto_recall=recall, embedding_model="none"),
    )
    onboard(root / "data" / "config.toml", workspace=config.workspace)
    runtime = AgentRuntime.build(config)
    runtime.loop.llm = LLMClient(agent, models=[FunctionModel(_answer, name="scripted")])
    store = runtime.sessions
    times: list[float] = []
    try:
        for i in range(turns):
            message = InboundMessage(
                channel="bench", chat_id="1", message_id=str(i), text=f"turn {i}", trust=Trust.OWNER
            )
            start = time.perf_counter()
            reply = await runtime.loop.handle(message)
            assert reply is not None
            await runtime.record_delivery(reply, None)
            times.append(time.perf_counter() - start)
            session = await store.get("bench:1")
            if session.unconsolidated_count() > LIVE_TAIL:
                store.append(session, State(last_consolidated=session.next_seq - LIVE_TAIL))
    finally:
        await runtime.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--window", type=int, default=1_000)
    parser.add_argument("--recall", action="store_true", help="memory.auto_recall on")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        times = asyncio.run(run(args.turns, Path(tmp), args.recall))
    first = statistics.median(times[: args.window]) * 1000
    last = statistics.median(times[-args.window :]) * 1000
    print(f"{args.turns} turns in one session, auto-recall {'on' if args.recall else 'off'}")
    print(f"p50 first {args.window}: {first:.3f} ms   last {args.window}: {last:.3f} ms")
    print(f"last / first: {last / first:.2f}")
    tenth = max(1, len(times) // 10)
    parts = [statistics.median(times[i : i + tenth]) * 1000 for i in range(0, len(times), tenth)]
    print("p50 per tenth (ms): " + " ".join(f"{p:.3f}" for p in parts))


if __name__ == "__main__":
    main()

"""A message that arrives during the litellm warm-up, against the same message without it.

On the litellm path (`agent.direct_http = false`) the gateway warms up after a start: it
imports litellm in a thread, then makes one mocked call (AgentRuntime.warm_up). A message
arriving meanwhile must never wait longer than it would have without any warm-up, when its
own first call pays the import and the one-off work.

Each measurement runs in a fresh process (litellm not yet imported): an owner's turn
through the real AgentLoop against a zero-latency OpenAI-compatible fake (bench/
model_call.py's, in its own process), `--delays` seconds after the runtime is built, with
the warm-up started at that moment ("warm-up") or never ("none"). Printed: the turn's wall
time per delay, the median of `--runs` processes each, the two kinds interleaved.

Run: python bench/litellm_warmup.py [--delays 0,0.5,1,3] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


async def one_turn(url: str, delay: float, warm: bool) -> float:
    """The turn's wall time in a process where litellm is not loaded yet."""
    from clawgate.agent.runtime import AgentRuntime
    from clawgate.gateway.setup.onboard import onboard
    from clawgate.kernel.bus import InboundMessage, Trust
    from clawgate.kernel.config import AgentConfig, Config, MemoryConfig

    assert "litellm" not in sys.modules
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        agent = AgentConfig(
            model="openai/fake", api_base=url, api_key="x", max_retries=0, direct_http=False
        )
        config = Config(
            workspace=root / "ws",
            data_dir=root / "data",
            agent=agent,
            memory=MemoryConfig(embedding_model="none"),
        )
        onboard(root / "data" / "config.toml", workspace=config.workspace)
        runtime = AgentRuntime.build(config)
        warming = asyncio.create_task(runtime.warm_up()) if warm else None
        await asyncio.sleep(delay)
        message = InboundMessage(
            channel="bench", chat_id="1", message_id="1", text="hello there", trust=Trust.OWNER
        )
        start = time.perf_counter()
        reply = await runtime.loop.handle(message)
        took = time.perf_counter() - start
        assert reply is not None and reply.text
        if warming is not None:
            await warming
        await runtime.close()
    return took


def child(url: str, delay: float, warm: bool) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--child", url, str(delay), "warm" if warm else "none"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["took"])


async def serve_and_measure(delays: list[float], runs: int) -> None:
    # Here, not at the top: the measured children import this file and must find litellm
    # and clawgate not loaded yet.
    from bench.model_call import model_server

    async with model_server() as url:
        print("first turn on the litellm path, ms (median of", runs, "fresh processes)")
        print(f"{'delay s':>8} {'none':>9} {'warm-up':>9}")
        for delay in delays:
            took: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(runs):
                for warm in (False, True):  # interleaved
                    took[warm].append(await asyncio.to_thread(child, url, delay, warm))
            cold, warm_ms = (statistics.median(took[w]) * 1000 for w in (False, True))
            print(f"{delay:>8g} {cold:>9.0f} {warm_ms:>9.0f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delays", default="0,0.5,1,3")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, delay, kind = args.child
        took = asyncio.run(one_turn(url, float(delay), kind == "warm"))
        print(json.dumps({"took": took}))
        return
    delays = [float(d) for d in args.delays.split(",")]
    asyncio.run(serve_and_measure(delays, args.runs))


if __name__ == "__main__":
    main()

"""Consolidation under load: a 2,000-message session with memory_window 50 against a
zero-latency fake model.

Prints how many consolidations ran, the time each took outside the model call, and reply
latency p50/p99 for turns that ran while a consolidation was in flight versus turns that
did not, plus a baseline run with consolidation off. A reply must never wait on one.

Run: python bench/consolidation.py [--messages 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.llm import LLMClient
from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.runtime import AgentRuntime
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import InboundMessage, Trust
from clawgate.kernel.config import AgentConfig, Config
from tests.fakes.llm import FakeLLM, text, tool_call


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _answer(request: dict) -> object:
    if any(t["function"]["name"] == "save_memory" for t in request.get("tools") or []):
        return tool_call("save_memory", history_entry="The user and the assistant talked.")
    return text("ok")


async def run(fake: FakeLLM, root: Path, messages: int, window: int) -> dict:
    agent = AgentConfig(
        model="openai/fake", api_base=fake.url, api_key="x", max_retries=0, memory_window=window
    )
    config = Config(workspace=root / f"ws{window}", data_dir=root / "data", agent=agent)
    onboard(root / "data" / f"c{window}.toml", workspace=config.workspace)
    runtime = AgentRuntime.build(config)
    consolidator = runtime.consolidator

    model_time: list[float] = []
    outside: list[float] = []
    llm_chat = LLMClient.chat

    async def timed_chat(self, msgs, **kwargs):
        start = time.perf_counter()
        try:
            return await llm_chat(self, msgs, **kwargs)
        finally:
            if kwargs.get("tool_choice"):
                model_time.append(time.perf_counter() - start)

    runtime.llm.chat = timed_chat.__get__(runtime.llm)  # type: ignore[method-assign]
    plain_consolidate = consolidator.consolidate

    async def timed_consolidate(session, **kwargs):
        before = len(model_time)
        start = time.perf_counter()
        outcome = await plain_consolidate(session, **kwargs)
        if outcome.ok and outcome.from_seq is not None:
            inside = sum(model_time[before:])
            outside.append(time.perf_counter() - start - inside)
        return outcome

    consolidator.consolidate = timed_consolidate  # type: ignore[method-assign]

    during: list[float] = []
    idle: list[float] = []
    for i in range(messages // 2):
        message = InboundMessage(channel="bench", chat_id="1", text=f"turn {i}", trust=Trust.OWNER)
        busy = consolidator.busy
        start = time.perf_counter()
        await runtime.loop.handle(message)
        elapsed = time.perf_counter() - start
        (during if busy or consolidator.busy else idle).append(elapsed)
        await asyncio.sleep(0)  # let a scheduled consolidation start, as the daemon would
    await consolidator.drain(30)
    report = audit_sessions(config.workspace / "sessions")
    await runtime.close()
    return {"during": during, "idle": idle, "outside": outside, "audit": report}


async def main_async(messages: int) -> None:
    async with FakeLLM() as fake:
        fake.handler = _answer
        with tempfile.TemporaryDirectory() as tmp:
            on = await run(fake, Path(tmp), messages, 50)
            off = await run(fake, Path(tmp), messages, 1_000_000)
    print(f"session: {messages} messages, memory_window 50, zero-latency fake model")
    print(f"consolidations run: {len(on['outside'])}")
    print(
        f"time per consolidation outside the model: p50 {_pct(on['outside'], 0.5):.2f} ms,"
        f" p99 {_pct(on['outside'], 0.99):.2f} ms"
    )
    print(
        f"reply latency, consolidation in flight ({len(on['during'])} turns):"
        f" p50 {_pct(on['during'], 0.5):.2f} ms, p99 {_pct(on['during'], 0.99):.2f} ms"
    )
    print(
        f"reply latency, none in flight ({len(on['idle'])} turns):"
        f" p50 {_pct(on['idle'], 0.5):.2f} ms, p99 {_pct(on['idle'], 0.99):.2f} ms"
    )
    print(
        f"reply latency, consolidation off ({len(off['idle']) + len(off['during'])} turns):"
        f" p50 {_pct(off['idle'], 0.5):.2f} ms, p99 {_pct(off['idle'], 0.99):.2f} ms"
    )
    audit = on["audit"]
    print(
        f"audit: {audit.total} messages, {audit.live} live, {audit.covered} covered,"
        f" {len(audit.problems)} unaccounted"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2000)
    asyncio.run(main_async(parser.parse_args().messages))


if __name__ == "__main__":
    main()

"""Per-turn overhead of the agent loop around a zero-latency fake model.

For sessions of 10, 1,000 and 10,000 stored messages: time inside the model call and
outside it, p50/p99 each, then the median per-turn cost of each step outside the model:
auto-recall, the rest of the system prompt, the token estimate, the session writes (the
turn's appends and fsync plus the delivery record the gateway adds after sending), and the
rest (history view, tools, bookkeeping). "model" is LLMClient.chat's wall time: our model
layer plus the loopback round trip to a zero-latency fake in its own process (the one in
bench/model_call.py), so the fake's CPU is not ours. Last, the wall time of
`clawgate --help`.

Run: python bench/turn_overhead.py [--turns 200] [--no-recall] [--litellm] [--sizes 100,10000]
     [--lines 1]

--no-recall turns memory.auto_recall off, to see the turn without the memory search that
otherwise runs on every owner turn. --sizes lists memory sizes in chunks: memory/ is filled
with that many chunks of synthetic notes (bench/search.py's corpus, indexed before the
turns are timed; 0: the onboarding template alone), one block of rows per size; --lines 10
makes each chunk ten 12-word entries (~1.3 KB), the shape of a day's log. Every turn
asks a different question (none repeats within a run, so no cache is flattered): most in
the notes' words, so auto-recall searches the memory and finds things, one in five in
words the memory does not hold (a new topic), as a chat would. "cpu" is the process's CPU
time per turn (every thread of it; the fake model runs in its own process).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.model_call import model_server
from clawgate.agent import loop as loop_module
from clawgate.agent.llm import LLMClient, LLMResponse
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import Message, State
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import InboundMessage, Trust
from clawgate.kernel.config import AgentConfig, Config, MemoryConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search import CHUNKS_PER_FILE, sentence, vocabulary  # bench/search.py's corpus

LIVE_TAIL = 40  # what consolidation leaves unconsolidated in a long session
STEPS = ("recall", "prompt", "estimate", "session", "rest")


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


class Steps:
    """Wall time per step of the current turn, by wrapping the objects that do each step."""

    def __init__(self) -> None:
        self.turn: dict[str, float] = dict.fromkeys(STEPS, 0.0)

    def wrap(self, step: str, function):  # type: ignore[no-untyped-def]
        if asyncio.iscoroutinefunction(function):

            @functools.wraps(function)
            async def timed_async(*args, **kwargs):  # type: ignore[no-untyped-def]
                started = time.perf_counter()
                try:
                    return await function(*args, **kwargs)
                finally:
                    self.turn[step] += time.perf_counter() - started

            return timed_async

        @functools.wraps(function)
        def timed(*args, **kwargs):  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.turn[step] += time.perf_counter() - started

        return timed

    def take(self) -> dict[str, float]:
        turn, self.turn = self.turn, dict.fromkeys(STEPS, 0.0)
        return turn


def write_notes(workspace: Path, chunks: int, lines: int = 1) -> None:
    """`chunks` sections of synthetic notes under memory/ (none for 0): a heading and one
    45-word line each, or with `lines` > 1 that many entries of 12 words, as a day's log
    holds (up to 10 lines a section is one chunk; more, and the chunker cuts it in two)."""
    rng = random.Random(7)
    vocab = vocabulary(rng)
    memory = workspace / "memory"
    memory.mkdir(parents=True, exist_ok=True)

    def body() -> str:
        if lines <= 1:
            return sentence(rng, vocab, 45)
        return "\n".join(f"- {sentence(rng, vocab, 12)}" for _ in range(lines))

    for day in range(chunks // CHUNKS_PER_FILE if chunks >= CHUNKS_PER_FILE else 0):
        sections = [
            f"## {n:02d} {sentence(rng, vocab, 2)}\n{body()}\n" for n in range(CHUNKS_PER_FILE)
        ]
        (memory / f"notes-{day:04d}.md").write_text("\n".join(sections))
    if 0 < chunks < CHUNKS_PER_FILE:
        sections = [f"## {n:02d} {sentence(rng, vocab, 45)}\n" for n in range(chunks)]
        (memory / "notes-0000.md").write_text("\n".join(sections))


def questions(count: int, seed: int) -> list[str]:
    """`count` different questions: four in five in the notes' words, one in five in
    words no note holds (syllables the corpus never uses)."""
    rng = random.Random(seed)
    vocab = vocabulary(random.Random(7))
    unknown = [
        "".join(rng.choice(("zu", "xe", "wy", "jo", "hag")) for _ in range(3)) for _ in range(400)
    ]
    asked: list[str] = []
    seen: set[str] = set()
    while len(asked) < count:
        if len(asked) % 5 == 4:
            text = f"and {' '.join(rng.sample(unknown, 2))}"
        else:
            text = f"what do you know about {sentence(rng, vocab, 3)}?"
        if text not in seen:
            seen.add(text)
            asked.append(text)
    return asked


async def measure(
    size: int,
    turns: int,
    url: str,
    root: Path,
    recall: bool,
    direct: bool,
    chunks: int,
    lines: int = 1,
) -> tuple[list[float], list[float], list[float], dict[str, list[float]]]:
    agent = AgentConfig(
        model="openai/fake", api_base=url, api_key="x", max_retries=0, direct_http=direct
    )
    config = Config(
        workspace=root / f"ws{size}-{chunks}",
        data_dir=root / "data",
        agent=agent,
        memory=MemoryConfig(auto_recall=recall),
    )
    onboard(root / "data" / f"config{size}-{chunks}.toml", workspace=config.workspace)
    write_notes(config.workspace, chunks, lines)
    asked = questions(turns + 5, seed=size)
    runtime = AgentRuntime.build(config)
    await runtime.search.index.refresh()  # the build is not a turn's cost
    index = runtime.search.index
    await index.bm25.warm(index.words_state)  # as the gateway's warm-up reads it (warm.py)
    llm = TimedLLM(agent)
    runtime.loop.llm = llm
    steps = Steps()
    context = runtime.loop.context
    # The extra parts (recalled memory, daily logs) run together: time them as one step.
    context._extra_parts = steps.wrap("recall", context._extra_parts)  # type: ignore[method-assign]
    context.system_prompt = steps.wrap("prompt", context.system_prompt)  # type: ignore[method-assign]
    store = runtime.sessions
    store.append = steps.wrap("session", store.append)  # type: ignore[method-assign]
    store.sync = steps.wrap("session", store.sync)  # type: ignore[method-assign]
    estimate = loop_module.estimate_messages
    loop_module.estimate_messages = steps.wrap("estimate", estimate)  # type: ignore[attr-defined]
    try:
        session = await store.get("bench:1")
        for i in range(size):
            role = "user" if i % 2 == 0 else "assistant"
            store.append(session, Message(role=role, content=f"message {i} " * 20))
        store.append(session, State(last_consolidated=max(0, size - LIVE_TAIL)))
        store.forget("bench:1")  # the first turn loads the file like after a restart

        totals: list[float] = []
        cpu: list[float] = []
        breakdown: list[dict[str, float]] = []
        for i, text in enumerate(asked):
            message = InboundMessage(
                channel="bench", chat_id="1", message_id=str(i), text=text, trust=Trust.OWNER
            )
            steps.take()
            start, start_cpu = time.perf_counter(), time.process_time()
            reply = await runtime.loop.handle(message)
            assert reply is not None
            # What the gateway does once the channel has sent the reply.
            await runtime.record_delivery(reply, None)  # its append and sync are timed
            totals.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            breakdown.append(steps.take())
            # Keep the live tail the size consolidation would keep it.
            live = store._cache["bench:1"]
            if len(live.unconsolidated()) > LIVE_TAIL:
                store.append(live, State(last_consolidated=live.next_seq - LIVE_TAIL))
    finally:
        loop_module.estimate_messages = estimate  # type: ignore[attr-defined]
        await llm.aclose()
        await runtime.close()
    inside = llm.inside[5:]
    outside = [t - m for t, m in zip(totals[5:], inside, strict=True)]
    per_step: dict[str, list[float]] = {step: [] for step in STEPS}
    for turn, out in zip(breakdown[5:], outside, strict=True):
        # The prompt step includes recall (recall runs inside it): report them apart.
        turn["prompt"] -= turn["recall"]
        turn["rest"] = out - sum(turn[step] for step in STEPS if step != "rest")
        for step in STEPS:
            per_step[step].append(turn[step])
    return inside, outside, cpu[5:], per_step


def cli_help_time() -> float:
    exe = Path(sys.executable).with_name("clawgate")
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([str(exe), "--help"], capture_output=True, check=True)
        runs.append(time.perf_counter() - start)
    return min(runs)


async def main_async(
    turns: int, recall: bool, direct: bool, sizes: list[int], help_time: bool, lines: int
) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    async with model_server() as url:
        with tempfile.TemporaryDirectory() as tmp:
            path = "direct" if direct else "litellm"
            print(f"auto-recall {'on' if recall else 'off'}, model path {path}; ms per turn")
            print(
                f"{'chunks':>7} {'messages':>9} {'model p50':>10} {'outside p50':>12}"
                f" {'outside p99':>12} {'cpu p50':>8} | "
                + " ".join(f"{step:>8}" for step in STEPS)
                + "  (step medians)"
            )
            for chunks in sizes:
                for size in (10, 1_000, 10_000):
                    inside, outside, cpu, per_step = await measure(
                        size, turns, url, Path(tmp), recall, direct, chunks, lines
                    )
                    medians = " ".join(
                        f"{statistics.median(per_step[step]) * 1000:>8.2f}" for step in STEPS
                    )
                    print(
                        f"{chunks:>7} {size:>9} {_pct(inside, 0.5):>10.2f}"
                        f" {_pct(outside, 0.5):>12.2f} {_pct(outside, 0.99):>12.2f}"
                        f" {_pct(cpu, 0.5):>8.2f} | {medians}",
                        flush=True,
                    )
    if help_time:
        print(f"clawgate --help: {cli_help_time() * 1000:.0f} ms (best of 5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument(
        "--no-recall", dest="recall", action="store_false", help="memory.auto_recall off"
    )
    parser.add_argument(
        "--litellm", dest="direct", action="store_false", help="agent.direct_http off"
    )
    parser.add_argument(
        "--sizes", default="100,10000", help="memory sizes in chunks, comma-separated (0: none)"
    )
    parser.add_argument(
        "--lines", type=int, default=1, help="lines a chunk, 12 words each (1: one of 45 words)"
    )
    parser.add_argument("--no-help", dest="help_time", action="store_false")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    asyncio.run(main_async(args.turns, args.recall, args.direct, sizes, args.help_time, args.lines))


if __name__ == "__main__":
    main()

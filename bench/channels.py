"""Telegram under load: 200 chats x 10 messages through the real in-process gateway.

The real TelegramChannel (python-telegram-bot, our polling loop and journal), dispatcher,
agent loop and litellm, against FakeTelegram and a zero-latency FakeLLM on 127.0.0.1, all
in this process and event loop. Every chat is an owner (allow_from holds all user ids).

Feeding (--mode):
  closed  every chat sends its first message at once, and each next one as soon as the
          reply to the previous one reached the fake (200 conversations in parallel);
  queued  all 2,000 messages are waiting in the fake before the gateway starts (a backlog
          after downtime), so the latency includes the wait in the queue.

Figures:
  turns/s       replies / (last reply reached the fake - first update served)
  latency       from the moment the fake's getUpdates handler returned the update to the
                moment its sendMessage handler accepted the reply (both observed by
                wrapping the fake's handlers on the instance; the fake itself is unchanged)
  litellm CPU   a SIGPROF sampler on the event-loop thread (ITIMER_PROF: a tick per 1 ms of
                process CPU asked, the kernel's timer tick in practice): ticks with a litellm
                frame on the stack / all ticks x process CPU, divided by the model calls. Includes what litellm calls (OpenAI SDK, httpx,
                pydantic); the fakes' own handlers run without a litellm frame and are not
                counted. Ticks from worker threads (fsync) land wherever the loop thread is.
  process CPU   time.process_time over the run / turns: gateway, PTB and both fakes
  outbound      the deepest the outbound queue got (sampled every 10 ms): replies the
                model produced that wait for the one-at-a-time sender
  peak RSS      resource.getrusage(RUSAGE_SELF).ru_maxrss, fakes included

Then the gateway is stopped (queued turns finish and replies flush), and the check: every
chat got exactly one reply per message, in the order it sent them.

Run: python bench/channels.py [--chats 200] [--messages 10] [--mode both|closed|queued]
"""

from __future__ import annotations

import os

# Before anything imports litellm: otherwise it fetches its cost map over the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import argparse
import asyncio
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.telegram import create_channel
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import AgentConfig, ChannelsConfig, TelegramConfig
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import make_config

FIRST_CHAT = 100_001
RUN_TIMEOUT = 150.0


class OutboundBacklog:
    """The deepest the outbound queue got: replies made but not yet being delivered."""

    def __init__(self, bus: MessageBus, interval: float = 0.01) -> None:
        self.peak = 0
        self._task = asyncio.create_task(self._watch(bus, interval))

    async def _watch(self, bus: MessageBus, interval: float) -> None:
        while True:
            self.peak = max(self.peak, bus.outbound.qsize())
            await asyncio.sleep(interval)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class LitellmSampler:
    """Counts process-CPU ticks, and those with a litellm frame on the main thread's stack.

    SIGPROF fires per `interval` of process CPU time (at the kernel timer's resolution);
    Python runs the handler on the main thread - the event loop's - with the frame it was
    executing, so a tick lands where the CPU went.
    """

    def __init__(self, interval: float = 0.001) -> None:
        import litellm

        self.prefix = os.path.dirname(litellm.__file__) + os.sep
        self.interval = interval
        self.ticks = 0
        self.litellm_ticks = 0

    def _tick(self, signum: int, frame: FrameType | None) -> None:
        self.ticks += 1
        while frame is not None:
            if frame.f_code.co_filename.startswith(self.prefix):
                self.litellm_ticks += 1
                return
            frame = frame.f_back

    def __enter__(self) -> LitellmSampler:
        signal.signal(signal.SIGPROF, self._tick)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, signal.SIG_DFL)

    @property
    def share(self) -> float:
        return self.litellm_ticks / self.ticks if self.ticks else 0.0


@dataclass
class Traffic:
    """What the fake served and received, timed from outside the fake's logic."""

    chats: list[int]
    messages: int
    closed_loop: bool
    served: dict[int, float] = field(default_factory=dict)  # update_id -> handed out
    update_of: dict[tuple[int, int], int] = field(default_factory=dict)  # (chat, n) -> update
    replied: dict[tuple[int, int], float] = field(default_factory=dict)  # first reply to each
    replies: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def say(self, fake: FakeTelegram, chat: int, n: int) -> None:
        self.update_of[(chat, n)] = fake.user_says(chat, message_text(chat, n))

    def attach(self, fake: FakeTelegram) -> None:
        get_updates = fake._m_getUpdates
        deliver = fake._deliver

        async def timed_get_updates(params: dict[str, Any]) -> Any:
            batch = await get_updates(params)
            now = time.perf_counter()
            for update in batch:
                self.served.setdefault(update["update_id"], now)
            return batch

        def timed_deliver(chat_id: int, params: dict[str, Any], record: dict[str, Any], *rest):
            result = deliver(chat_id, params, record, *rest)
            now = time.perf_counter()
            n = reply_number(chat_id, record.get("text", ""))
            if n is not None:
                self.replied.setdefault((chat_id, n), now)
                if self.closed_loop and n + 1 < self.messages:
                    self.say(fake, chat_id, n + 1)
            self.replies += 1
            if self.replies >= len(self.chats) * self.messages:
                self.done.set()
            return result

        fake._m_getUpdates = timed_get_updates  # type: ignore[method-assign]
        fake._deliver = timed_deliver  # type: ignore[method-assign]


def message_text(chat: int, n: int) -> str:
    return f"chat {chat} message {n}"


def reply_number(chat: int, reply: str) -> int | None:
    prefix = f"re: {message_text(chat, 0)[:-1]}"
    return int(reply[len(prefix) :]) if reply.startswith(prefix) else None


def answer(body: dict[str, Any]) -> Any:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text(f"re: {users[-1]['content']}")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def run(mode: str, chats: int, messages: int, root: Path) -> bool:
    chat_ids = list(range(FIRST_CHAT, FIRST_CHAT + chats))
    async with FakeTelegram() as fake, FakeLLM() as llm:
        llm.handler = answer
        agent = AgentConfig(model="openai/fake", api_base=llm.url, api_key="x", max_retries=0)
        telegram = TelegramConfig(
            enabled=True,
            token=TOKEN,
            base_url=fake.base_url,
            base_file_url=fake.base_file_url,
            poll_timeout=10,
            allow_from=[str(c) for c in chat_ids],
        )
        config = make_config(root / mode, agent, channels=ChannelsConfig(telegram=telegram))
        bus = MessageBus()
        channel = create_channel(config.channels.telegram, bus, config)
        runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
        # litellm's import and first-call setup happen here, not inside the measured run.
        await runtime.loop.llm.chat([{"role": "user", "content": "warm up"}])
        warmup_calls = len(llm.requests)
        gateway = Gateway([(runtime, bus)], [channel], bus)

        traffic = Traffic(chat_ids, messages, closed_loop=mode == "closed")
        traffic.attach(fake)
        for chat in chat_ids:
            for n in range(1 if mode == "closed" else messages):
                traffic.say(fake, chat, n)

        backlog = OutboundBacklog(bus)
        try:
            cpu_start = time.process_time()
            with LitellmSampler() as sampler:
                await gateway.start()
                await asyncio.wait_for(traffic.done.wait(), RUN_TIMEOUT)
                cpu = time.process_time() - cpu_start
        finally:
            await backlog.stop()
            await gateway.stop()
        calls = len(llm.requests) - warmup_calls

        turns = len(traffic.replied)
        latencies = [
            traffic.replied[key] - traffic.served[update]
            for key, update in traffic.update_of.items()
            if key in traffic.replied and update in traffic.served
        ]
        window = max(traffic.replied.values()) - min(traffic.served.values())
        got = {c: [m.get("text") for m in fake.messages_to(c)] for c in chat_ids}
        expected = {c: [f"re: {message_text(c, n)}" for n in range(messages)] for c in chat_ids}
        in_order = sum(got[c] == expected[c] for c in chat_ids)
        counts = Counter(t for c in chat_ids for t in got[c])
        missing = sum(1 for c in chat_ids for t in expected[c] if counts[t] == 0)
        doubled = sum(1 for t, k in counts.items() if k > 1)
        extra = sum(1 for t in counts if not t or not t.startswith("re: chat "))
        ok = in_order == chats and not missing and not doubled and not extra
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        print(
            f"mode {mode}: {chats} chats x {messages} messages, "
            f"max_concurrent_turns {config.agent.max_concurrent_turns}"
        )
        print(f"  turns/s            {turns / window:8.1f}  ({turns} turns in {window:.2f} s)")
        print(
            f"  served->reply      p50 {pct(latencies, 0.5):8.1f} ms   "
            f"p99 {pct(latencies, 0.99):8.1f} ms   max {pct(latencies, 1.0):8.1f} ms"
        )
        print(
            f"  litellm CPU/call   {cpu * sampler.share / calls * 1000:8.2f} ms  "
            f"({sampler.share:.0%} of {sampler.ticks} CPU ticks, {calls} model calls)"
        )
        print(f"  process CPU/turn   {cpu / turns * 1000:8.2f} ms  ({cpu:.1f} s CPU in all)")
        print(f"  outbound backlog   {backlog.peak:8d}  replies waiting to be sent, at most")
        print(f"  peak RSS           {rss_mb:8.0f} MB  (whole process so far, fakes included)")
        print(
            f"  check              {'OK' if ok else 'FAILED'}: {in_order}/{chats} chats complete "
            f"and in order, {missing} missing, {doubled} doubled, {extra} unexpected; "
            f"getUpdates calls {fake.calls['getUpdates']}, "
            f"sendChatAction calls {fake.calls['sendChatAction']}"
        )
        return ok


async def main_async(mode: str, chats: int, messages: int) -> bool:
    modes = ["closed", "queued"] if mode == "both" else [mode]
    with tempfile.TemporaryDirectory() as tmp:
        results = [await run(m, chats, messages, Path(tmp)) for m in modes]
    return all(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chats", type=int, default=200)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--mode", choices=["both", "closed", "queued"], default="both")
    args = parser.parse_args()
    ok = asyncio.run(main_async(args.mode, args.chats, args.messages))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

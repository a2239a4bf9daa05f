"""Load: 1,000 sessions x 20 messages at once through the in-process gateway.

The real bus, dispatcher, agent loop, runtime (sessions on disk, fsync per turn) and
channel manager, with a recording channel in place of a chat platform (as in
tests/harness.py). The model is FakeLLM in a separate process (so its CPU is not ours),
answering "re: <last user text>" after `--latency` seconds; litellm talks to it over
loopback. Each configuration runs in a fresh child process, so peak RSS is its own.

Printed per run: throughput; gateway overhead per turn (time in AgentLoop.handle minus the
time inside LLMClient.chat) p50/p99; CPU time of the model-call layer per call, measured by
stepping every 25th call's coroutine and summing `time.thread_time()` over its steps (the direct
path's POST on aiohttp, or with --litellm each `litellm.acompletion`: the synchronous work
litellm, the OpenAI SDK and httpx do on the event loop's thread; aiohttp parses responses in
its protocol's callbacks, outside the coroutine, so the direct figure is a lower bound and
bench/model_call.py the better measure of that layer), plus the whole process's
CPU per turn split into that layer and the rest (ours, asyncio, the OS); peak RSS (ru_maxrss); peak open file descriptors (sampled
every 100 ms); and the checks: every message answered once, replies and session files in
per-session order.

`agent.max_concurrent_turns` bounds turns in flight, so with 200 ms per model call the
default (8) cannot exceed 40 turns/s: 20,000 turns would take over 500 s. To stay within
ten minutes the default-concurrency run uses fewer messages per session (--default-messages)
and says so; the raised-concurrency runs do the full 1,000 x 20.

With `--agents N ...` each run also serves N agents in one gateway (as the daemon does,
through gateway/daemon/routing.py: a Router, one AgentUnit per agent), sessions spread round-robin
over them and the concurrency limit split evenly, so the figures compare with one agent at
the same total concurrency: per-turn overhead and CPU must not grow with N.

Run: python bench/load.py [--sessions 1000] [--messages 20] [--latency 0.2]
                          [--concurrency 8 64] [--default-messages 4] [--agents 1 2 8]
     python bench/load.py --cluster 3 [--messages 20]   (bench/load_cluster.py)
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Generator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.llm import LLMClient, LLMResponse
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import load_session, session_filename
from clawgate.channels.base import Channel
from clawgate.channels.manager import ChannelStates
from clawgate.gateway.app import build_runtimes
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.routing import Router
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.config import AgentConfig, AgentSpec, Config
from tests.fakes.llm import FakeLLM, delay, text

DEFAULT_CONCURRENCY = AgentConfig.model_fields["max_concurrent_turns"].default

_model_time: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "model_time", default=None
)


# -- the fake model, in its own process ------------------------------------------------------


async def serve_fake(latency: float) -> None:
    """Print the port, serve until stdin closes."""
    async with FakeLLM() as fake:

        def answer(body: dict[str, Any]) -> Any:
            fake.requests.clear()  # 20,000 request bodies would only cost memory
            users = [m for m in body["messages"] if m.get("role") == "user"]
            return delay(latency, text(f"re: {users[-1]['content']}"))

        fake.handler = answer
        print(f"PORT {fake.url}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


# -- instruments ----------------------------------------------------------------------------


class CpuTimed:
    """Awaits a coroutine step by step, adding the thread CPU time of each step to `sink`."""

    def __init__(self, coro: Awaitable[Any], sink: list[float]) -> None:
        self._coro = coro
        self._sink = sink

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self._coro.__await__()
        cpu = 0.0
        value: Any = None
        error: BaseException | None = None
        try:
            while True:
                started = time.thread_time()
                try:
                    yielded = steps.throw(error) if error is not None else steps.send(value)
                except StopIteration as done:
                    return done.value
                finally:
                    cpu += time.thread_time() - started
                value, error = None, None
                try:
                    value = yield yielded
                except BaseException as exc:  # cancellation is passed on into the coroutine
                    error = exc
        finally:
            self._sink.append(cpu)


class TimedLLM(LLMClient):
    """Adds the wall time of each model call to the current turn's account."""

    async def chat(self, messages, **kwargs) -> LLMResponse:  # type: ignore[no-untyped-def, override]
        started = time.perf_counter()
        try:
            return await super().chat(messages, **kwargs)
        finally:
            account = _model_time.get()
            if account is not None:
                account.append(time.perf_counter() - started)


# Only every LAYER_SAMPLE-th model call is stepped: a clock read per step of every call
# cost a tenth of the process's CPU at zero model latency.
LAYER_SAMPLE = 25


def instrument_model_layer(llm: LLMClient, sink: list[float], direct: bool) -> None:
    calls = [0]

    def sampled(coro: Awaitable[Any]) -> Awaitable[Any]:
        calls[0] += 1
        return CpuTimed(coro, sink) if calls[0] % LAYER_SAMPLE == 0 else coro

    if direct:
        complete = llm._direct.complete

        def timed_complete(*args: Any, **kwargs: Any) -> Awaitable[Any]:
            return sampled(complete(*args, **kwargs))

        llm._direct.complete = timed_complete  # type: ignore[method-assign]
        return
    litellm = import_litellm()  # imported here, before the clock starts
    original = litellm.acompletion

    def acompletion(*args: Any, **kwargs: Any) -> Awaitable[Any]:
        return sampled(original(*args, **kwargs))

    litellm.acompletion = acompletion


class BenchChannel(Channel):
    """Records each reply with its arrival time; `done` is set when `expected` arrived."""

    name = "bench"

    def __init__(self, bus: MessageBus, expected: int) -> None:
        super().__init__(bus)
        self.replies: dict[str, list[tuple[str, float]]] = {}
        self.errors = 0
        self.count = 0
        self.expected = expected
        self.done = asyncio.Event()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, message: OutboundMessage) -> None:
        self.replies.setdefault(message.chat_id, []).append((message.text, time.perf_counter()))
        self.errors += message.is_error
        self.count += 1
        if self.count >= self.expected:
            self.done.set()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- one configuration, in a child process ----------------------------------------------------


async def run_one(
    sessions: int, messages: int, latency: float, concurrency: int, direct: bool, agents: int = 1
) -> dict:
    fake = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        "--latency",
        str(latency),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert fake.stdout is not None and fake.stdin is not None
    url = (await fake.stdout.readline()).decode().split()[1]
    try:
        with tempfile.TemporaryDirectory(prefix="clawgate-load-") as tmp:
            return await drive(
                Path(tmp), url, sessions, messages, latency, concurrency, direct, agents
            )
    finally:
        fake.stdin.close()
        await fake.wait()


async def drive(
    root: Path,
    url: str,
    sessions: int,
    messages: int,
    latency: float,
    concurrency: int,
    direct: bool,
    agents: int = 1,
) -> dict:
    agent = AgentConfig(
        model="openai/fake-model",
        api_base=url,
        api_key="sk-bench",
        request_timeout=120,
        max_retries=0,
        max_concurrent_turns=concurrency,
        direct_http=direct,
    )
    config = bench_config(root, agent, agents)
    bus = MessageBus()
    layer_cpu: list[float] = []
    turns: list[tuple[float, float]] = []  # (time in handle, time inside the model)
    total = sessions * messages
    channel = BenchChannel(bus, total + 1)
    workspaces: dict[str | None, Path] = {}
    if agents == 1:
        runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
        timed(runtime, layer_cpu, turns, direct)
        gateway = Gateway([(runtime, bus)], [channel], bus)
        workspaces[None] = config.workspace
    else:
        router = Router(config)
        built = build_runtimes(router, bus, ChannelStates())
        for built_runtime, _ in built:
            timed(built_runtime, layer_cpu, turns, direct)
            workspaces[built_runtime.config.agent_name] = built_runtime.config.workspace
        gateway = Gateway(built, {"bench": channel}, bus, router=router)
    names = list(workspaces)
    for workspace in workspaces.values():
        onboard(workspace.parent / f"{workspace.parent.name}.toml", workspace=workspace)
    await gateway.start()
    sampler_stop = asyncio.Event()
    peak = {"fds": open_fds()}

    async def sample() -> None:
        while not sampler_stop.is_set():
            peak["fds"] = max(peak["fds"], open_fds())
            try:
                async with asyncio.timeout(0.1):
                    await sampler_stop.wait()
            except TimeoutError:
                pass

    try:
        # One turn first: litellm's import and the first connection are not the load.
        # Every agent's first connection and memory index too (recall skips small talk).
        for name in names:
            await bus.publish_inbound(
                InboundMessage(
                    channel="bench",
                    chat_id="warm-up",
                    text="what did we plan for the garden last week?",
                    trust=Trust.OWNER,
                    agent=name,
                )
            )
        channel.expected += len(names) - 1
        async with asyncio.timeout(120):
            while channel.count < len(names):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        turns.clear()
        layer_cpu.clear()
        sampler = asyncio.create_task(sample())
        cpu_before = time.process_time()
        published: dict[tuple[str, int], float] = {}
        started = time.perf_counter()
        for number in range(messages):
            for session in range(sessions):
                chat = f"s{session:04d}"
                published[(chat, number)] = time.perf_counter()
                await bus.publish_inbound(
                    InboundMessage(
                        channel="bench",
                        chat_id=chat,
                        message_id=f"{chat}-{number}",
                        text=f"{chat} message {number}",
                        trust=Trust.OWNER,
                        agent=names[session % len(names)],
                    )
                )
        async with asyncio.timeout(max(600, total * 0.2 / concurrency * 3)):
            await channel.done.wait()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        sampler_stop.set()
        await sampler
    finally:
        await gateway.stop(grace=5)

    lost = out_of_order = 0
    latencies: list[float] = []
    for session in range(sessions):
        chat = f"s{session:04d}"
        got = channel.replies.get(chat, [])
        wanted = [f"re: {chat} message {n}" for n in range(messages)]
        texts = [t for t, _ in got]
        lost += len(set(wanted) - set(texts))
        out_of_order += texts != wanted and sorted(texts) == sorted(wanted)
        for number, (_, arrived) in enumerate(got[:messages]):
            latencies.append(arrived - published[(chat, number)])
    stored_bad = 0
    for session in range(sessions):
        key = f"bench:s{session:04d}"
        workspace = workspaces[names[session % len(names)]]
        path = workspace / "sessions" / f"{session_filename(key)}.jsonl"
        stored = [(m.role, m.content) for m in load_session(path, key).messages]
        wanted_pairs = [
            pair
            for n in range(messages)
            for pair in (
                ("user", f"s{session:04d} message {n}"),
                ("assistant", f"re: s{session:04d} message {n}"),
            )
        ]
        stored_bad += stored != wanted_pairs
    overhead = [(t - m) * 1000 for t, m in turns]
    inside = [m * 1000 for _, m in turns]
    return {
        "concurrency": concurrency,
        "latency": latency,
        "sessions": sessions,
        "messages": messages,
        "turns": len(turns),
        "elapsed_s": elapsed,
        "throughput": total / elapsed,
        "overhead_p50_ms": percentile(overhead, 0.5),
        "overhead_p99_ms": percentile(overhead, 0.99),
        "model_p50_ms": percentile(inside, 0.5),
        "model_p99_ms": percentile(inside, 0.99),
        "latency_p50_s": percentile(latencies, 0.5),
        "latency_p99_s": percentile(latencies, 0.99),
        "path": "direct" if direct else "litellm",
        "layer_cpu_mean_ms": statistics.fmean(layer_cpu) * 1000 if layer_cpu else 0,
        "layer_cpu_p99_ms": percentile(layer_cpu, 0.99) * 1000,
        "layer_calls": len(layer_cpu),
        "layer_cpu_per_turn_ms": statistics.fmean(layer_cpu) * len(turns) / total * 1000
        if layer_cpu
        else 0,
        "process_cpu_per_turn_ms": cpu / total * 1000,
        "process_cpu_s": cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_fds": peak["fds"],
        "replies": channel.count - len(names),
        "agents": agents,
        "error_replies": channel.errors,
        "lost": lost,
        "sessions_out_of_order": out_of_order,
        "session_files_wrong": stored_bad,
    }


def bench_config(root: Path, agent: AgentConfig, agents: int) -> Config:
    """One agent as a plain config; N agents as main plus N-1 `[agents.aK]`, the turn limit
    split evenly so the total matches the single-agent run."""
    config = Config(workspace=root / "workspace", data_dir=root / "data", agent=agent)
    if agents == 1:
        return config
    share = max(1, agent.max_concurrent_turns // agents)
    specs = {"main": AgentSpec(max_concurrent_turns=share)}
    specs.update({f"a{n}": AgentSpec(max_concurrent_turns=share) for n in range(1, agents)})
    return config.model_copy(update={"agents": specs})


def timed(
    runtime: AgentRuntime,
    layer_cpu: list[float],
    turns: list[tuple[float, float]],
    direct: bool,
) -> None:
    """Time each of the runtime's turns and model calls into the shared lists."""
    llm = TimedLLM(runtime.config.agent)
    runtime.loop.llm = llm
    instrument_model_layer(llm, layer_cpu, direct)
    handle = runtime.loop.handle

    async def timed_handle(message: InboundMessage) -> OutboundMessage | None:
        account: list[float] = []
        token = _model_time.set(account)
        started = time.perf_counter()
        try:
            return await handle(message)
        finally:
            turns.append((time.perf_counter() - started, sum(account)))
            _model_time.reset(token)

    runtime.loop.handle = timed_handle  # type: ignore[method-assign]


# -- the parent: one child per configuration, then the table ----------------------------------


def child(args: argparse.Namespace, concurrency: int, messages: int, agents: int = 1) -> dict:
    import subprocess

    command = [
        sys.executable, __file__, "--child", "--sessions", str(args.sessions),
        "--messages", str(messages), "--latency", str(args.latency),
        "--concurrency", str(concurrency), *([] if args.direct else ["--litellm"]),
        "--agents", str(agents),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"run at concurrency {concurrency} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def show(result: dict) -> None:
    r = result
    print(
        (f"{r['agents']} agents, " if r.get("agents", 1) > 1 else "")
        + f"max_concurrent_turns={r['concurrency']}: {r['sessions']} sessions x {r['messages']} "
        f"messages = {r['turns']} turns in {r['elapsed_s']:.1f} s -> {r['throughput']:.1f} turns/s"
        + (f" (ceiling {r['concurrency'] / r['latency']:.0f}/s)" if r["latency"] else "")
    )
    print(
        f"  gateway overhead per turn (handle - model call): p50 {r['overhead_p50_ms']:.1f} ms, "
        f"p99 {r['overhead_p99_ms']:.1f} ms;  model call p50 {r['model_p50_ms']:.0f} ms, "
        f"p99 {r['model_p99_ms']:.0f} ms"
    )
    print(
        f"  publish -> reply (queueing included): p50 {r['latency_p50_s']:.1f} s, "
        f"p99 {r['latency_p99_s']:.1f} s"
    )
    print(
        f"  model-call layer ({r['path']}) CPU per call (stepped coroutine, thread_time): mean "
        f"{r['layer_cpu_mean_ms']:.2f} ms, p99 {r['layer_cpu_p99_ms']:.2f} ms over "
        f"{r['layer_calls']} sampled calls (1 in {LAYER_SAMPLE})"
    )
    rest = r["process_cpu_per_turn_ms"] - r["layer_cpu_per_turn_ms"]
    print(
        f"  process CPU {r['process_cpu_s']:.1f} s = {r['process_cpu_per_turn_ms']:.2f} ms/turn:"
        f" model-call layer {r['layer_cpu_per_turn_ms']:.2f}, the rest (ours, asyncio, the OS)"
        f" {rest:.2f}"
    )
    print(f"  peak RSS {r['peak_rss_mb']:.0f} MB;  peak open fds {r['peak_fds']}")
    print(
        f"  replies {r['replies']}, error replies {r['error_replies']}, lost {r['lost']}, "
        f"sessions out of order {r['sessions_out_of_order']}, "
        f"session files not exactly in order {r['session_files_wrong']}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[DEFAULT_CONCURRENCY, 64])
    parser.add_argument(
        "--default-messages",
        type=int,
        default=4,
        help="messages per session for the run at the default concurrency (time-bound)",
    )
    parser.add_argument(
        "--litellm", dest="direct", action="store_false", help="agent.direct_http off"
    )
    parser.add_argument(
        "--agents",
        type=int,
        nargs="+",
        default=[1],
        help="agents in the gateway, one run each (sessions spread over them)",
    )
    parser.add_argument(
        "--cluster",
        type=int,
        default=0,
        help="instead: 1..N cluster workers on PostgreSQL (bench/load_cluster.py)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if args.cluster:
        from bench.load_cluster import bench

        return asyncio.run(bench(args.cluster, args.messages))
    if args.serve:
        asyncio.run(serve_fake(args.latency))
        return 0
    if args.child:
        result = asyncio.run(
            run_one(
                args.sessions,
                args.messages,
                args.latency,
                args.concurrency[0],
                args.direct,
                args.agents[0],
            )
        )
        print(json.dumps(result))
        return 0
    started = time.monotonic()
    failed = False
    for concurrency in args.concurrency:
        messages = args.messages
        if concurrency == DEFAULT_CONCURRENCY and args.default_messages < messages:
            floor = args.sessions * args.messages * args.latency / concurrency
            print(
                f"(at the default max_concurrent_turns={concurrency}, {args.sessions} x "
                f"{args.messages} would take >= {floor:.0f} s by arithmetic alone; this run "
                f"uses {args.default_messages} messages per session)"
            )
            messages = args.default_messages
        for agents in args.agents:
            result = child(args, concurrency, messages, agents)
            show(result)
            failed |= bool(
                result["lost"] or result["sessions_out_of_order"]
                or result["session_files_wrong"] or result["error_replies"]
                or result["replies"] != result["turns"]
            )  # fmt: skip
    print(f"total {time.monotonic() - started:.0f} s; RESULT: {'FAIL' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Client CPU per chat completion: our model-call layer against a raw POST of the same body.

Paths, each sending the same JSON body (the history, the built-in tools' schemas,
temperature, max_tokens) to the same zero-latency OpenAI-compatible model:
  direct       clawgate's LLMClient.chat on its direct aiohttp path (the default for openai/)
  llmclient    clawgate's LLMClient.chat with agent.direct_http = false (litellm underneath)
  litellm      litellm.acompletion called directly, to show what our wrapper adds
  httpx        one httpx.AsyncClient POST, response parsed with json.loads
  aiohttp      one aiohttp.ClientSession POST, same: the floor the direct path is held to

The model is a minimal aiohttp server in a separate process on 127.0.0.1 that answers a
fixed completion without reading the messages, so its CPU is neither ours nor a latency.
CPU is process CPU (`time.process_time`, every thread: litellm's logging threads
included), divided by the calls made. Each measurement ends with a short idle wait inside
the window, so work a path defers to a background thread is counted against that path.
Paths and history sizes are interleaved; each cell is the median of --rounds rounds.

With --api anthropic (or gemini) the same is measured for an `anthropic/` (`gemini/`)
model: the model answers that provider's own API (Messages at /v1/messages, generateContent
at /v1beta/models/...), "direct" is clawgate's native path for it, "llmclient" and
"litellm" litellm's provider, and the raw POSTs send that API's body (the history converted
once, outside the timing: a raw client would hold it in that shape).

Run: python bench/model_call.py [--rounds 3] [--budget 0.4] [--sizes 10 1000 10000]
                                [--api openai|anthropic|gemini]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clawgate.agent.llm import LLMClient, ModelRequest, gemini
from clawgate.agent.llm.anthropic import API_VERSION, request_body
from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.tools import default_tools
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig, ToolsConfig

MODEL = "fake-model"
API_KEY = "sk-bench"
PATHS = ("direct", "llmclient", "litellm", "httpx", "aiohttp")
# Background work (a logging thread) gets this long to finish inside the window.
SETTLE = 0.05

_COMPLETION = {
    "id": "chatcmpl-bench",
    "object": "chat.completion",
    "created": 1_700_000_000,
    "model": MODEL,
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
}
_MESSAGE = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": MODEL,
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 1},
}
_GENERATED = {
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}
    ],
    "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 1, "totalTokenCount": 11},
}


# -- the model, in its own process ------------------------------------------------------------


async def serve() -> None:
    """Print the base URL, answer every completion at once, serve until stdin closes."""
    from aiohttp import web

    payload = json.dumps(_COMPLETION).encode()
    message = json.dumps(_MESSAGE).encode()
    generated = json.dumps(_GENERATED).encode()

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=payload, content_type="application/json")

    async def messages(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=message, content_type="application/json")

    async def generate(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=generated, content_type="application/json")

    app = web.Application(client_max_size=1024**3)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/messages", messages)
    app.router.add_post("/v1beta/models/{call}", generate)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.cleanup()


THIS_FILE = str(Path(__file__).resolve())


@contextlib.asynccontextmanager
async def model_server() -> AsyncIterator[str]:
    """`serve` in a process of its own (its CPU is not the bench's); yields its base URL."""
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        THIS_FILE,
        "--serve",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        yield (await server.stdout.readline()).decode().strip()
    finally:
        server.stdin.close()
        await server.wait()


# -- the workload -----------------------------------------------------------------------------


def history(size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a bench. " * 50}]
    for i in range(size - 1):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"message {i} " * 20})
    messages.append({"role": "user", "content": "and now?"})
    return messages


def tool_schemas() -> list[dict[str, Any]]:
    return ToolRegistry(default_tools()).schemas(Trust.OWNER, ToolsConfig())


Call = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Awaitable[Any]]


async def make_paths(url: str, api: str) -> tuple[dict[str, Call], Callable[[], Awaitable[None]]]:
    import aiohttp
    import httpx

    if api == "anthropic":
        url = url.removesuffix("/v1")  # litellm and the direct path append /v1/messages
    elif api == "gemini":
        url = url.removesuffix("/v1") + "/v1beta"
    config = AgentConfig(
        model=f"{api}/{MODEL}",
        api_base=url,
        api_key=API_KEY,
        max_retries=0,
        request_timeout=120,
        direct_http=False,
    )
    client = LLMClient(config)
    direct = LLMClient(config.model_copy(update={"direct_http": True}))
    litellm = import_litellm()  # the import is not what we measure
    headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
    endpoint = f"{url}/chat/completions"
    converted: dict[int, dict[str, Any]] = {}
    if api == "anthropic":
        headers = {"x-api-key": API_KEY, "anthropic-version": API_VERSION}
        headers["Content-Type"] = "application/json"
        endpoint = f"{url}/v1/messages"
    elif api == "gemini":
        headers = {"x-goog-api-key": API_KEY, "Content-Type": "application/json"}
        endpoint = f"{url}/models/{MODEL}:generateContent"
    hx = httpx.AsyncClient(timeout=120)
    aio = aiohttp.ClientSession()

    def body(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> bytes:
        if api != "openai":
            if id(messages) not in converted:
                request = ModelRequest(messages, config.temperature, config.max_tokens, tools)
                converted[id(messages)] = (
                    request_body(MODEL, request, stream=False)
                    if api == "anthropic"
                    else gemini.request_body(request)
                )
            return json.dumps(converted[id(messages)]).encode()
        return json.dumps(
            {
                "model": MODEL,
                "messages": messages,
                "temperature": config.temperature,
                "max_tokens": config.max_tokens,
                "tools": tools,
            }
        ).encode()

    async def via_direct(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return await direct.chat(messages, tools=tools)

    async def via_llmclient(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return await client.chat(messages, tools=tools)

    async def via_litellm(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return await litellm.acompletion(
            model=config.model,
            messages=messages,
            tools=tools,
            api_base=url,
            api_key=API_KEY,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            timeout=config.request_timeout,
            num_retries=0,
            max_retries=0,
        )

    async def via_httpx(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        response = await hx.post(endpoint, content=body(messages, tools), headers=headers)
        response.raise_for_status()
        return json.loads(response.content)

    async def via_aiohttp(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        async with aio.post(endpoint, data=body(messages, tools), headers=headers) as response:
            response.raise_for_status()
            return json.loads(await response.read())

    async def close() -> None:
        await hx.aclose()
        await aio.close()
        await direct.aclose()

    paths = {
        "direct": via_direct,
        "llmclient": via_llmclient,
        "litellm": via_litellm,
        "httpx": via_httpx,
        "aiohttp": via_aiohttp,
    }
    return paths, close


async def cpu_per_call(call: Call, messages: list[dict[str, Any]], tools: Any, n: int) -> float:
    started = time.process_time()
    for _ in range(n):
        await call(messages, tools)
    await asyncio.sleep(SETTLE)  # sleeping costs no CPU; deferred work lands in the window
    return (time.process_time() - started) / n


async def run(
    url: str, sizes: list[int], rounds: int, budget: float, paths: list[str], api: str
) -> None:
    calls, close = await make_paths(url, api)
    tools = tool_schemas()
    workloads = {size: history(size) for size in sizes}
    try:
        # Warm every path and size once, and size each batch to about `budget` s of CPU.
        counts: dict[tuple[str, int], int] = {}
        for size in sizes:
            for name in paths:
                await calls[name](workloads[size], tools)
                probe = await cpu_per_call(calls[name], workloads[size], tools, 2)
                counts[name, size] = max(2, min(200, int(budget / max(probe, 1e-5))))
        results: dict[tuple[str, int], list[float]] = {key: [] for key in counts}
        for _ in range(rounds):
            for size in sizes:
                for name in paths:
                    cost = await cpu_per_call(
                        calls[name], workloads[size], tools, counts[name, size]
                    )
                    results[name, size].append(cost)
    finally:
        await close()

    print(f"{api}: client CPU per chat completion, ms (median of {rounds} interleaved rounds)")
    floors = [name for name in ("httpx", "aiohttp") if name in paths]
    print(
        f"{'messages':>9} "
        + " ".join(f"{name:>10}" for name in paths)
        + "".join(f"   vs {floor}" for floor in floors)
    )
    for size in sizes:
        medians = {name: statistics.median(results[name, size]) * 1000 for name in paths}
        ratios = [
            "  ".join(
                f"{name} {medians[name] / medians[floor]:.1f}x"
                for name in paths
                if name not in ("httpx", "aiohttp")
            )
            for floor in floors
        ]
        print(
            f"{size:>9} "
            + " ".join(f"{medians[n]:>10.2f}" for n in paths)
            + "".join(f"   {r}" for r in ratios)
        )


async def main_async(args: argparse.Namespace) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    async with model_server() as url:
        await run(url, args.sizes, args.rounds, args.budget, args.paths, args.api)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=0.4, help="CPU seconds per batch")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--api", choices=("openai", "anthropic", "gemini"), default="openai")
    args = parser.parse_args()
    asyncio.run(serve() if args.serve else main_async(args))


if __name__ == "__main__":
    main()

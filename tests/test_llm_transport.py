"""The direct path's HTTP conduct where aiohttp and httpx could differ: a server that closes
each connection after answering without saying so, and the proxy named by the environment.

A raw loopback server stands in for the model (and for the proxy), since FakeLLM's aiohttp
server always keeps its connections open.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from clawgate.agent.llm import LLMClient
from clawgate.kernel.config import AgentConfig

_COMPLETION = json.dumps(
    {
        "id": "chatcmpl-raw",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()


class RawServer:
    """Answers every POST with one fixed completion; records each request line and each
    connection; with `close_after`, closes the connection after each answer, though the
    answer did not say `Connection: close`."""

    def __init__(self, close_after: bool) -> None:
        self.close_after = close_after
        self.request_lines: list[str] = []
        self.connections = 0
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.decode("latin-1").split("\r\n")
                self.request_lines.append(lines[0])
                length = next(
                    int(line.split(":", 1)[1])
                    for line in lines
                    if line.lower().startswith("content-length:")
                )
                await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(_COMPLETION)}\r\n\r\n".encode()
                    + _COMPLETION
                )
                await writer.drain()
                if self.close_after:
                    break
        except asyncio.IncompleteReadError:
            pass  # the client closed the connection
        finally:
            writer.close()


@asynccontextmanager
async def raw_server(close_after: bool = False) -> AsyncIterator[RawServer]:
    server = RawServer(close_after)
    listening = await asyncio.start_server(server._serve, "127.0.0.1", 0)
    server.port = listening.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listening.close()


def config(api_base: str) -> AgentConfig:
    return AgentConfig(
        model="openai/fake-model",
        api_base=api_base,
        api_key="sk-test-secret",
        request_timeout=5.0,
        max_retries=2,
    )


async def no_sleep(_: float) -> None:
    raise AssertionError("no call should need a retry")


async def test_a_server_closing_each_connection_after_answering_costs_no_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with raw_server(close_after=True) as server:
        client = LLMClient(config(f"http://127.0.0.1:{server.port}/v1"), sleep=no_sleep)
        try:
            for _ in range(5):
                response = await client.chat([{"role": "user", "content": "hi"}])
                assert response.content == "ok"
        finally:
            await client.aclose()
    assert len(server.request_lines) == 5
    assert server.connections == 5
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_the_environment_proxy_carries_the_call_unless_no_proxy_names_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    async with raw_server() as proxy, raw_server() as model:
        api_base = f"http://127.0.0.1:{model.port}/v1"
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        client = LLMClient(config(api_base), sleep=no_sleep)
        try:
            assert (await client.chat([{"role": "user", "content": "hi"}])).content == "ok"
        finally:
            await client.aclose()
        # A proxy is asked for the absolute URL; the model itself was not reached.
        assert proxy.request_lines == [f"POST {api_base}/chat/completions HTTP/1.1"]
        assert model.request_lines == []

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        client = LLMClient(config(api_base), sleep=no_sleep)
        try:
            assert (await client.chat([{"role": "user", "content": "hi"}])).content == "ok"
        finally:
            await client.aclose()
        assert len(proxy.request_lines) == 1
        assert model.request_lines == ["POST /v1/chat/completions HTTP/1.1"]

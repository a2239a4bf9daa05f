"""`clawgate doctor --online`: one tiny request to the model and one identity call to each
enabled chat platform, side by side, each bounded by a timeout. A failure is a `problem`
finding with its reason, scrubbed of every configured secret."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from clawgate.gateway.ops.doctor import Finding, Report, diagnose, note, ok, problem
from clawgate.kernel.config import Config
from clawgate.kernel.config_sections import McpServerConfig
from clawgate.kernel.errors import ChannelError, ModelUnavailable, one_line
from clawgate.kernel.secrets import Redactor

ONLINE_TIMEOUT = 20.0


async def online_checks(config: Config, *, timeout: float = ONLINE_TIMEOUT) -> list[Finding]:
    """One model request, one identity call per enabled channel and one start of each MCP
    server, side by side."""
    checks: list[tuple[str, Coroutine[Any, Any, tuple[bool, str]]]] = []
    if config.agent.model:
        await load_model_libraries(config)
        checks.append(("model", ping_model(config, timeout)))
    telegram, discord = config.channels.telegram, config.channels.discord
    if telegram.enabled and telegram.token is not None and telegram.token.get_secret_value():
        checks.append(("telegram", ping_telegram(config, timeout)))
    if discord.enabled and discord.token is not None and discord.token.get_secret_value():
        checks.append(("discord", ping_discord(config, timeout)))
    for server in config.mcp.servers:
        if server.enabled:
            checks.append((f"mcp server {server.name}", _probe_mcp(server)))
    results = await asyncio.gather(*(_guarded(coro, timeout) for _, coro in checks))
    # Network errors may quote a request URL, and Telegram's carry the token in theirs.
    redact = Redactor(config.secrets())
    findings = []
    for (name, _), (passed, detail) in zip(checks, results, strict=True):
        detail = redact(detail)
        findings.append(ok(f"{name}: {detail}") if passed else problem(f"{name}: {detail}"))
    return findings


async def _probe_mcp(server: McpServerConfig) -> tuple[bool, str]:
    from clawgate.agent.tools.mcp_hub import probe

    status = await probe(server)
    if status.state == "running":
        return True, f"answers, tools {', '.join(status.tools) or 'none'}"
    return False, f"failed: {status.error}"


async def doctor_report(
    config_path: Path, *, online: bool, fix_modes: bool = False, agent: str | None = None
) -> Report:
    """Everything `clawgate doctor` checks for `agent` (None: the default one): the offline
    checks (in a thread: they walk the workspace), then with `online` the model and
    platform pings."""
    config, findings = await asyncio.to_thread(
        diagnose, config_path, fix_modes=fix_modes, agent=agent
    )
    if online:
        if config is None:
            findings.append(note("online checks skipped: the config does not load"))
        else:
            findings += await online_checks(config)
    return Report(tuple(findings))


async def _guarded(
    check: Coroutine[Any, Any, tuple[bool, str]], timeout: float
) -> tuple[bool, str]:
    try:
        async with asyncio.timeout(timeout + 5):
            return await check
    except TimeoutError:
        return False, f"failed: no answer within {timeout:g} s"
    except Exception as exc:
        return False, f"failed: {one_line(exc)}"


async def load_model_libraries(config: Config) -> None:
    """Import what a call to the configured model needs (litellm: seconds, more on a busy
    machine) before a check's timeout starts: that measures the provider alone."""
    from clawgate.agent.llm import LLMClient

    client = LLMClient(config.agent)
    try:
        await client.warm_up()
    finally:
        await client.aclose()


async def ping_model(config: Config, timeout: float) -> tuple[bool, str]:
    from clawgate.agent.llm import LLMClient
    from clawgate.agent.spend.ledger import Ledger
    from clawgate.agent.spend.scope import tagged

    # The configured model alone, once: a fallback answering would hide its failure.
    agent = config.agent.model_copy(
        update={
            "fallback_models": [],
            "max_retries": 0,
            "request_timeout": min(config.agent.request_timeout, timeout),
        }
    )
    client = LLMClient(agent, ledger=Ledger.for_config(config))
    try:
        with tagged("check"):
            response = await client.chat(
                [{"role": "user", "content": "Reply with: ok"}], max_tokens=5
            )
    except ModelUnavailable as exc:
        return False, f"failed: {one_line(exc)}"
    finally:
        await client.aclose()
    return True, f"{response.model} answered"


async def ping_telegram(config: Config, timeout: float) -> tuple[bool, str]:
    import clawgate.channels.telegram.library  # noqa: F401  (before `telegram`)
    from clawgate.channels.telegram.http import bot_request

    # isort: split
    from telegram import Bot
    from telegram.error import InvalidToken, NetworkError, TelegramError

    settings = config.channels.telegram
    assert settings.token is not None

    options = {"connect_timeout": timeout, "read_timeout": timeout, "proxy": settings.proxy}
    bot = Bot(
        settings.token.get_secret_value(),
        base_url=settings.base_url,
        base_file_url=settings.base_file_url,
        request=bot_request(**options),
        get_updates_request=bot_request(**options),
    )
    try:
        await bot.initialize()  # calls getMe
        me = bot.bot
    except InvalidToken as exc:
        answer = exc.__cause__ if isinstance(exc.__cause__, InvalidToken) else exc
        if "not found" in answer.message.lower():  # 404: not what a wrong token gets
            return False, (
                f"failed: {settings.base_url} answered Not Found: the token is malformed "
                "or base_url is not the Bot API"
            )
        return False, "failed: the token was rejected (Unauthorized)"
    except NetworkError as exc:  # DNS, refused, timeouts: the token was never judged
        return False, (
            f"failed: could not reach {settings.base_url} ({one_line(exc)}); "
            "the token was not checked"
        )
    except TelegramError as exc:
        return False, f"failed: {one_line(exc)}"
    finally:
        await bot.shutdown()
    return True, f"getMe ok: @{me.username} (id {me.id})"


async def ping_discord(config: Config, timeout: float) -> tuple[bool, str]:
    import aiohttp

    settings = config.channels.discord
    assert settings.token is not None
    url = f"{settings.api_base.rstrip('/')}/users/@me"
    headers = {"Authorization": f"Bot {settings.token.get_secret_value()}"}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(url, headers=headers, proxy=settings.proxy) as response,
        ):
            if response.status == 401:
                return False, "failed: the token was rejected (HTTP 401)"
            if response.status != 200:
                text = (await response.text())[:200]
                # `_guarded` reports it like any other failure.
                raise ChannelError(f"HTTP {response.status}: {text}")
            me = await response.json()
    except (aiohttp.ClientError, OSError) as exc:
        return False, f"failed: could not reach {url}: {one_line(exc)}"
    return True, f"/users/@me ok: {me.get('username', '?')} (id {me.get('id', '?')})"

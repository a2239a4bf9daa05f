"""A gateway whose only channel is Telegram, pointed at FakeTelegram: the owner, the allowed
group, and the config the Telegram, media, abuse and fault tests share."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from clawgate.agent.runtime import AgentRuntime
from clawgate.channels.telegram import TelegramChannel, create_channel
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.daemon.ratelimit import RateLimiter
from clawgate.kernel.bus import MessageBus
from clawgate.kernel.config import AgentConfig, ChannelsConfig, Config, TelegramConfig
from tests.fakes.telegram import BOT_USERNAME, TOKEN, FakeTelegram
from tests.harness import make_config

OWNER = 1001
GROUP = -100500
MENTION = f"@{BOT_USERNAME}"


class Sleeps:
    """Backoff without waiting: records each requested delay, yields briefly. `clock` is the
    virtual time those delays add up to (a channel given it throttles on virtual time)."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.now = 0.0

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.now += seconds
        await asyncio.sleep(0.01)

    def clock(self) -> float:
        return self.now


def telegram_config(fake: FakeTelegram, **overrides: Any) -> TelegramConfig:
    values: dict[str, Any] = {
        "enabled": True,
        "token": TOKEN,
        "base_url": fake.base_url,
        "base_file_url": fake.base_file_url,
        "poll_timeout": 1,
        "allow_from": [str(OWNER)],
        "group_allow": [str(GROUP)],
        # Replies sent whole, as before streaming: the tests that stream say so.
        "streaming": "off",
        "reactions": False,
    }
    values.update(overrides)
    return TelegramConfig(**values)


def telegram_gateway_config(
    tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram
) -> Config:
    channels = ChannelsConfig(telegram=telegram_config(telegram))
    return make_config(tmp_path, agent_config, channels=channels)


class TelegramGateway:
    """A gateway whose only channel is Telegram, as the daemon builds it."""

    def __init__(
        self, config: Config, *, rate_limiter: RateLimiter | None = None, **options: Any
    ) -> None:
        """`rate_limiter`: the dispatcher's (e.g. on a clock the test moves); `options` go to
        the channel."""
        self.config = config
        self.sleeps = Sleeps()
        if options.pop("virtual_time", False):
            options["clock"] = self.sleeps.clock
        self.bus = MessageBus()
        self.channel: TelegramChannel = create_channel(
            config.channels.telegram, self.bus, config, sleep=self.sleeps, **options
        )
        runtime = AgentRuntime.build(config, outbox=self.bus.publish_outbound)
        self.gateway = Gateway(
            [(runtime, self.bus)], [self.channel], self.bus, rate_limiter=rate_limiter
        )

    async def __aenter__(self) -> TelegramGateway:
        await self.gateway.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop(grace=2)

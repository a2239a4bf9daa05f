"""Ledger records of past days, written through the real `Ledger` with a clock set to each
day: what a dashboard or `clawgate usage` test reads when it needs more than today."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.spend.prices import PriceBook
from clawgate.agent.spend.scope import CallTag, Purpose
from clawgate.kernel.bus import Trust
from clawgate.kernel.clock import Clock
from clawgate.kernel.config_sections import ModelPrice

PRICED = "openai/priced-model"
PRICES = {PRICED: ModelPrice(input_per_mtok=2.5, output_per_mtok=10)}


async def past_calls(
    data_dir: Path, days: int, *, agent: str = "main", model: str = PRICED
) -> None:
    """A few calls a day for `days` days before today: chats in two chats, a heartbeat, a
    consolidation, growing over the days so the bars differ."""
    today = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    calls: list[tuple[Purpose, str | None, Trust]] = [
        ("chat", "telegram:1001", Trust.OWNER),
        ("chat", "telegram:-100200", Trust.GROUP),
        ("heartbeat", "heartbeat:main", Trust.OWNER),
        ("consolidation", "telegram:1001", Trust.OWNER),
    ]
    for back in range(days, 0, -1):
        moment = (today - timedelta(days=back)).timestamp()
        ledger = Ledger(
            data_dir, agent=agent, prices=PriceBook(PRICES), clock=Clock(wall=lambda m=moment: m)
        )
        for index, (purpose, key, trust) in enumerate(calls):
            size = 1000 * (days - back + 1) * (index + 1)
            tag = CallTag(purpose=purpose, session_key=key, trust=trust)
            await ledger.record(
                tag, model, {"prompt_tokens": size, "completion_tokens": size // 10}
            )

"""One line of the ledger, `<data_dir>/usage/YYYY-MM.jsonl`: a model call and what it cost.

`cost_usd` is None and `price_unknown` true when no price is known for the model: an
unknown price is never written as 0, which would read as free and stop no budget."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from clawgate.agent.spend.scope import Purpose


class UsageRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    time: datetime
    agent: str
    session_key: str | None
    trust: str | None
    purpose: Purpose
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cost_usd: float | None
    price_unknown: bool = False

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

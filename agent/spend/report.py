"""The ledger's records summed by one key, and the text /usage and `clawgate usage` print.

A record without a price adds its tokens to the row's unknown part, never a cost: a row
reads "$0.0123", "unknown (1,240 tokens)", or both joined with "+"."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, date, tzinfo
from typing import Any, Literal

from clawgate.agent.spend.records import UsageRecord

GroupBy = Literal["chat", "model", "purpose", "day", "agent"]
KEYS: dict[str, Callable[[UsageRecord], str]] = {
    "chat": lambda r: r.session_key or "(none)",
    "model": lambda r: r.model,
    "purpose": lambda r: r.purpose,
    "agent": lambda r: r.agent,
}


@dataclass
class Row:
    name: str
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # of the calls with a price
    unknown_tokens: int = 0  # tokens of the calls without one
    unknown_calls: int = 0

    def add(self, record: UsageRecord) -> None:
        self.calls += 1
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        if record.cost_usd is None:
            self.unknown_calls += 1
            self.unknown_tokens += record.tokens
        else:
            self.cost_usd += record.cost_usd

    @property
    def cost(self) -> str:
        """What the row cost, an unknown part shown as "unknown" with its tokens."""
        known = f"${self.cost_usd:.4f}"
        unknown = f"unknown ({self.unknown_tokens:,} tokens)"
        if not self.unknown_calls:
            return known
        if self.unknown_calls == self.calls:
            return unknown
        return f"{known} + {unknown}"

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cost_usd"] = round(self.cost_usd, 6) if self.unknown_calls < self.calls else None
        data["price_unknown"] = self.unknown_calls > 0
        return data


def summarise(
    records: Iterable[UsageRecord], by: GroupBy, zone: tzinfo = UTC
) -> tuple[list[Row], Row]:
    """Rows by `by` (days in `zone`, in order; the rest by cost, then tokens) and their total."""
    rows: dict[str, Row] = {}
    total = Row("total")
    for record in records:
        if by == "day":
            name = record.time.astimezone(zone).date().isoformat()
        else:
            name = KEYS[by](record)
        rows.setdefault(name, Row(name)).add(record)
        total.add(record)
    if by == "day":
        ordered = sorted(rows.values(), key=lambda row: row.name)
    else:
        ordered = sorted(rows.values(), key=lambda r: (-r.cost_usd, -r.unknown_tokens, r.name))
    return ordered, total


def table(rows: list[Row], total: Row, by: str) -> list[str]:
    """Aligned lines: one per row, then the total."""
    width = max([len(by), len("total"), *(len(row.name) for row in rows)])
    lines = [f"  {by:<{width}}  {'calls':>6}  {'input':>10}  {'output':>9}  cost"]
    for row in [*rows, total]:
        lines.append(
            f"  {row.name:<{width}}  {row.calls:>6}  {row.input_tokens:>10,}"
            f"  {row.output_tokens:>9,}  {row.cost}"
        )
    return lines


def chat_summary(records: list[UsageRecord], today: date, zone: tzinfo, top: int = 5) -> str:
    """The owner's /usage: today, this month, this month by purpose and by chat."""
    month = [
        r for r in records if r.time.astimezone(zone).strftime("%Y-%m") == today.strftime("%Y-%m")
    ]
    day = [r for r in month if r.time.astimezone(zone).date() == today]
    _, day_total = summarise(day, "purpose")
    purposes, month_total = summarise(month, "purpose")
    chats, _ = summarise(month, "chat")
    lines = [
        f"Today ({today}): {day_total.cost}, {day_total.calls} calls",
        f"This month ({today:%Y-%m}): {month_total.cost}, {month_total.calls} calls",
    ]
    if purposes:
        lines.append("By purpose this month:")
        lines += [f"  {row.name}: {row.cost}, {row.calls} calls" for row in purposes]
    if chats:
        lines.append("By chat this month:")
        lines += [f"  {row.name}: {row.cost}, {row.calls} calls" for row in chats[:top]]
    return "\n".join(lines)

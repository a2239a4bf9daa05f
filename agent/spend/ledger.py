"""The ledger: one `UsageRecord` per model call, appended to `<data_dir>/usage/YYYY-MM.jsonl`
(the month in the agent's time zone) through the one complete-or-raise append
(kernel/storage.py), so a crash leaves whole lines and at most a torn last one, which
readers skip.

The gateway is the only writer of a data_dir (gateway/daemon/lock.py), so the running
totals the budget asks about are read from disk once (this month's file) and kept up to
date in memory from then on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from clawgate.agent.spend.prices import PriceBook
from clawgate.agent.spend.records import UsageRecord
from clawgate.agent.spend.scope import CallTag
from clawgate.kernel.clock import SYSTEM_CLOCK, Clock
from clawgate.kernel.config import Config
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)


def usage_folder(data_dir: Path) -> Path:
    return data_dir / "usage"


@dataclass
class Sums:
    usd: float = 0.0  # calls with a known price
    tokens: int = 0  # every call
    unpriced_tokens: int = 0  # calls without a price
    calls: int = 0
    unpriced_calls: int = 0


class Totals:
    """This process's view of the spend, summed by the keys budgets and /status ask about."""

    def __init__(self) -> None:
        self._sums: dict[tuple[str, ...], Sums] = defaultdict(Sums)

    def add(self, record: UsageRecord, day: date) -> None:
        keys: list[tuple[str, ...]] = [("day", day.isoformat()), ("month", day.strftime("%Y-%m"))]
        keys.append(("purpose", day.isoformat(), record.purpose))
        if record.session_key:
            keys.append(("chat", day.isoformat(), record.session_key))
        for key in keys:
            sums = self._sums[key]
            sums.calls += 1
            sums.tokens += record.tokens
            if record.cost_usd is None:
                sums.unpriced_calls += 1
                sums.unpriced_tokens += record.tokens
            else:
                sums.usd += record.cost_usd

    def day(self, day: date) -> Sums:
        return self._sums.get(("day", day.isoformat()), Sums())

    def month(self, day: date) -> Sums:
        return self._sums.get(("month", day.strftime("%Y-%m")), Sums())

    def chat(self, day: date, session_key: str) -> Sums:
        return self._sums.get(("chat", day.isoformat(), session_key), Sums())

    def purpose(self, day: date, purpose: str) -> Sums:
        return self._sums.get(("purpose", day.isoformat(), purpose), Sums())


def read_records(folder: Path, since: date | None = None) -> list[UsageRecord]:
    """Every record in the monthly files from `since`'s month on (all without it), oldest
    first; a line that does not parse (a torn last line) is skipped with a warning."""
    found: list[UsageRecord] = []
    if not folder.is_dir():
        return found
    first = since.strftime("%Y-%m") if since is not None else ""
    for path in sorted(folder.glob("????-??.jsonl")):
        if path.stem < first:
            continue
        with path.open("rb") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    found.append(UsageRecord.model_validate_json(line))
                except ValidationError:
                    log.warning("%s: line %d is not a usage record; skipped", path, number)
    return found


class Ledger:
    """One agent's ledger."""

    def __init__(
        self,
        data_dir: Path,
        *,
        agent: str,
        prices: PriceBook,
        timezone: str = "UTC",
        writer: DiskWriter | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.folder = usage_folder(data_dir)
        self.agent = agent
        self.prices = prices
        self.zone: tzinfo = ZoneInfo(timezone)
        self.clock = clock
        self._writer = writer or DiskWriter()
        self._totals: Totals | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def for_config(
        cls, config: Config, *, writer: DiskWriter | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> Ledger:
        """The ledger of the agent `config` is for (its data_dir, name, prices, time zone):
        the runtime's, and the CLI's for the calls it makes itself (`doctor --online`,
        `memory search` with a provider's embedder). Appends from two processes are safe."""
        return cls(
            config.data_dir,
            agent=config.agent_name,
            prices=PriceBook(config.agent.prices),
            timezone=config.agent.timezone,
            writer=writer,
            clock=clock,
        )

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.wall(), UTC)

    def today(self) -> date:
        return self.day_of(self.now())

    def day_of(self, moment: datetime) -> date:
        return moment.astimezone(self.zone).date()

    async def totals(self) -> Totals:
        """The running totals, this month's file read the first time."""
        async with self._lock:
            if self._totals is None:
                records = await asyncio.to_thread(read_records, self.folder, self.today())
                totals = Totals()
                for record in records:
                    totals.add(record, self.day_of(record.time))
                self._totals = totals
            return self._totals

    async def record(self, tag: CallTag, model: str, usage: Mapping[str, int]) -> UsageRecord:
        """Price one call and append its record. Raises OSError when the disk refuses it."""
        await self.prices.load(model)
        price = self.prices.price(model)
        input_tokens = int(usage.get("prompt_tokens", 0))
        output_tokens = int(usage.get("completion_tokens", 0))
        cached = int(usage.get("cached_tokens", 0))
        record = UsageRecord(
            time=self.now(),
            agent=self.agent,
            session_key=tag.session_key,
            trust=tag.trust.value if tag.trust is not None else None,
            purpose=tag.purpose,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            cost_usd=None if price is None else price.cost(input_tokens, output_tokens, cached),
            price_unknown=price is None,
        )
        totals = await self.totals()
        day = self.day_of(record.time)
        # Counted first: a call the disk cannot record was still paid for.
        totals.add(record, day)
        self._writer.mkdir(self.folder)
        path = self.folder / f"{day.strftime('%Y-%m')}.jsonl"
        self._writer.append(path, record.model_dump_json() + "\n")
        return record

    def read(self, since: date | None = None) -> list[UsageRecord]:
        return read_records(self.folder, since)


def all_records(folders: Iterable[Path], since: date | None = None) -> list[UsageRecord]:
    """The records of several agents' ledgers, in time order."""
    found = [record for folder in folders for record in read_records(folder, since)]
    return sorted(found, key=lambda record: record.time)

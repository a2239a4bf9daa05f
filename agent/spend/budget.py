"""Spend caps: checked before each model call, a warning at 80 %, each notice sent once.

Caps (`[budget]`, per agent): `daily_usd` and `monthly_usd` stop the agent's calls,
`per_chat_daily_usd` stops one group or `allowed` chat's. While the model about to be
called has no known price, `daily_tokens` caps the day's tokens instead (an unknown price
never counts as free). With `owner_exempt` the owner's own chats (and their memory work)
go on; heartbeat and cron runs never do: they are what spends money unwatched.

A cap stops calls until its period rolls over (the day or month in the agent's time zone,
by the injectable clock). The chat that hit it gets one notice, the owner one
(`heartbeat.deliver_to`); the owner also gets one warning when a cap is 80 % used. Which
notices went out is kept in `<data_dir>/usage/notices.json`, so a restart repeats none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.spend.scope import SCHEDULED, CallTag
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import BudgetConfig
from clawgate.kernel.errors import OverBudget
from clawgate.kernel.json_document import JsonDocument
from clawgate.kernel.storage import DiskWriter

log = logging.getLogger(__name__)

OwnerNotice = Callable[[str], Awaitable[None]]
WARN_AT = 0.8
KEEP_NOTICES_DAYS = 40


class Notices(BaseModel):
    """Notice keys already sent, with when (old ones are dropped)."""

    sent: dict[str, datetime] = Field(default_factory=dict)


def _usd(value: float) -> str:
    return f"${value:.2f}"


@dataclass(frozen=True)
class Cap:
    """One of the agent's caps as it stands now."""

    name: str  # the config key under budget.
    period: str  # the day or month it counts
    used: float
    limit: float
    until: str  # when it rolls over, in words

    @property
    def key(self) -> str:
        return f"{self.name}:{self.period}"

    def _shown(self, value: float) -> str:
        return _tokens(value) if self.name == "daily_tokens" else _usd(value)

    def reached(self, owner_exempt: bool) -> str:
        exempt = " (your own chats go on)" if owner_exempt else ""
        return (
            f"[budget] budget.{self.name} reached ({self._shown(self.used)} of "
            f"{self._shown(self.limit)} for {self.period}): model calls stop until "
            f"{self.until}{exempt}."
        )

    def warning(self) -> str:
        share = int(100 * self.used / self.limit) if self.limit else 100
        return (
            f"[budget] {share} % of budget.{self.name} used ({self._shown(self.used)} of "
            f"{self._shown(self.limit)} for {self.period})."
        )


class Budget:
    """One agent's caps over its ledger."""

    def __init__(
        self,
        config: BudgetConfig,
        ledger: Ledger,
        *,
        notify_owner: OwnerNotice | None = None,
        writer: DiskWriter | None = None,
    ) -> None:
        self.config = config
        self.ledger = ledger
        self._notify_owner = notify_owner
        self._notices = JsonDocument.of_model(
            ledger.folder / "notices.json", Notices, writer=writer
        )

    @property
    def active(self) -> bool:
        c = self.config
        caps = (c.daily_usd, c.monthly_usd, c.per_chat_daily_usd, c.daily_tokens)
        return any(cap is not None for cap in caps)

    def exempt(self, tag: CallTag) -> bool:
        return (
            self.config.owner_exempt and tag.trust is Trust.OWNER and tag.purpose not in SCHEDULED
        )

    async def check(self, tag: CallTag, model: str) -> None:
        """Raise OverBudget when a cap stops this call (and tell the owner, once)."""
        if not self.active or self.exempt(tag):
            return
        hit = await self._hit(tag, model)
        if hit is None:
            return
        key, owner_text = hit
        await self._once(f"owner:{key}", owner_text, self._notify_owner)
        raise OverBudget(owner_text, key)

    async def chat_notice(self, refused: OverBudget) -> str | None:
        """The line for the chat whose call was refused, the first time only; None after."""
        text = _chat_text(refused.key)
        return text if await self._once(f"chat:{refused.key}", text, None) else None

    async def after_call(self, model: str) -> None:
        """Tell the owner once when a cap of the agent is 80 % used, and once when it is
        reached (also by calls it does not stop: the owner's own, with `owner_exempt`)."""
        if not self.active:
            return
        for cap in await self._agent_caps(model):
            if cap.used >= cap.limit:
                await self._once(
                    f"owner:{cap.key}", cap.reached(self.config.owner_exempt), self._notify_owner
                )
            elif cap.used >= WARN_AT * cap.limit:
                await self._once(f"warn:{cap.key}", cap.warning(), self._notify_owner)

    async def _agent_caps(self, model: str) -> list[Cap]:
        """The agent's caps that apply to a call of `model`: USD when it has a price, else
        the day's tokens."""
        today = self.ledger.today()
        totals = await self.ledger.totals()
        await self.ledger.prices.load(model)
        day, month = totals.day(today), totals.month(today)
        c = self.config
        wanted: list[tuple[str, str, float, float | None, str]]
        if self.ledger.prices.price(model) is None:
            wanted = [("daily_tokens", today.isoformat(), day.tokens, c.daily_tokens, "tomorrow")]
        else:
            wanted = [
                ("daily_usd", today.isoformat(), day.usd, c.daily_usd, "tomorrow"),
                ("monthly_usd", f"{today:%Y-%m}", month.usd, c.monthly_usd, "next month"),
            ]
        return [Cap(n, p, used, cap, u) for n, p, used, cap, u in wanted if cap is not None]

    async def _hit(self, tag: CallTag, model: str) -> tuple[str, str] | None:
        """(notice key, the owner's line) of the first cap this call would exceed."""
        c = self.config
        key = tag.session_key
        if key and tag.trust is not Trust.OWNER and c.per_chat_daily_usd is not None:
            today = self.ledger.today()
            spent = (await self.ledger.totals()).chat(today, key)
            await self.ledger.prices.load(model)
            priced = self.ledger.prices.price(model) is not None
            if priced and spent.usd >= c.per_chat_daily_usd:
                return (
                    f"per_chat_daily_usd:{today}:{key}",
                    f"[budget] {key} reached budget.per_chat_daily_usd "
                    f"({_usd(spent.usd)} of {_usd(c.per_chat_daily_usd)} today): no model "
                    "calls for that chat until tomorrow.",
                )
        for cap in await self._agent_caps(model):
            if cap.used >= cap.limit:
                return cap.key, cap.reached(c.owner_exempt)
        return None

    async def _once(self, key: str, text: str, send: OwnerNotice | None) -> bool:
        """Record `key` as sent; True (and `send(text)`) only the first time."""
        now = self.ledger.now()

        def claim(notices: Notices) -> bool:
            cutoff = now - timedelta(days=KEEP_NOTICES_DAYS)
            for old in [k for k, when in notices.sent.items() if when < cutoff]:
                del notices.sent[old]
            if key in notices.sent:
                return False
            notices.sent[key] = now
            return True

        try:
            first = await asyncio.to_thread(self._notices.update, claim, repair=True)
        except OSError as exc:
            log.error("budget: cannot record notice %s: %s", key, exc)
            first = False  # rather one notice too few than one per message
        if first and send is not None:
            try:
                await send(text)
            except Exception:
                log.exception("budget: cannot send the owner %r", text)
        elif first and send is None and key.startswith(("owner:", "warn:")):
            log.warning("%s (set heartbeat.deliver_to to receive this in chat)", text)
        return first


def _tokens(value: float) -> str:
    return f"{int(value):,} tokens"


def _chat_text(key: str) -> str:
    name = key.partition(":")[0]
    if name == "per_chat_daily_usd":
        return "This chat has used its model budget for today. I'll answer again tomorrow."
    if name == "monthly_usd":
        return (
            "The assistant's model budget for this month is used up. It answers again next month."
        )
    return "The assistant's model budget for today is used up. It answers again tomorrow."

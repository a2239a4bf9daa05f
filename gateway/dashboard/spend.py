"""The spend page: what every agent's model calls cost per day over the last 30 days (a
stacked bar per day by agent and purpose, spend_chart.py) and the chats that cost most this
month, read from the ledgers (agent/spend/ledger.py). USD when any call in the window has a
price, else tokens (`?unit=tokens` asks for tokens either way): an unknown price is never
drawn as zero; the table shows it as "unknown" with its tokens."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from datetime import date, datetime
from zoneinfo import ZoneInfo

from aiohttp import web

from clawgate.agent.spend.ledger import all_records, usage_folder
from clawgate.agent.spend.records import UsageRecord
from clawgate.agent.spend.report import summarise
from clawgate.gateway.dashboard.render import render, services
from clawgate.gateway.dashboard.spend_chart import last_days, series_of, stacked_bars

DAYS = 30
TOP_CHATS = 10


async def spend_page(request: web.Request) -> web.Response:
    config = services(request).config.root
    zone = ZoneInfo(config.agent.timezone)
    today = datetime.now(zone).date()
    days = last_days(today, DAYS)
    folders = [usage_folder(config.for_agent(n).data_dir) for n in config.agent_names()]
    records = await asyncio.to_thread(all_records, folders, days[0])
    recent = [r for r in records if r.time.astimezone(zone).date() >= days[0]]
    priced = any(r.cost_usd is not None for r in recent)
    unit = "tokens" if request.query.get("unit") == "tokens" or not priced else "USD"
    values: dict[tuple[date, str], float] = defaultdict(float)
    for record in recent:
        amount = record.tokens if unit == "tokens" else record.cost_usd or 0.0
        values[(record.time.astimezone(zone).date(), _series(record))] += amount
    series = series_of(sorted({_series(r) for r in recent}))
    month = [r for r in recent if r.time.astimezone(zone).strftime("%Y-%m") == f"{today:%Y-%m}"]
    chats, month_total = summarise(month, "chat")
    unpriced = sum(1 for r in recent if r.cost_usd is None)
    return render(
        request,
        "spend.html",
        title="Spend",
        chart=stacked_bars(days, values, series, unit),
        series=series,
        unit=unit,
        priced=priced,
        unpriced=unpriced,
        chats=chats[:TOP_CHATS],
        month_total=month_total,
        month=f"{today:%Y-%m}",
    )


def _series(record: UsageRecord) -> str:
    return f"{record.agent} · {record.purpose}"


def routes(_services: object) -> list[web.RouteDef]:
    return [web.get("/spend", spend_page)]

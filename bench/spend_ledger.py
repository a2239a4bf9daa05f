"""What the spend ledger costs: reading litellm's cost map without importing litellm, one
`Ledger.record` (price + complete-or-raise append, the running totals) per model call, the
budget's check before a call, and reading a busy month back for `clawgate usage`.

Run: python bench/spend_ledger.py [--calls 2000] [--month 50000]

--calls: records appended (and budget checks made) for the per-call figures; --month:
records in the month file that `clawgate usage` then reads and sums.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clawgate.agent.spend.budget import Budget
from clawgate.agent.spend.ledger import Ledger, read_records
from clawgate.agent.spend.prices import PriceBook, cost_entries
from clawgate.agent.spend.report import summarise
from clawgate.agent.spend.scope import CallTag
from clawgate.kernel.bus import Trust
from clawgate.kernel.config_sections import BudgetConfig

MODEL = "openai/gpt-4o-mini"


def per_call(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return f"p50 {statistics.median(samples) * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us"


async def main(calls: int, month: int) -> None:
    started = time.perf_counter()
    entry = cost_entries([MODEL.partition("/")[2]])
    print(
        f"one model's price read from the cost map (no litellm import): "
        f"{(time.perf_counter() - started) * 1000:.1f} ms, found: {None not in entry.values()};"
        f" litellm imported: {'litellm' in sys.modules}"
    )

    with tempfile.TemporaryDirectory() as folder:
        data_dir = Path(folder)
        ledger = Ledger(data_dir, agent="main", prices=PriceBook({}))
        budget = Budget(
            BudgetConfig(daily_usd=1e9, monthly_usd=1e9, per_chat_daily_usd=1e9), ledger
        )
        tag = CallTag("chat", "telegram:-100200", Trust.GROUP)
        usage = {"prompt_tokens": 1200, "completion_tokens": 150}
        await ledger.record(tag, MODEL, usage)  # loads the map and this month's totals
        records, checks = [], []
        for _ in range(calls):
            t0 = time.perf_counter()
            await budget.check(tag, MODEL)
            t1 = time.perf_counter()
            await ledger.record(tag, MODEL, usage)
            t2 = time.perf_counter()
            checks.append(t1 - t0)
            records.append(t2 - t1)
        print(f"budget check before a call: {per_call(checks)} ({calls:,} calls)")
        print(f"ledger record after a call: {per_call(records)} (price, append, totals)")

        line = next(iter(ledger.folder.glob("*.jsonl"))).read_text().splitlines()[0] + "\n"
        path = next(iter(ledger.folder.glob("*.jsonl")))
        path.write_text(line * month)
        t0 = time.perf_counter()
        found = read_records(ledger.folder)
        rows, _ = summarise(found, "chat")
        print(
            f"read and sum a month of {len(found):,} records into {len(rows)} rows: {time.perf_counter() - t0:.2f} s "
            f"({path.stat().st_size / 1e6:.1f} MB)"
        )
        config = data_dir / "config.toml"
        config.write_text(f'workspace = "{data_dir / "ws"}"\ndata_dir = "{data_dir}"\n')
        clawgate = Path(sys.executable).with_name("clawgate")
        t0 = time.perf_counter()
        command = [str(clawgate), "-c", str(config), "usage"]
        await asyncio.to_thread(subprocess.run, command, check=True, stdout=subprocess.DEVNULL)
        print(f"`clawgate usage` over that month, whole process: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--month", type=int, default=50_000)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.month))

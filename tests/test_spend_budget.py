"""Caps: a group that spends its day's budget gets one notice and no further model request
until the next day (an injected clock), the owner one notice; 80 % warns the owner once,
also across a restart; without a price the day's tokens are capped instead."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from clawgate.agent.spend.budget import Budget
from clawgate.agent.spend.ledger import Ledger
from clawgate.agent.spend.prices import PriceBook
from clawgate.agent.spend.scope import CallTag
from clawgate.gateway.app import owner_chat_of
from clawgate.kernel.bus import Trust
from clawgate.kernel.clock import Clock
from clawgate.kernel.config import HeartbeatConfig
from clawgate.kernel.config_sections import BudgetConfig, ModelPrice
from clawgate.kernel.errors import OverBudget
from tests.fakes.llm import text
from tests.harness import Harness, make_config
from tests.scheduler_harness import SchedulerHarness, a_job, make, write_jobs

OWNER_CHAT = "9"  # heartbeat.deliver_to: where the owner's notices go
GROUP = "-5"


class MovableClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 5, 10, 0, tzinfo=UTC).timestamp()

    def clock(self) -> Clock:
        return Clock(wall=lambda: self.now)


def config_with(tmp_path, agent_config, budget: BudgetConfig, price: ModelPrice | None):
    prices = {"openai/fake-model": price} if price is not None else {}
    return make_config(
        tmp_path,
        agent_config.model_copy(update={"prices": prices}),
        budget=budget,
        heartbeat=HeartbeatConfig(deliver_to=f"test:{OWNER_CHAT}"),
    )


async def quiet(harness: Harness, chat_id: str) -> bool:
    """Every turn has finished and nothing waits to be sent to `chat_id`."""
    await harness.gateway.default.dispatcher.wait_idle(10)
    await asyncio.wait_for(harness.bus.outbound.join(), 10)
    return harness.channel._queue(chat_id).empty()


async def test_a_group_over_its_cap_gets_one_notice_and_resumes_the_next_day(
    tmp_path, fake_llm, agent_config
):
    time = MovableClock()
    dollar_a_token = ModelPrice(input_per_mtok=1_000_000, output_per_mtok=1_000_000)
    config = config_with(tmp_path, agent_config, BudgetConfig(per_chat_daily_usd=5), dollar_a_token)
    async with Harness(config, clock=time.clock()) as harness:
        fake_llm.script(text("Hello group."))
        assert (await harness.ask("hi", chat_id=GROUP, trust=Trust.GROUP)).text == "Hello group."
        calls = len(fake_llm.requests)
        notice = await harness.ask("more please", chat_id=GROUP, trust=Trust.GROUP)
        assert notice.text == (
            "This chat has used its model budget for today. I'll answer again tomorrow."
        )
        owner = await harness.channel.next_reply(OWNER_CHAT)
        assert owner.text.startswith(f"[budget] test:{GROUP} reached budget.per_chat_daily_usd")
        await harness.channel.say("anyone?", chat_id=GROUP, trust=Trust.GROUP)
        await harness.channel.say("hello??", chat_id=GROUP, trust=Trust.GROUP)
        assert await quiet(harness, GROUP) and await quiet(harness, OWNER_CHAT)
        assert len(fake_llm.requests) == calls  # no model request while capped
        fake_llm.script(text("Owner answered."))
        assert (await harness.ask("and me?")).text == "Owner answered."  # another chat

    # A restart on the same day: still capped, and nobody is told again.
    async with Harness(config, clock=time.clock()) as harness:
        await harness.channel.say("after restart", chat_id=GROUP, trust=Trust.GROUP)
        assert await quiet(harness, GROUP) and await quiet(harness, OWNER_CHAT)
        calls = len(fake_llm.requests)
        time.now += 24 * 3600
        fake_llm.script(text("A new day."))
        reply = await harness.ask("good morning", chat_id=GROUP, trust=Trust.GROUP)
        assert reply.text == "A new day." and len(fake_llm.requests) == calls + 1


async def test_eighty_percent_warns_the_owner_once_even_after_a_restart(
    tmp_path, fake_llm, agent_config
):
    time = MovableClock()
    ten_dollars_a_word = ModelPrice(input_per_mtok=0, output_per_mtok=10_000_000)
    config = config_with(tmp_path, agent_config, BudgetConfig(daily_usd=100), ten_dollars_a_word)
    async with Harness(config, clock=time.clock()) as harness:
        fake_llm.script(text("one two three four five six seven"))  # $70: no warning yet
        await harness.ask("count")
        assert await quiet(harness, OWNER_CHAT)
        fake_llm.script(text("eight"))  # $80
        await harness.ask("go on")
        warning = await harness.channel.next_reply(OWNER_CHAT)
        assert warning.text == (
            "[budget] 80 % of budget.daily_usd used ($80.00 of $100.00 for 2026-12-05)."
        )
        fake_llm.script(text("nine"))  # $90
        await harness.ask("and?")
        assert await quiet(harness, OWNER_CHAT)
    async with Harness(config, clock=time.clock()) as harness:
        fake_llm.script(text("ten"))  # $100: the owner's own chats go on (owner_exempt)
        assert (await harness.ask("last")).text == "ten"
        owner = await harness.channel.next_reply(OWNER_CHAT)
        assert owner.text == (
            "[budget] budget.daily_usd reached ($100.00 of $100.00 for 2026-12-05): model "
            "calls stop until tomorrow (your own chats go on)."
        )
        fake_llm.script(text("blocked"))
        refused = await harness.ask("in the group", chat_id=GROUP, trust=Trust.GROUP)
        assert refused.text.startswith("The assistant's model budget for today is used up")
        assert await quiet(harness, OWNER_CHAT)  # told once, above
        assert fake_llm.pending == 1  # "blocked" was never asked for


async def test_without_deliver_to_the_owners_notice_goes_to_their_private_chat(
    tmp_path, fake_llm, agent_config
):
    # The gateway's answer (gateway/app.py): heartbeat.deliver_to, else the owner's one
    # private chat; before, an unset deliver_to sent the owner's notices to the log only.
    time = MovableClock()
    dollar_a_token = ModelPrice(input_per_mtok=1_000_000, output_per_mtok=1_000_000)
    config = make_config(
        tmp_path,
        agent_config.model_copy(update={"prices": {"openai/fake-model": dollar_a_token}}),
        budget=BudgetConfig(per_chat_daily_usd=5),
    )
    assert not config.heartbeat.deliver_to
    async with Harness(config, clock=time.clock(), owner_chat=owner_chat_of(config)) as harness:
        fake_llm.script(text("Hi owner."), text("Hello group."))
        assert (await harness.ask("hi", chat_id=OWNER_CHAT)).text == "Hi owner."
        assert (await harness.ask("hi", chat_id=GROUP, trust=Trust.GROUP)).text == "Hello group."
        await harness.ask("more please", chat_id=GROUP, trust=Trust.GROUP)
        owner = await harness.channel.next_reply(OWNER_CHAT)
        assert owner.text.startswith(f"[budget] test:{GROUP} reached budget.per_chat_daily_usd")


async def test_without_a_price_the_days_tokens_are_capped(tmp_path, fake_llm, agent_config):
    config = config_with(tmp_path, agent_config, BudgetConfig(daily_tokens=10), None)
    async with Harness(config) as harness:
        fake_llm.script(text("A reply of several words for the group."))
        await harness.ask("hello", chat_id=GROUP, trust=Trust.GROUP)
        calls = len(fake_llm.requests)
        refused = await harness.ask("again", chat_id=GROUP, trust=Trust.GROUP)
        assert refused.text.startswith("The assistant's model budget for today is used up")
        owner = await harness.channel.next_reply(OWNER_CHAT)
        assert "budget.daily_tokens reached" in owner.text and "tokens of 10 tokens" in owner.text
        assert len(fake_llm.requests) == calls


async def test_the_monthly_cap_holds_until_the_month_rolls_over(tmp_path):
    time = MovableClock()  # 2026-12-05
    ledger = Ledger(
        tmp_path,
        agent="main",
        prices=PriceBook({"openai/m": ModelPrice(input_per_mtok=1e6, output_per_mtok=0)}),
        clock=time.clock(),
    )
    told: list[str] = []

    async def owner(text: str) -> None:
        told.append(text)

    budget = Budget(BudgetConfig(monthly_usd=10, owner_exempt=False), ledger, notify_owner=owner)
    tag = CallTag("cron", "cron:daily", Trust.OWNER)
    await budget.check(tag, "openai/m")
    await ledger.record(tag, "openai/m", {"prompt_tokens": 6, "completion_tokens": 0})
    time.now += 20 * 24 * 3600  # 2026-12-25: another day, the same month
    await budget.check(tag, "openai/m")
    await ledger.record(tag, "openai/m", {"prompt_tokens": 6, "completion_tokens": 0})
    await budget.after_call("openai/m")
    assert told == [
        "[budget] budget.monthly_usd reached ($12.00 of $10.00 for 2026-12): model calls "
        "stop until next month."
    ]
    with pytest.raises(OverBudget) as refused:
        await budget.check(tag, "openai/m")
    assert refused.value.key == "monthly_usd:2026-12"
    time.now += 7 * 24 * 3600  # 2027-01-01
    await budget.check(tag, "openai/m")  # a new month: calls go on
    assert len(told) == 1


async def test_cron_runs_are_capped_even_for_the_owner(tmp_path, fake_llm, agent_config):
    dollar_a_token = ModelPrice(input_per_mtok=1_000_000, output_per_mtok=1_000_000)
    agent = agent_config.model_copy(update={"prices": {"openai/fake-model": dollar_a_token}})
    config = make(tmp_path, agent, budget=BudgetConfig(daily_usd=1))
    async with SchedulerHarness(config) as harness:
        fake_llm.script(text("Hi."))
        assert (await harness.ask("hello")).text == "Hi."  # the owner's chat goes on
        write_jobs(harness.store, a_job("news"))
        await harness.scheduler.check_files()
        calls = len(fake_llm.requests)
        result = await harness.scheduler.run_job("news")
        assert not result.ok and result.error is not None
        assert result.error.startswith("[budget] budget.daily_usd reached")
        assert len(fake_llm.requests) == calls

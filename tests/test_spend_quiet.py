"""A quiet day costs nothing: the heartbeat's deterministic pre-check (time windows in
HEARTBEAT.md) makes no model call when nothing is due, heartbeat and cron turns use
`heartbeat.model`, a cron job's `condition` that fails makes no model call, and /status
shows what the heartbeat spent today."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from clawgate.gateway.cron.heartbeat import Heartbeat, heartbeat_tasks
from clawgate.gateway.cron.models import StateFile
from clawgate.kernel.config import AgentConfig, Config, HeartbeatConfig
from clawgate.kernel.config_sections import ModelPrice
from tests.dashboard_harness import dashboard_client
from tests.fakes.llm import FakeLLM, text
from tests.scheduler_harness import TARGET, SchedulerHarness, a_job, make, write_jobs

CHEAP = "openai/cheap-model"
TASKS = """# Heartbeat
<!-- one comment -->
- [Mon-Fri 09:00-09:30] Look at today's calendar and tell me the first meeting.
- [Sun] Plan the week.
"""


class Moment:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def config(tmp_path, agent_config: AgentConfig) -> Config:
    prices = {CHEAP: ModelPrice(input_per_mtok=100, output_per_mtok=100)}
    return make(
        tmp_path,
        agent_config.model_copy(update={"prices": prices}),
        heartbeat=HeartbeatConfig(enabled=False, model=CHEAP),
    )


@pytest.fixture
async def running(config: Config) -> AsyncIterator[SchedulerHarness]:
    async with SchedulerHarness(config) as harness:
        yield harness


def test_time_windows_gate_heartbeat_items() -> None:
    monday_0915 = datetime(2026, 12, 7, 9, 15)
    due = heartbeat_tasks(TASKS, monday_0915)
    assert due is not None and "calendar" in due and "Plan the week" not in due
    assert heartbeat_tasks(TASKS, datetime(2026, 12, 7, 9, 30)) is None  # the end is exclusive
    assert heartbeat_tasks(TASKS, datetime(2026, 12, 5, 9, 15)) is None  # a Saturday
    sunday = heartbeat_tasks(TASKS, datetime(2026, 12, 6, 23, 59))
    assert sunday is not None and "Plan the week" in sunday and "calendar" not in sunday
    assert heartbeat_tasks(TASKS) is not None  # no moment: are there any tasks at all
    assert heartbeat_tasks("- [sat,sun 22:00-02:00] night check", datetime(2026, 12, 6, 1, 0))
    # A bracket that is no window is text: the item is always due.
    assert heartbeat_tasks("- [urgent] call the bank", datetime(2026, 12, 5, 3, 0))
    assert heartbeat_tasks("<!-- - [Sun] hidden -->\n# only a heading\n- [ ]\n") is None


async def test_an_idle_heartbeat_day_makes_no_model_request(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    (running.workspace / "HEARTBEAT.md").write_text(TASKS)
    clock = Moment(datetime(2026, 12, 5, 0, 0, tzinfo=UTC))  # a Saturday
    heartbeat = Heartbeat(
        HeartbeatConfig(active_hours="00:00-24:00", deliver_to=TARGET),
        timezone="UTC",
        workspace=running.workspace,
        turns=running.scheduler.turns,
        clock=clock,
    )
    outcomes = set()
    for _ in range(48):  # every 30 minutes, all day
        outcomes.add(await heartbeat.tick())
        clock.now += timedelta(minutes=30)
    assert outcomes == {"no-tasks"}
    assert fake_llm.requests == []
    assert not (running.config.data_dir / "usage").exists()  # nothing spent, nothing written

    clock.now = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)  # Monday 09:00: the calendar is due
    fake_llm.script(text("First meeting at 10:00 with Bo."))
    assert await heartbeat.tick() == "delivered"
    [request] = fake_llm.requests
    assert request["model"] == "cheap-model"  # heartbeat.model, not the agent's
    prompt = json.dumps(request["messages"])
    assert "calendar" in prompt and "Plan the week" not in prompt
    [record] = [
        json.loads(line)
        for path in (running.config.data_dir / "usage").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert (record["purpose"], record["model"]) == ("heartbeat", CHEAP)
    assert record["session_key"] == "heartbeat:main" and record["cost_usd"] > 0
    await running.channel.next_reply("1")  # the delivery
    status = (await running.ask("/status")).text
    assert f"Heartbeat today: ${record['cost_usd']:.4f}, 1 model calls" in status


async def test_a_cron_condition_that_fails_makes_no_model_request(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hi."))
    await running.ask("hello")  # the owner's chat records its trust (exec needs the owner)
    marker = running.workspace / "changed"
    write_jobs(running.store, a_job("watch", condition=f"test -e {marker}"))
    await running.scheduler.check_files()
    calls = len(fake_llm.requests)

    result = await running.scheduler.run_job("watch")
    assert result.ok and result.text == "skipped: condition exited 1 (no model call)"
    assert len(fake_llm.requests) == calls
    state = StateFile.model_validate_json(running.store.state_path.read_text())
    assert state.of("watch").last_status == "skipped"

    marker.write_text("yes")
    fake_llm.script(text("It changed."))
    result = await running.scheduler.run_job("watch")
    assert result.ok and result.text == "It changed."
    assert len(fake_llm.requests) == calls + 1
    assert fake_llm.requests[-1]["model"] == "cheap-model"  # cron turns use heartbeat.model
    assert (await running.channel.next_reply("1")).text == "It changed."


async def test_a_condition_follows_the_exec_rules(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hi."))
    await running.ask("hello")
    write_jobs(running.store, a_job("wipe", condition="rm -rf / && true"))
    await running.scheduler.check_files()
    calls = len(fake_llm.requests)
    result = await running.scheduler.run_job("wipe")
    assert result.text.startswith("skipped: condition not run: command refused by the deny list")
    assert len(fake_llm.requests) == calls


async def test_a_skipped_run_shows_as_skipped_not_failed(config: Config, fake_llm: FakeLLM) -> None:
    async with dashboard_client(config, scheduler=True) as dashboard:
        fake_llm.script(text("Hi."))
        await dashboard.harness.ask("hello")
        scheduler = dashboard.harness.gateway.default.scheduler
        assert scheduler is not None
        write_jobs(scheduler.store, a_job("watch", condition="false"))
        await scheduler.check_files()
        assert (await scheduler.run_job("watch")).text.startswith("skipped")
        page = await dashboard.text("/jobs")
    row = page.split('data-job="watch"')[1].split("</tr>")[0]
    assert "runs only if <code>false</code> exits 0" in row
    assert '<span class="badge">skipped</span>' in row
    assert '<div class="muted">condition exited 1</div>' in row

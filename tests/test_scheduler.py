"""The scheduler in a real gateway: jobs from jobs.json fired by APScheduler (only `every` and
`at` jobs a second or two away), the direct run path for everything else, the cron tool
driven by the scripted model, and the heartbeat with a clock the test moves."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from clawgate.agent.history import MISSING_RESULT
from clawgate.agent.memory.audit import audit_sessions
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import Consolidation, Delivery, load_session
from clawgate.agent.tools import Tool, ToolContext, ToolParams
from clawgate.channels.telegram import create_channel
from clawgate.gateway.cron import turns as turns_module
from clawgate.gateway.cron.heartbeat import Heartbeat
from clawgate.gateway.cron.models import Schedule, StateFile
from clawgate.gateway.cron.scheduler import CRON_KEEP_RUNS
from clawgate.gateway.cron.store import CronStore
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.kernel.bus import MessageBus, Trust
from clawgate.kernel.config import (
    AgentConfig,
    ChannelsConfig,
    Config,
    CronConfig,
    HeartbeatConfig,
    LimitsConfig,
    TelegramConfig,
)
from tests.fakes.llm import FakeLLM, error, gate, raw_tool_call, text, tool_call
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.harness import wait_until
from tests.scheduler_harness import TARGET, SchedulerHarness, a_job, make, write_jobs


def hand_write(path: Path, content: str) -> None:
    """Save like an editor that writes a new file and renames it over the old one."""
    temp = path.with_name(path.name + ".swp")
    temp.write_text(content)
    temp.replace(path)


def cron_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in llm.requests if "[scheduled job" in json.dumps(r["messages"])]


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig) -> Config:
    return make(tmp_path, agent_config)


@pytest.fixture
async def running(config: Config) -> AsyncIterator[SchedulerHarness]:
    async with SchedulerHarness(config) as harness:
        yield harness


# -- firing through APScheduler ---------------------------------------------------------------


async def test_every_and_at_jobs_fire_and_deliver(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: text("Time for water.")
    await running.ask("hi")  # the first model call imports litellm: not inside the timing
    now = datetime.now(UTC)
    write_jobs(
        running.store,
        a_job("every", schedule=Schedule(every=1), created_at=now),
        a_job("once", schedule=Schedule(at=now + timedelta(seconds=1.5))),
    )
    first = await running.channel.next_reply("1")
    second = await running.channel.next_reply("1")
    assert first.text == second.text == "Time for water."
    await wait_until(lambda: not running.store.load().get("once").enabled, timeout=5)

    def recorded(job_id: str) -> bool:
        state = running.store.load_state().jobs.get(job_id)
        return state is not None and state.last_status == "ok" and state.runs >= 1

    await wait_until(lambda: recorded("once") and recorded("every"), timeout=5)
    assert running.store.load_state().jobs["once"].runs == 1
    # The reply is in the target chat's history, marked, so the owner's next turn sees it.
    contents = [m.content for m in running.session(TARGET)][2:]
    assert "[scheduled: job every] Time for water." in contents
    assert "[scheduled: job once] Time for water." in contents
    # The job's own session holds the instruction and the reply.
    assert running.session("cron:once")[0].content.endswith("Say the time")


async def test_hand_edit_is_picked_up_and_a_broken_file_keeps_the_last_good_set(
    running: SchedulerHarness, fake_llm: FakeLLM, caplog: pytest.LogCaptureFixture
) -> None:
    assert running.scheduler.jobs == {}
    job = a_job("hand", schedule=Schedule(every=3600)).model_dump(mode="json")
    running.store.directory.mkdir(exist_ok=True)
    hand_write(running.store.jobs_path, json.dumps({"version": 1, "jobs": [job]}, indent=2))
    await wait_until(lambda: "hand" in running.scheduler.jobs, timeout=5)
    assert running.scheduler.next_run("hand") is not None
    reloads = running.scheduler.reloads
    with caplog.at_level(logging.ERROR, logger="clawgate.gateway.cron.scheduler"):
        hand_write(running.store.jobs_path, '{"version": 1, "jobs": [{"id": "x"')
        await wait_until(lambda: any("not valid JSON" in r.message for r in caplog.records), 5)
        await asyncio.sleep(0.3)  # several more polls of the same broken file
    errors = [
        r for r in caplog.records if r.levelno >= logging.ERROR and "jobs.json" in r.getMessage()
    ]
    assert len(errors) == 1 and "keeping the 1 jobs" in errors[0].getMessage()
    assert running.scheduler.reloads == reloads
    assert running.scheduler.next_run("hand") is not None  # still scheduled
    # Fixed again: disabling by hand takes effect.
    job["enabled"] = False
    hand_write(running.store.jobs_path, json.dumps({"version": 1, "jobs": [job]}))
    await wait_until(lambda: not running.scheduler.jobs["hand"].enabled, timeout=5)
    assert running.scheduler.next_run("hand") is None


async def test_jobs_and_state_survive_a_restart(config: Config, fake_llm: FakeLLM) -> None:
    fake_llm.handler = lambda body: text("Agenda: nothing.")
    async with SchedulerHarness(config) as first:
        write_jobs(first.store, a_job("agenda", schedule=Schedule(cron="0 8 * * 1-5")))
        await wait_until(lambda: "agenda" in first.scheduler.jobs, timeout=5)
        planned = first.scheduler.next_run("agenda")
        await first.scheduler.run_job("agenda")  # the direct run path
        assert (await first.channel.next_reply("1")).text == "Agenda: nothing."
    state = first.store.load_state().jobs["agenda"]
    assert state.next_run == planned and state.runs == 1 and state.last_status == "ok"
    async with SchedulerHarness(config) as second:
        assert second.scheduler.next_run("agenda") == planned
        assert planned is not None and planned.astimezone(UTC).hour == 8
        assert planned.weekday() < 5
        assert second.scheduler.state.jobs["agenda"].runs == 1
    assert len(cron_requests(fake_llm)) == 1


async def test_missed_one_shots_run_late_with_a_note_or_are_reported_past_the_limit(
    config: Config, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: text("Call the bank!")
    now = datetime.now(UTC)
    store = CronStore(config.workspace / "cron")
    hourly = a_job("hourly", schedule=Schedule(every=3600), created_at=now - timedelta(hours=5))
    ancient = now - timedelta(hours=30, minutes=1)  # the limit is 24 h
    write_jobs(
        store,
        a_job("recent", schedule=Schedule(at=now - timedelta(minutes=10))),  # grace is 60 min
        a_job("stale", schedule=Schedule(at=now - timedelta(hours=3, minutes=1))),
        a_job("ancient", schedule=Schedule(at=ancient)),
        hourly,
    )
    state = StateFile()
    state.of("hourly").last_run = now - timedelta(hours=4)
    store.save_state(state)
    async with SchedulerHarness(config) as harness:
        replies = sorted([(await harness.channel.next_reply("1")).text for _ in range(3)])
        assert replies[0].startswith("(this reminder was due at ")
        assert replies[0].endswith(", 3 h ago) Call the bank!")
        assert replies[1:] == [
            "Call the bank!",
            f"Missed: the scheduled job 'job ancient' was due at {ancient:%Y-%m-%d %H:%M} UTC, "
            "30 h ago - later than the 24 h limit for late runs, so it did not run.",
        ]

        def settled() -> bool:
            jobs = harness.store.load()
            return not any(jobs.get(j).enabled for j in ("recent", "stale", "ancient"))

        await wait_until(settled, timeout=5)
        nxt = harness.scheduler.next_run("hourly")
        assert nxt is not None and now < nxt <= now + timedelta(hours=1)
    states = store.load_state().jobs
    assert [states[j].last_status for j in ("recent", "stale", "ancient")] == ["ok", "ok", "missed"]
    assert all(states[j].next_run is None for j in ("recent", "stale", "ancient"))
    assert len(cron_requests(fake_llm)) == 2  # "hourly" replayed nothing, "ancient" never ran
    late = [r for r in cron_requests(fake_llm) if "it runs late" in json.dumps(r["messages"])]
    assert len(late) == 1  # the model knows the reminder is late
    async with SchedulerHarness(config) as again:
        assert again.scheduler.next_run("recent") is None
        await asyncio.sleep(0.2)
        assert again.channel.sent.get("1") is None or again.channel.sent["1"].empty()
    assert len(cron_requests(fake_llm)) == 2


class Shifted:
    """The real time plus an offset a test moves, like a machine waking from sleep."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


async def test_a_one_shot_missed_across_a_clock_jump_runs_late_with_a_note(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make(tmp_path, agent_config, cron=CronConfig(missed_grace_minutes=0))
    fake_llm.handler = lambda body: text("Call the bank!")
    clock = Shifted()
    async with SchedulerHarness(config, clock=clock) as harness:
        await harness.ask("hi")  # the first model call imports litellm: not inside the timing
        due = clock() + timedelta(seconds=2)
        write_jobs(harness.store, a_job("nap", schedule=Schedule(at=due)))
        await wait_until(lambda: harness.scheduler.next_run("nap") is not None, timeout=5)
        clock.offset = timedelta(hours=3)
        # The machine sleeps: the event loop and APScheduler's timer stop past the due time.
        time.sleep(4)  # noqa: ASYNC251
        reply = await harness.channel.next_reply("1")
        assert reply.text.startswith("(this reminder was due at ")
        assert reply.text.endswith(", 3 h ago) Call the bank!")

        def done() -> bool:
            state = harness.store.load_state().jobs.get("nap")
            return state is not None and state.last_status == "ok" and state.next_run is None

        await wait_until(done, timeout=5)
        assert not harness.store.load().get("nap").enabled


# -- the direct run path ----------------------------------------------------------------------


async def test_five_failures_disable_the_job_with_one_notice(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: error(500, "provider down")
    write_jobs(running.store, a_job("flaky", schedule=Schedule(every=3600)))
    await wait_until(lambda: "flaky" in running.scheduler.jobs, timeout=5)
    result = await running.scheduler.run_job("flaky")
    # test:1 never recorded a trust, so it counts as `allowed`: no provider text for it.
    assert not result.ok and "went wrong talking to the model" in (result.error or "")
    state = running.scheduler.state.jobs["flaky"]
    assert state.consecutive_errors == 1 and state.retry_at is not None
    # The retry is scheduled with backoff, before the next regular run.
    retry = running.scheduler.next_run("flaky")
    assert retry is not None and retry <= datetime.now(UTC) + timedelta(seconds=31)
    for _ in range(4):
        await running.scheduler.run_job("flaky")
    notice = await running.channel.next_reply("1")
    assert "failed 5 times in a row and is now disabled" in notice.text
    assert "clawgate cron enable flaky" in notice.text
    assert not running.store.load().get("flaky").enabled
    assert running.scheduler.next_run("flaky") is None
    assert not (await running.scheduler.run_job("flaky")).ok  # disabled: not run again
    await asyncio.sleep(0.1)
    assert running.channel.sent["1"].empty()  # exactly one notice
    assert running.store.load_state().jobs["flaky"].last_status == "disabled"


async def test_job_runs_with_the_target_chats_trust_and_a_bounded_history(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hi Ann"))
    await running.ask("hello")  # the owner's chat now records trust owner
    write_jobs(running.store, a_job("daily"), a_job("other", deliver_to="test:2"))
    await wait_until(lambda: len(running.scheduler.jobs) == 2, timeout=5)
    fake_llm.handler = lambda body: text("Done.")
    for _ in range(6):
        assert (await running.scheduler.run_job("daily")).ok
    assert "(trust: owner)" in (fake_llm.last_system_prompt() or "")
    await running.scheduler.run_job("other")  # a chat that never recorded a trust
    assert "(trust: allowed)" in (fake_llm.last_system_prompt() or "")
    # Each run sends only the last few runs of the job's session.
    users = [m for m in fake_llm.requests[-2]["messages"] if m["role"] == "user"]
    assert len(users) == CRON_KEEP_RUNS + 1
    session = await running.runtime.sessions.get("cron:daily")
    assert len([m for m in session.unconsolidated() if m.role == "user"]) == CRON_KEEP_RUNS
    assert any(r.mode == "trimmed" for r in session.records_of(Consolidation))
    report = audit_sessions(running.workspace / "sessions")
    assert report.ok, report.problems
    memory = running.workspace / "memory" / "MEMORY.md"
    assert "Done." not in (memory.read_text() if memory.exists() else "")


# -- the cron tool -----------------------------------------------------------------------------


async def test_owner_schedules_through_the_tool_and_a_bad_expression_is_a_clear_error(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    add = {"action": "add", "name": "agenda", "message": "Send my agenda"}
    fake_llm.script(
        raw_tool_call("cron", json.dumps({**add, "cron": "61 8 * * *"})),
        raw_tool_call("cron", json.dumps({**add, "cron": "0 8 * * 1-5"})),
        text("Scheduled."),
    )
    assert (await running.ask("every weekday at 8 send me my agenda")).text == "Scheduled."
    results = [m.content for m in running.session(TARGET) if m.role == "tool"]
    assert results[0].startswith("Error: invalid cron expression '61 8 * * *'")
    assert results[1].startswith("Scheduled job ")
    jobs = running.store.load().jobs
    assert (
        len(jobs) == 1 and jobs[0].deliver_to == TARGET and jobs[0].schedule.cron == "0 8 * * 1-5"
    )
    await wait_until(lambda: jobs[0].id in running.scheduler.jobs, timeout=5)
    fake_llm.script(tool_call("cron", action="list"), text("Listed."))
    await running.ask("what is scheduled?")
    listing = [m.content for m in running.session(TARGET) if m.role == "tool"][-1]
    assert jobs[0].id in listing and "'0 8 * * 1-5'" in listing


async def test_a_job_that_tries_to_schedule_a_job_is_refused(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hi"))
    await running.ask("hello")  # the target is the owner's chat: the job may see the tool
    write_jobs(running.store, a_job("loop", message="Schedule yourself again in a minute"))
    await wait_until(lambda: "loop" in running.scheduler.jobs, timeout=5)
    fake_llm.script(
        tool_call("cron", action="add", message="again", every=60), text("Could not reschedule.")
    )
    assert (await running.scheduler.run_job("loop")).ok
    tool_results = [m.content for m in running.session("cron:loop") if m.role == "tool"]
    assert tool_results == [
        "Error: a scheduled run cannot create or change jobs (no self-scheduling); "
        "mention it in your reply and let the owner decide"
    ]
    assert [job.id for job in running.store.load().jobs] == ["loop"]


async def test_group_sessions_cannot_create_jobs_by_default(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    fake_llm.script(tool_call("cron", action="add", message="spam", every=1), text("No."))
    await running.ask("bot, remind everyone", chat_id="g1", trust=Trust.GROUP)
    tools = [t["function"]["name"] for t in fake_llm.requests[0].get("tools", [])]
    assert "cron" not in tools
    result = next(m.content for m in running.session("test:g1") if m.role == "tool")
    assert result.startswith("Error: unknown tool 'cron'")
    assert not running.store.jobs_path.exists()


async def test_groups_may_schedule_for_themselves_when_allowed(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make(tmp_path, agent_config, cron=CronConfig(allow_from_groups=True))
    async with SchedulerHarness(config) as harness:
        fake_llm.script(
            tool_call("cron", action="add", message="x", every=60, deliver_to="test:1"),
            tool_call("cron", action="add", message="Standup!", cron="0 9 * * 1-5"),
            text("Ok."),
        )
        await harness.ask("schedule standup", chat_id="g1", trust=Trust.GROUP)
    results = [m.content for m in harness.session("test:g1") if m.role == "tool"]
    assert results[0] == "Error: from this chat, jobs can only report back to this chat"
    assert [job.deliver_to for job in harness.store.load().jobs] == ["test:g1"]


async def test_a_group_job_repeats_at_most_every_ten_minutes(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make(tmp_path, agent_config, cron=CronConfig(allow_from_groups=True))
    async with SchedulerHarness(config) as harness:
        fake_llm.script(
            tool_call("cron", action="add", message="spam", every=1),
            tool_call("cron", action="add", message="spam", cron="* * * * *"),
            tool_call("cron", action="add", message="check", every=600),
            text("Ok."),
        )
        await harness.ask("spam us", chat_id="g1", trust=Trust.GROUP)
        fake_llm.script(tool_call("cron", action="add", message="tick", every=1), text("Ok."))
        await harness.ask("tick every second")  # the owner is not held to it
    results = [m.content for m in harness.session("test:g1") if m.role == "tool"]
    assert all("at most every 10 minutes" in r for r in results[:2]), results
    assert results[2].startswith("Scheduled job")
    schedules = [(j.deliver_to, j.schedule.every) for j in harness.store.load().jobs]
    assert schedules == [("test:g1", 600), ("test:1", 1)]


async def test_runs_of_a_job_reporting_to_a_group_spend_the_groups_budget(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make(tmp_path, agent_config, limits=LimitsConfig(messages_per_minute=2))
    async with SchedulerHarness(config) as harness:
        fake_llm.handler = lambda body: text("Done.")
        await harness.ask("hi", chat_id="g1", trust=Trust.GROUP)  # records trust: group
        await harness.ask("hello")  # and the owner's chat records trust: owner
        write_jobs(
            harness.store,
            a_job("loud", deliver_to="test:g1"),
            a_job("mine", deliver_to="test:1"),
        )
        await wait_until(lambda: len(harness.scheduler.jobs) == 2, timeout=5)
        results = [await harness.scheduler.run_job("loud") for _ in range(3)]
        assert [r.ok for r in results] == [True, True, False]
        assert "rate limit" in (results[2].error or "")
        # The owner's own jobs are not charged to anyone.
        assert all([(await harness.scheduler.run_job("mine")).ok for _ in range(3)])
    assert len(fake_llm.requests) == 2 + 2 + 3


# -- heartbeat --------------------------------------------------------------------------------


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def heartbeat_for(harness: SchedulerHarness, clock: Callable[[], datetime]) -> Heartbeat:
    config = HeartbeatConfig(active_hours="08:00-22:00", deliver_to=TARGET)
    return Heartbeat(
        config,
        timezone="Europe/Berlin",
        workspace=harness.workspace,
        turns=harness.scheduler.turns,
        clock=clock,
    )


async def test_heartbeat_acts_only_on_tasks_inside_active_hours(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    clock = Clock(datetime(2026, 6, 1, 7, 0, tzinfo=UTC))  # 09:00 in Berlin
    heartbeat = heartbeat_for(running, clock)
    assert await heartbeat.tick() == "no-tasks"  # the template: headings and comments only
    assert fake_llm.requests == []
    path = running.workspace / "HEARTBEAT.md"
    path.write_text(path.read_text() + "\n- Tell me if it will rain tomorrow.\n")

    fake_llm.script(text("HEARTBEAT_OK"))
    assert await heartbeat.tick() == "ok"
    assert "Tell me if it will rain tomorrow." in json.dumps(fake_llm.last_messages())
    fake_llm.script(text("Rain tomorrow: take an umbrella."))
    assert await heartbeat.tick() == "delivered"
    assert (await running.channel.next_reply("1")).text == "Rain tomorrow: take an umbrella."
    assert running.channel.sent["1"].empty()  # the HEARTBEAT_OK was not sent
    contents = [m.content for m in running.session(TARGET)]
    assert contents == ["[heartbeat] Rain tomorrow: take an umbrella."]

    clock.now = datetime(2026, 6, 1, 21, 0, tzinfo=UTC)  # 23:00 in Berlin
    assert await heartbeat.tick() == "outside-hours"
    clock.now = datetime(2026, 6, 2, 6, 30, tzinfo=UTC)
    fake_llm.handler = lambda body: text("HEARTBEAT_OK")
    for _ in range(4):
        assert await heartbeat.tick() == "ok"
    # A light context: never more than the last few heartbeats.
    users = [m for m in fake_llm.last_messages() if m["role"] == "user"]
    assert len(users) <= 3


async def test_heartbeat_never_runs_while_the_owner_has_a_turn_in_flight(
    running: SchedulerHarness, fake_llm: FakeLLM
) -> None:
    (running.workspace / "HEARTBEAT.md").write_text("- Water the plants\n")
    heartbeat = heartbeat_for(running, Clock(datetime(2026, 6, 1, 10, 0, tzinfo=UTC)))
    release = asyncio.Event()
    fake_llm.script(gate(release, text("Sure.")))
    await running.channel.say("long question")
    await wait_until(lambda: running.gateway.default.dispatcher.busy(TARGET), timeout=5)
    assert await heartbeat.tick() == "busy"
    release.set()
    assert (await running.channel.next_reply("1")).text == "Sure."
    await running.gateway.default.dispatcher.wait_idle(5)
    fake_llm.script(text("Plants watered? Not yet."))
    assert await heartbeat.tick() == "delivered"


class Hold(Tool["Hold.Params"]):
    """A tool that runs until the test releases it, like a long `exec`."""

    name: ClassVar[str] = "hold"
    description: ClassVar[str] = "Wait until released."

    class Params(ToolParams):
        pass

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self, params: Params, ctx: ToolContext) -> str:
        self.started.set()
        await self.release.wait()
        return "the real result"


async def test_a_scheduled_reply_waits_for_the_running_turn_and_its_tool_call(
    config: Config, fake_llm: FakeLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before the fix a delivery waited a bounded time (60 s) for the chat to be idle, then
    # appended anyway; a shorter bound stands for a tool call that outlasts it.
    monkeypatch.setattr(turns_module, "IDLE_WAIT_SECONDS", 0.2, raising=False)

    def model(body: dict[str, Any]) -> Any:
        if "[scheduled job" in json.dumps(body["messages"]):
            return text("Reminder: stretch.")
        return text("Held.") if body["messages"][-1]["role"] == "tool" else tool_call("hold")

    fake_llm.handler = model
    hold = Hold()
    async with SchedulerHarness(config, tools=[hold]) as harness:
        write_jobs(harness.store, a_job("stretch"))
        await wait_until(lambda: "stretch" in harness.scheduler.jobs, timeout=5)
        await harness.channel.say("run the long thing")
        await asyncio.wait_for(hold.started.wait(), 5)
        run = asyncio.create_task(harness.scheduler.run_job("stretch"))
        await wait_until(lambda: len(cron_requests(fake_llm)) == 1, timeout=5)
        await asyncio.sleep(0.5)  # longer than the old bounded wait
        assert not run.done()  # the delivery waits for the turn, however long it takes
        hold.release.set()
        assert (await harness.channel.next_reply("1")).text == "Held."
        assert (await harness.channel.next_reply("1")).text == "Reminder: stretch."
        assert (await asyncio.wait_for(run, 5)).ok
        messages = harness.session(TARGET)
    assert [(m.role, m.content) for m in messages[2:]] == [
        ("tool", "the real result"),
        ("assistant", "Held."),
        ("assistant", "[scheduled: job stretch] Reminder: stretch."),
    ]
    assert MISSING_RESULT not in json.dumps(fake_llm.requests)


# -- through the fake Telegram server ---------------------------------------------------------


async def test_at_every_and_cron_jobs_deliver_through_telegram(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    owner = 1001
    async with FakeTelegram() as telegram:
        telegram_config = TelegramConfig(
            enabled=True,
            token=TOKEN,
            base_url=telegram.base_url,
            base_file_url=telegram.base_file_url,
            poll_timeout=1,
            allow_from=[str(owner)],
        )
        config = make(tmp_path, agent_config, channels=ChannelsConfig(telegram=telegram_config))
        bus = MessageBus()
        channel = create_channel(config.channels.telegram, bus, config)
        runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
        gateway = Gateway(
            [(runtime, bus)],
            [channel],
            bus,
            scheduler=True,
            scheduler_options={"poll_interval": 0.05},
        )
        assert gateway.default.scheduler is not None
        fake_llm.handler = lambda body: text(
            "Reminder: " + json.dumps(body["messages"][-1]["content"]).split("] ")[-1].strip('"')
        )
        now = datetime.now(UTC)
        store = gateway.default.scheduler.store
        to = f"telegram:{owner}"
        write_jobs(
            store,
            a_job("at", message="call the bank", deliver_to=to,
                  schedule=Schedule(at=now + timedelta(seconds=1.5))),
            a_job("every", message="stretch", deliver_to=to,
                  schedule=Schedule(every=1), created_at=now),
            a_job("cron", message="agenda", deliver_to=to, schedule=Schedule(cron="0 8 * * 1-5")),
        )  # fmt: skip
        await gateway.start()
        try:
            texts = {(await telegram.next_message(owner))["text"] for _ in range(2)}
            assert texts == {"Reminder: call the bank", "Reminder: stretch"}
            assert gateway.default.scheduler.next_run("cron") is not None
            await gateway.default.scheduler.run_job(
                "cron"
            )  # a cron job fires through the same path
            await wait_until(
                lambda: any(m["text"] == "Reminder: agenda" for m in telegram.messages_to(owner)), 5
            )
        finally:
            await gateway.stop(grace=2)
    session = load_session(gateway.default.runtime.sessions.path_for(to), to)
    assert "[scheduled: job at] Reminder: call the bank" in [m.content for m in session.messages]
    assert any(r.status == "sent" for r in session.records_of(Delivery))

"""Clock jumps, in-process with clocks the test moves (issue #24 items 6 and 7): the wall
clock jumps, the elapsed clock goes on as the real one does (or, for a machine that really
slept, jumps with it). The same through real processes under libfaketime is in
test_clock_jump_process.py."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from clawgate.agent.session import Archived, Message, SessionStore
from clawgate.gateway.cron.models import Schedule
from clawgate.gateway.ops.housekeeping import DAY, STATE_FILE, sweep
from clawgate.kernel.clock import Clock
from clawgate.kernel.config import AgentConfig, Config, CronConfig, HousekeepingConfig
from tests.fakes.llm import FakeLLM, text
from tests.harness import wait_until
from tests.scheduler_harness import SchedulerHarness, a_job, make, write_jobs


class MovedClock:
    """A machine's clocks: `wall` may be set (jump), `elapsed` only runs (or sleeps)."""

    def __init__(self, boot: str | None = "boot-1") -> None:
        self.offset = 0.0
        self.ran = 0.0
        self.boot_id = boot

    def clock(self) -> Clock:
        return Clock(
            wall=lambda: time.time() + self.offset,
            elapsed=lambda: 1000.0 + self.ran,
            boot=lambda: self.boot_id,
        )

    def run(self, seconds: float) -> None:
        """Time really passes: both clocks move."""
        self.ran += seconds
        self.offset += seconds


# -- housekeeping ------------------------------------------------------------------------


async def housekept(tmp_path: Path, keep_newest: int = 3) -> tuple[Config, dict[str, list[Path]]]:
    """A workspace with 5 recent files of each kind, the newest last."""
    workspace = tmp_path / "ws"
    config = Config(
        workspace=workspace,
        data_dir=tmp_path / "data",
        agent=AgentConfig(),
        housekeeping=HousekeepingConfig(keep_newest=keep_newest),
    )
    store = SessionStore(workspace / "sessions")
    kinds: dict[str, list[Path]] = {"media": [], "archive": [], "versions": []}
    versions = workspace / "memory" / ".versions"
    versions.mkdir(parents=True)
    for index in range(5):
        media = workspace / "media" / "telegram" / "1" / f"photo{index}.jpg"
        media.parent.mkdir(parents=True, exist_ok=True)
        media.write_bytes(b"x" * 100)
        kinds["media"].append(media)
        session = await store.get(f"telegram:{index}")
        store.append(session, Message(role="user", content=f"hello {index}"))
        archived = await store.archive(session)
        assert archived is not None
        store.append(session, Archived())
        kinds["archive"].append(archived)
        version = versions / f"MEMORY.{index}.md"
        version.write_text(f"fact {index}")
        kinds["versions"].append(version)
    for paths in kinds.values():
        for age, path in enumerate(reversed(paths)):  # the last one is the newest
            then = time.time() - 3600 * (age + 1)
            os.utime(path, (then, then))
    return config, kinds


def present(kinds: dict[str, list[Path]]) -> dict[str, int]:
    return {kind: sum(path.exists() for path in paths) for kind, paths in kinds.items()}


async def test_a_clock_set_400_days_ahead_deletes_nothing_and_then_keeps_the_newest(
    tmp_path: Path,
) -> None:
    config, kinds = await housekept(tmp_path)
    machine = MovedClock()
    assert sweep(config, clock=machine.clock()).summary().startswith("removed nothing")
    recorded = json.loads((config.data_dir / STATE_FILE).read_text())
    assert recorded["boot"] == "boot-1" and recorded["elapsed"] == 1000.0

    machine.run(3600)
    machine.offset += 400 * DAY  # the clock jumps while the gateway runs
    jumped = sweep(config, clock=machine.clock())
    assert jumped.skipped is not None and "moved 400.0 days" in jumped.summary()
    assert "only 1.0 h really passed" in jumped.summary()
    assert present(kinds) == {"media": 5, "archive": 5, "versions": 5}

    # The next daily sweep goes by the clock as it now is, but the newest of each kind stay.
    machine.run(DAY)
    report = sweep(config, clock=machine.clock())
    assert report.skipped is None
    assert report.removed == {"media files": 2, "archived transcripts": 2, "memory versions": 2}
    assert present(kinds) == {"media": 3, "archive": 3, "versions": 3}
    assert all(paths[-1].exists() and not paths[0].exists() for paths in kinds.values())


async def test_time_that_really_passed_is_no_clock_jump(tmp_path: Path) -> None:
    config, kinds = await housekept(tmp_path, keep_newest=0)
    machine = MovedClock()
    sweep(config, clock=machine.clock())
    # A week with the gateway stopped but the machine up (the elapsed clock ran): by age.
    machine.run(400 * DAY)
    assert sweep(config, clock=machine.clock()).skipped is None
    assert present(kinds) == {"media": 0, "archive": 0, "versions": 0}


async def test_after_a_reboot_the_time_since_the_boot_is_what_surely_passed(tmp_path: Path) -> None:
    config, kinds = await housekept(tmp_path, keep_newest=0)
    machine = MovedClock()
    sweep(config, clock=machine.clock())
    rebooted = MovedClock(boot="boot-2")
    rebooted.offset = 10 * DAY  # down for a while, then up for 9.5 days: that much is sure
    rebooted.ran = 9.5 * DAY - 1000.0
    assert sweep(config, clock=rebooted.clock(), dry_run=True).skipped is None
    rebooted.offset = 400 * DAY  # up for 9.5 days, but the clock says 400 days went by
    dry = sweep(config, clock=rebooted.clock(), dry_run=True)
    assert dry.skipped is not None and "moved 400.0 days" in dry.skipped
    # A dry run records nothing: the real sweep still sees the jump.
    assert sweep(config, clock=rebooted.clock()).skipped is not None
    assert present(kinds) == {"media": 5, "archive": 5, "versions": 5}


async def test_a_damaged_record_sweeps_by_age_and_is_rewritten(tmp_path: Path) -> None:
    config, kinds = await housekept(tmp_path, keep_newest=1)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    (config.data_dir / STATE_FILE).write_text('{"wall": ')
    machine = MovedClock()
    machine.offset = 400 * DAY
    assert sweep(config, clock=machine.clock()).skipped is None
    assert present(kinds) == {"media": 1, "archive": 1, "versions": 1}
    assert json.loads((config.data_dir / STATE_FILE).read_text())["boot"] == "boot-1"


# -- the scheduler -----------------------------------------------------------------------


class Machine:
    """The scheduler's clocks: the wall clock with an offset, the elapsed one real plus
    the time a suspended machine slept."""

    def __init__(self) -> None:
        self.offset = timedelta(0)
        self.slept = 0.0

    def wall(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def elapsed(self) -> float:
        return time.monotonic() + self.slept


async def reminder_after_jump(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM, *, slept: bool
) -> tuple[str, str | None, bool]:
    """A one-shot due in two seconds; the clock moves 25 h ahead before it fires. The
    reply's text, the job's last status and whether it is still enabled."""
    config = make(tmp_path, agent_config, cron=CronConfig(missed_grace_minutes=0))
    fake_llm.handler = lambda body: text("Call the bank!")
    machine = Machine()
    async with SchedulerHarness(config, clock=machine.wall, elapsed=machine.elapsed) as harness:
        due = machine.wall() + timedelta(seconds=2)
        write_jobs(harness.store, a_job("bank", schedule=Schedule(at=due)))
        await wait_until(lambda: harness.scheduler.next_run("bank") is not None, timeout=5)
        machine.offset = timedelta(hours=25)
        if slept:
            machine.slept = 25 * 3600.0
        reply = await harness.channel.next_reply("1")

        def settled() -> bool:
            state = harness.store.load_state().jobs.get("bank")
            return state is not None and state.last_status in ("ok", "missed")

        await wait_until(settled, timeout=5)
        state = harness.store.load_state().jobs["bank"]
        return reply.text, state.last_status, harness.store.load().get("bank").enabled


async def test_a_reminder_the_clock_jumped_past_runs_late_instead_of_missed(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    reply, status, enabled = await reminder_after_jump(
        tmp_path, agent_config, fake_llm, slept=False
    )
    assert reply.startswith("(this reminder was due at ")
    assert reply.endswith(", 25 h ago) Call the bank!")
    assert status == "ok" and not enabled  # ran once, done


async def test_a_reminder_a_sleeping_machine_slept_through_is_still_missed(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    reply, status, enabled = await reminder_after_jump(tmp_path, agent_config, fake_llm, slept=True)
    assert reply.startswith("Missed: the scheduled job 'job bank' was due at ")
    assert "25 h ago - later than the 24 h limit" in reply
    assert status == "missed" and not enabled

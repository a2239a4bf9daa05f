"""jobs.json / state.json, schedule validation and fire times (computed, never waited for),
and the heartbeat's pure rules."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from clawgate.gateway.cron.heartbeat import heartbeat_tasks, is_heartbeat_ok
from clawgate.gateway.cron.models import CronJob, JobsFile, Schedule, StateFile, new_job
from clawgate.gateway.cron.store import CronStore, add_job, remove_job, set_enabled
from clawgate.gateway.cron.triggers import fire_times, next_fire_time
from clawgate.gateway.cron.windows import within_hours
from clawgate.kernel.errors import CronError

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)


def job(schedule: Schedule, tz: str | None = "Europe/Berlin", **extra: object) -> CronJob:
    return CronJob(
        id="j1",
        name="test",
        schedule=schedule,
        timezone=tz,
        message="do it",
        deliver_to="telegram:123",
        created_at=extra.pop("created_at", NOW),  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


def cron_times(expr: str, start: datetime, count: int, tz: str = "Europe/Berlin") -> list[datetime]:
    return fire_times(job(Schedule(cron=expr), tz), "UTC", start, count)


def wall(times: list[datetime]) -> list[str]:
    """Berlin wall-clock of each moment (through UTC: a gap time comes back normalised)."""
    return [t.astimezone(UTC).astimezone(BERLIN).strftime("%d %H:%M") for t in times]


def test_jobs_file_round_trip_keeps_every_field(tmp_path: Path) -> None:
    store = CronStore(tmp_path / "cron")
    first = add_job(
        store,
        lambda jobs: new_job(
            jobs, name="bank", message="Remind me to call the bank", deliver_to="telegram:123",
            timezone="Europe/Berlin", at="2026-05-04T09:00", now=NOW,
        ),
    )  # fmt: skip
    second = add_job(
        store,
        lambda jobs: new_job(
            jobs, name="agenda", message="Send my agenda", deliver_to="telegram:-100987:42",
            timezone="UTC", cron="0 8 * * 1-5", now=NOW,
        ),
    )  # fmt: skip
    raw = json.loads(store.jobs_path.read_text())
    assert raw["version"] == 1
    assert raw["jobs"][0]["schedule"] == {"at": "2026-05-04T09:00:00", "every": None, "cron": None}
    assert raw["jobs"][0]["timezone"] == "Europe/Berlin"
    assert oct(store.jobs_path.stat().st_mode & 0o777) == "0o600"
    loaded = store.load()
    assert loaded.jobs == [first, second]
    assert second.target() == ("telegram", "-100987:42")  # only the first ':' splits
    # A naive `at` is in the job's zone.
    assert first.at_time("UTC") == datetime(2026, 5, 4, 9, 0, tzinfo=BERLIN)

    set_enabled(store, first.id, False)
    assert [j.enabled for j in store.load().jobs] == [False, True]
    remove_job(store, second.id)
    assert [j.id for j in store.load().jobs] == [first.id]
    with pytest.raises(CronError, match="no job with id 'nope'"):
        remove_job(store, "nope")


def test_malformed_or_invalid_files_are_one_clear_line(tmp_path: Path) -> None:
    store = CronStore(tmp_path / "cron")
    assert store.load() == JobsFile()  # absent = no jobs
    store.directory.mkdir()
    store.jobs_path.write_text("  \n")
    with pytest.raises(CronError, match=r"jobs\.json: the file is empty"):
        store.load()
    store.jobs_path.write_text('{"version": 1, "jobs": [')
    with pytest.raises(CronError, match=r"jobs\.json: not valid JSON"):
        store.load()
    bad = {"version": 1, "jobs": [job(Schedule(cron="0 8 * * *")).model_dump(mode="json")]}
    bad["jobs"][0]["schedule"] = {"cron": "0 25 * * *"}
    store.jobs_path.write_text(json.dumps(bad))
    with pytest.raises(CronError) as caught:
        store.load()
    assert "jobs.0.schedule" in str(caught.value) and "'0 25 * * *'" in str(caught.value)
    assert "\n" not in str(caught.value)
    # A failed change writes nothing.
    store.jobs_path.write_text(json.dumps({"version": 1, "jobs": []}))
    with pytest.raises(CronError):
        add_job(store, lambda jobs: new_job(jobs, name="x", message="m", deliver_to="t:1",
                                            timezone="UTC", cron="nope", now=NOW))  # fmt: skip
    assert store.load().jobs == []


def test_state_file_is_separate_and_tolerates_damage(tmp_path: Path) -> None:
    store = CronStore(tmp_path / "cron")
    state = StateFile()
    state.of("j1").consecutive_errors = 2
    store.save_state(state)
    assert store.load_state().jobs["j1"].consecutive_errors == 2
    store.state_path.write_text("{torn")
    assert store.load_state() == StateFile()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression '61 * * * *'"),
        ({"cron": "0 8 * *"}, "has 4 fields; it needs 5"),
        ({"cron": "0 8 * * 8"}, "invalid day of week '8'"),
        ({"at": "2026-03-20T10:00"}, "is in the past"),
        ({"at": "tomorrow 9am"}, "not an ISO date-time"),
        ({"every": 0}, "at least 1"),
        ({"every": 60, "cron": "* * * * *"}, "exactly one schedule"),
        ({}, "exactly one schedule"),
        ({"every": 60, "timezone": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"every": 60, "deliver_to": "nochannel"}, "not a session key"),
    ],
)
def test_bad_schedules_get_a_clear_error(kwargs: dict, message: str) -> None:
    args = {"name": "x", "message": "m", "deliver_to": "telegram:1", "timezone": "UTC", "now": NOW}
    args.update(kwargs)
    with pytest.raises(CronError, match=message.replace("*", r"\*")):
        new_job(JobsFile(), **args)


def test_crontab_weekdays_mean_what_crontab_means() -> None:
    # APScheduler 3 counts weekdays from Monday = 0; crontab from Sunday = 0 (or 7).
    days = [t.strftime("%a") for t in cron_times("0 8 * * 1-5", NOW, 7)]
    assert days == ["Mon", "Tue", "Wed", "Thu", "Fri", "Mon", "Tue"]
    assert {t.strftime("%a") for t in cron_times("0 9 * * 0", NOW, 3)} == {"Sun"}
    assert {t.strftime("%a") for t in cron_times("0 9 * * 7", NOW, 3)} == {"Sun"}
    assert {t.strftime("%a") for t in cron_times("0 9 * * sat,sun", NOW, 4)} == {"Sat", "Sun"}
    # Day of month and day of week both restricted: either matches, as in cron.
    april = datetime(2026, 4, 1, tzinfo=UTC)
    fired = [t.date().isoformat() for t in cron_times("0 9 13 * 5", april, 4, tz="UTC")]
    assert fired == ["2026-04-03", "2026-04-10", "2026-04-13", "2026-04-17"]


def test_cron_is_dst_correct_in_the_jobs_zone() -> None:
    # Clocks go forward in Berlin on 2026-03-29: 08:30 stays 08:30 local, the UTC hour moves.
    times = cron_times("30 8 * * *", datetime(2026, 3, 27, 12, tzinfo=BERLIN), 4)
    assert wall(times) == [
        "28 08:30", "29 08:30", "30 08:30", "31 08:30",
    ]  # fmt: skip
    assert [t.astimezone(UTC).hour for t in times] == [7, 6, 6, 6]
    # 02:30 does not exist that night: it runs once, an hour later by the wall clock.
    times = cron_times("30 2 * * *", datetime(2026, 3, 28, 12, tzinfo=BERLIN), 2)
    assert wall(times) == ["29 03:30", "30 02:30"]
    # 02:30 happens twice on 2026-10-25: a fixed-hour job runs once.
    times = cron_times("30 2 * * *", datetime(2026, 10, 24, 12, tzinfo=BERLIN), 3)
    assert wall(times) == [
        "25 02:30", "26 02:30", "27 02:30",
    ]  # fmt: skip
    # An every-30-minutes job keeps running through the repeated hour.
    start = datetime(2026, 10, 25, 1, 50, tzinfo=BERLIN)
    times = cron_times("*/30 * * * *", start, 5)
    assert [t.astimezone(UTC).strftime("%H:%M") for t in times] == [
        "00:00", "00:30", "01:00", "01:30", "02:00",
    ]  # fmt: skip


def test_every_is_anchored_at_creation_and_never_replays() -> None:
    created = NOW - timedelta(hours=5, seconds=10)
    every = job(Schedule(every=3600), created_at=created)
    nxt = next_fire_time(every, "UTC", NOW)
    assert nxt is not None and NOW < nxt <= NOW + timedelta(hours=1)
    assert (nxt - created).total_seconds() % 3600 == 0
    one_shot = job(Schedule(at=datetime(2026, 3, 20, 9, 0)))  # 09:00 Berlin, past
    assert next_fire_time(one_shot, "UTC", NOW) is None


def test_heartbeat_rules() -> None:
    template = (Path(__file__).parents[1] / "workspace" / "HEARTBEAT.md").read_text()
    assert heartbeat_tasks(template) is None
    assert heartbeat_tasks("# Tasks\n\n- \n- [ ]\n<!-- - not this -->\n") is None
    tasks = heartbeat_tasks(template + "\n- Check the weather\n")
    assert tasks is not None and "Check the weather" in tasks and "<!--" not in tasks
    assert within_hours("08:00-22:00", datetime(2026, 1, 1, 8, 0))
    assert not within_hours("08:00-22:00", datetime(2026, 1, 1, 22, 0))
    assert within_hours("22:00-06:00", datetime(2026, 1, 1, 23, 30))
    assert not within_hours("22:00-06:00", datetime(2026, 1, 1, 12, 0))
    assert within_hours("00:00-24:00", datetime(2026, 1, 1, 23, 59))
    assert is_heartbeat_ok("HEARTBEAT_OK") and is_heartbeat_ok(" **HEARTBEAT_OK**. ")
    assert is_heartbeat_ok("")
    assert not is_heartbeat_ok("It will rain tomorrow, take an umbrella.")


def test_cron_times_around_dst_changes_are_increasing_and_never_doubled() -> None:
    # Every-half-hour in the gap night: 01:30 CET, then straight to 03:00 CEST.
    times = cron_times("*/30 * * * *", datetime(2026, 3, 29, 1, 20, tzinfo=BERLIN), 3)
    assert wall(times) == ["29 01:30", "29 03:00", "29 03:30"]
    # A time given twice that night (02:00 shifted, 03:00 regular) runs once.
    times = cron_times("0,30 2,3 * * *", datetime(2026, 3, 28, 12, tzinfo=BERLIN), 3)
    assert wall(times) == ["29 03:00", "29 03:30", "30 02:00"]
    for expr in ("*/20 * * * *", "15 1-3 * * *", "0 0 1 * *", "30 2 * * 0"):
        for start in (datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 10, 1, tzinfo=UTC)):
            found = cron_times(expr, start, 200, tz="America/New_York")
            assert all(a < b for a, b in itertools.pairwise(found)), expr

"""The people, jobs and health pages through aiohttp's test client over the real app and the
services of an in-process gateway (tests/dashboard_harness.py): every endpoint refuses a
request without the owner's cookie or without the CSRF token, and each action makes the
same write as its `clawgate` command."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from clawgate.agent.usage import TurnUsage
from clawgate.channels.groups import SeenGroups
from clawgate.gateway.cron.models import JobsFile
from clawgate.gateway.ops.logs import log_file_path
from clawgate.kernel.config import (
    CONFIG_ENV,
    AgentConfig,
    ChannelsConfig,
    Config,
    HeartbeatConfig,
    load_config,
)
from clawgate.kernel.secrets import REDACTED
from tests.dashboard_harness import DashboardClient, dashboard_client
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import make_config
from tests.telegram_world import telegram_config

SECRET = "hunter2-correct-horse-battery"
GROUP = "-100777"

CONFIG_TEXT = """\
# my clawgate setup
workspace = "{workspace}"
data_dir = "{data_dir}"

[agent]
model = "openai/fake-model"
api_base = "{api_base}"
api_key = "{secret}"

[channels.telegram]
# groups the bot answers in
group_allow = [-100500]  # the family chat
"""

GETS = [
    "/people",
    "/people/channels.json",
    "/jobs",
    "/spend",
    "/health",
    "/health/doctor",
    "/health/logs.json",
]
POSTS = [
    "/people/pairing/approve",
    "/people/pairing/deny",
    "/people/approved/promote",
    "/people/approved/demote",
    "/people/approved/revoke",
    "/people/groups/allow",
    "/people/groups/deny",
    "/jobs/add",
    "/jobs/j1/enable",
    "/jobs/j1/disable",
    "/jobs/j1/run",
    "/jobs/j1/delete",
]


@contextlib.asynccontextmanager
async def ops_client(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch, **overrides: Any
) -> AsyncIterator[DashboardClient]:
    """Logged in to the dashboard of a gateway running its scheduler, started from a config
    file with comments (the one `groups allow` edits), with a secret the redactor knows."""
    agent = agent_config.model_copy(update={"api_key": SecretStr(SECRET), "max_retries": 0})
    overrides.setdefault("heartbeat", HeartbeatConfig(enabled=False))
    config = make_config(tmp_path, agent, **overrides)
    path = tmp_path / "config.toml"
    path.write_text(
        CONFIG_TEXT.format(
            workspace=config.workspace,
            data_dir=config.data_dir,
            api_base=agent.api_base,
            secret=SECRET,
        ),
        encoding="utf-8",
    )
    monkeypatch.setenv(CONFIG_ENV, str(path))
    async with dashboard_client(
        config, scheduler=True, scheduler_options={"poll_interval": 0.05}
    ) as client:
        yield client


@pytest.fixture
async def ops(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DashboardClient]:
    async with ops_client(tmp_path, agent_config, monkeypatch) as client:
        yield client


def pairing_file(config: Config) -> dict[str, Any]:
    return json.loads((config.data_dir / "pairing.json").read_text(encoding="utf-8"))


def notice_of(response: Any) -> str:
    location = response.headers["Location"]
    from yarl import URL

    query = URL(location).query
    return query.get("notice") or "error: " + query.get("error", "")


async def test_every_endpoint_refuses_a_request_without_the_owners_cookie(
    ops: DashboardClient,
) -> None:
    code = ops.services.pairing.request("telegram", "42", "ann")
    stranger = await ops.anonymous()
    try:
        for path in GETS:
            response = await stranger.get(
                path, headers={"Accept": "application/json"}, allow_redirects=False
            )
            assert response.status == 401, path
        for path in POSTS:
            response = await stranger.post(path, data={"code": code}, allow_redirects=False)
            assert response.status in (401, 403), path
        # A browser asking for a page is sent to the login page instead.
        page = await stranger.get("/people", headers={"Accept": "text/html"}, allow_redirects=False)
        assert (page.status, page.headers["Location"]) == (303, "/login")
    finally:
        await stranger.close()
    assert [p.code for p in ops.services.pairing.pending()] == [code]


async def test_every_state_change_refuses_a_request_without_the_csrf_token(
    ops: DashboardClient,
) -> None:
    code = ops.services.pairing.request("telegram", "42", "ann")
    assert code is not None
    for path in POSTS:
        response = await ops.post_form(path, {"code": code}, csrf=False)
        assert response.status == 403, path
    assert [p.code for p in ops.services.pairing.pending()] == [code]
    assert not (ops.workspace / "cron" / "jobs.json").exists()


async def test_approve_deny_promote_and_revoke_write_pairing_json(ops: DashboardClient) -> None:
    store = ops.services.pairing
    first = store.request("telegram", "42", "ann") or ""
    second = store.request("telegram", "43", None) or ""
    third = store.request("discord", "44", "bob") or ""

    page = await ops.text("/people")
    assert first in page and "@ann" in page and "has no owner yet" in page

    response = await ops.post_form("/people/pairing/approve", {"code": first, "role": "allowed"})
    assert response.status == 303
    assert notice_of(response) == (
        "approved telegram user 42 (@ann) as an allowed user; they can chat now"
    )
    [approval] = pairing_file(ops.config)["approved"]
    assert (approval["user_id"], approval["owner"]) == ("42", False)

    response = await ops.post_form("/people/pairing/approve", {"code": third, "role": "owner"})
    assert notice_of(response).startswith("approved discord user 44 (@bob) as an owner")
    assert store.lookup("discord", "44").owner  # type: ignore[union-attr]

    response = await ops.post_form("/people/pairing/deny", {"code": second})
    assert notice_of(response) == f"denied telegram user 43 (code {second})"
    assert pairing_file(ops.config)["pending"] == []

    response = await ops.post_form("/people/pairing/approve", {"code": second})
    assert notice_of(response).startswith(f"error: no pending pairing with code {second}")

    response = await ops.post_form(
        "/people/approved/promote", {"channel": "telegram", "user_id": "42"}
    )
    assert notice_of(response) == "telegram user 42 (@ann) is now an owner"
    assert store.lookup("telegram", "42").owner  # type: ignore[union-attr]

    response = await ops.post_form(
        "/people/approved/revoke", {"channel": "telegram", "user_id": "42"}
    )
    assert notice_of(response) == "revoked telegram user 42 (@ann)"
    assert [a["user_id"] for a in pairing_file(ops.config)["approved"]] == ["44"]

    page = await ops.text("/people")
    assert 'data-user="discord:44"' in page and 'data-user="telegram:42"' not in page


async def test_the_first_approval_without_a_role_makes_the_owner_as_the_cli_does(
    ops: DashboardClient,
) -> None:
    code = ops.services.pairing.request("telegram", "42", None) or ""
    response = await ops.post_form("/people/pairing/approve", {"code": code, "role": "auto"})
    assert notice_of(response) == "approved telegram user 42 as an owner; they can chat now"


async def test_allowing_a_seen_group_edits_the_config_keeping_its_comments(
    ops: DashboardClient,
) -> None:
    SeenGroups(ops.config.data_dir / "groups.json").note(
        "telegram", GROUP, "Book club", "3003", "Ann"
    )
    page = await ops.text("/people")
    assert "Book club" in page and 'name="allow"' in page

    response = await ops.post_form(
        "/people/groups/allow", {"channel": "telegram", "group_id": GROUP}
    )
    assert notice_of(response) == (
        f"added {GROUP} to [channels.telegram] group_allow; restart the gateway to apply it"
    )
    written = (ops.config.data_dir.parent / "config.toml").read_text(encoding="utf-8")
    assert "# my clawgate setup" in written and "# groups the bot answers in" in written
    assert f"group_allow = [-100500, {GROUP}]  # the family chat" in written
    assert "(after a restart)" in await ops.text("/people")

    response = await ops.post_form(
        "/people/groups/deny", {"channel": "telegram", "group_id": GROUP}
    )
    assert notice_of(response).startswith(f"removed {GROUP} from [channels.telegram]")
    written = (ops.config.data_dir.parent / "config.toml").read_text(encoding="utf-8")
    assert "group_allow = [-100500]  # the family chat" in written
    assert SeenGroups(ops.config.data_dir / "groups.json").seen() == []


async def test_the_heartbeat_is_set_from_the_jobs_page_through_the_config_editor(
    ops: DashboardClient,
) -> None:
    await ops.harness.ask("hi")  # a known chat to report to
    page = await ops.text("/jobs")
    assert '<option value="test:1">' in page and 'id="heartbeat-form"' in page
    response = await ops.post_form(
        "/jobs/heartbeat",
        {
            "heartbeat.enabled": "on",
            "heartbeat.interval_minutes": "90",
            "heartbeat.active_hours": "09:00-18:00",
            "heartbeat.deliver_to": "test:1",
        },
    )
    assert notice_of(response).startswith("heartbeat saved")
    written = load_config(ops.config.data_dir.parent / "config.toml", environ={})
    assert written.heartbeat.enabled and written.heartbeat.interval_minutes == 90
    assert written.heartbeat.deliver_to == "test:1"
    text = (ops.config.data_dir.parent / "config.toml").read_text(encoding="utf-8")
    assert "# my clawgate setup" in text
    refused = await ops.post_form(
        "/jobs/heartbeat", {"heartbeat.interval_minutes": "0", "heartbeat.active_hours": "x"}
    )
    assert notice_of(refused).startswith("error: heartbeat not saved")


async def test_cron_add_disable_enable_run_now_and_delete(
    ops: DashboardClient, fake_llm: FakeLLM
) -> None:
    store = ops.services.scheduler.store  # type: ignore[union-attr]
    response = await ops.post_form(
        "/jobs/add",
        {"name": "tea", "message": "Remind me to drink tea", "kind": "every",
         "schedule": "3600", "to": "test:1"},
    )  # fmt: skip
    assert notice_of(response).startswith("added ")
    [job] = store.load().jobs
    assert (job.name, job.schedule.every, job.deliver_to) == ("tea", 3600, "test:1")
    assert ops.services.scheduler.next_run(job.id) is not None  # type: ignore[union-attr]

    bad = await ops.post_form(
        "/jobs/add",
        {"name": "walk", "message": "Go for a walk", "kind": "cron", "schedule": "nope"},
    )
    page = await bad.text()
    # Refused, the form comes back as typed, the error above it.
    assert bad.status == 400 and 'class="error"' in page
    assert 'value="walk"' in page and ">Go for a walk</textarea>" in page
    assert 'value="nope"' in page and '<option value="cron" selected>' in page
    assert len(store.load().jobs) == 1
    # The target picker defaults to the owner's chat (the known chats: the heartbeat test).
    assert '<select name="to" id="job-target">\n      <option value="">the owner' in page

    await ops.post_form(f"/jobs/{job.id}/disable")
    assert not store.load().jobs[0].enabled
    assert "Enable</button>" in await ops.text("/jobs")
    await ops.post_form(f"/jobs/{job.id}/enable")
    assert store.load().jobs[0].enabled

    fake_llm.script(text("Time for tea."))
    response = await ops.post_form(f"/jobs/{job.id}/run")
    assert notice_of(response) == f"ran {job.id}: Time for tea."
    delivered = await ops.harness.channel.next_reply("1")
    assert delivered.text.endswith("Time for tea.")
    assert store.load_state().jobs[job.id].runs == 1
    page = await ops.text("/jobs")
    assert ">ok</span>" in page

    response = await ops.post_form(f"/jobs/{job.id}/delete")
    assert notice_of(response) == f"removed {job.id} (tea)"
    assert store.load() == JobsFile()
    response = await ops.post_form(f"/jobs/{job.id}/run")
    assert notice_of(response) == f"error: job {job.id} failed: no job with id {job.id!r}"


async def test_the_heartbeat_shows_its_schedule_and_last_tick(
    tmp_path: Path, agent_config: AgentConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    heartbeat = HeartbeatConfig(
        enabled=True, deliver_to="test:1", interval_minutes=45, active_hours="00:00-00:00"
    )
    async with ops_client(tmp_path, agent_config, monkeypatch, heartbeat=heartbeat) as ops:
        (ops.workspace / "HEARTBEAT.md").write_text("# Heartbeat\n", encoding="utf-8")
        page = await ops.text("/jobs")
        assert "Every 45 min between 00:00-00:00, reporting to test:1." in page
        assert "has nothing to act on" in page and "none since the gateway started" in page
        assert await ops.services.scheduler.heartbeat.tick() == "no-tasks"  # type: ignore[union-attr]
        assert "(no-tasks)" in await ops.text("/jobs")


async def test_a_broken_jobs_file_is_reported_with_the_jobs_still_scheduled(
    ops: DashboardClient,
) -> None:
    await ops.post_form(
        "/jobs/add",
        {"name": "tea", "message": "tea", "kind": "cron", "schedule": "0 16 * * *", "to": "test:1"},
    )
    (ops.workspace / "cron" / "jobs.json").write_text("{", encoding="utf-8")
    page = await ops.text("/jobs")
    assert "not valid JSON" in page and "(the scheduler keeps the jobs it loaded before)" in page
    assert "<strong>tea</strong>" in page


async def test_the_health_page_runs_doctor_on_demand(ops: DashboardClient) -> None:
    page = await ops.text("/health")
    assert 'href="/health/doctor#doctor"' in page and "clawgate " in page and "up 0 h" in page
    checked = await ops.text("/health/doctor")
    assert f"config loads: {ops.config.data_dir.parent / 'config.toml'}" in checked
    assert f"workspace {ops.workspace} is writable" in checked
    assert "(api key set)" in checked and SECRET not in checked
    assert "answered" not in checked  # offline: the model is not asked
    online = await ops.text("/health/doctor?online=1")
    assert "model: openai/fake-model answered" in online


async def test_the_log_tail_redacts_a_configured_secret(ops: DashboardClient) -> None:
    log = log_file_path(ops.config.data_dir)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"early line\nkey was {SECRET.upper()} then\nhalf a li", encoding="utf-8")
    response = await ops.get("/health/logs.json")
    body = await response.json()
    assert body["lines"] == ["early line", f"key was {REDACTED} then"]
    with log.open("a", encoding="utf-8") as handle:
        handle.write("ne\nnext\n")
    response = await ops.get(f"/health/logs.json?offset={body['offset']}")
    assert (await response.json())["lines"] == ["half a line", "next"]


async def test_usage_is_summed_per_day_and_per_session(ops: DashboardClient) -> None:
    usage = ops.services.runtime.loop.usage
    turn = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    usage.record("telegram:1", turn)
    turn.update(prompt_tokens=25, completion_tokens=5, total_tokens=30)  # a second model call
    usage.record("telegram:1", turn)
    usage.record("telegram:1", {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})
    usage.record("cron:j1", {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
    page = await ops.text("/health")
    today = date.today().isoformat()
    assert f"<tr><td>{today}</td>" in page
    assert (
        '<tr><td>telegram:1</td><td class="num">26</td><td class="num">6</td>'
        '<td class="num">32</td></tr>'
    ) in page
    assert '<td class="num">39</td>' in page  # the day: 32 + 7


def test_turn_usage_counts_each_model_call_once_across_days() -> None:
    days = iter([date(2026, 1, 1), date(2026, 1, 1), date(2026, 1, 2)])
    usage = TurnUsage(today=lambda: next(days))
    turn = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    usage.record("s", turn)
    turn.update(prompt_tokens=9, completion_tokens=2, total_tokens=11)
    usage.record("s", turn)
    usage.record("s", {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1})
    assert usage.totals() == {
        (date(2026, 1, 1), "s"): {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
        (date(2026, 1, 2), "s"): {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
    }
    assert usage.last("s") == {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}


async def test_the_channel_table_is_served_for_the_live_poll(ops: DashboardClient) -> None:
    response = await ops.get("/people/channels.json")
    channels = (await response.json())["channels"]
    assert channels["test"]["state"] == "running"
    assert channels["test"]["restarts"] == 0


async def test_approving_on_the_people_page_welcomes_the_person(
    tmp_path: Path,
    agent_config: AgentConfig,
    monkeypatch: pytest.MonkeyPatch,
    telegram: FakeTelegram,
) -> None:
    """Issue #35: the dashboard's approve said nothing to the person, unlike the CLI's."""
    channels = ChannelsConfig(telegram=telegram_config(telegram, allow_from=[]))
    async with ops_client(tmp_path, agent_config, monkeypatch, channels=channels) as ops:
        code = ops.services.pairing.request("telegram", "4242", "newcomer") or ""
        response = await ops.post_form("/people/pairing/approve", {"code": code, "role": "owner"})
        assert notice_of(response).endswith("(welcome sent)")
        told = await telegram.next_message(4242)
        assert told["text"] == "You are now the owner of this assistant. Send your message again."

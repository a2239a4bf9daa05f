"""`clawgate cron ...` in-process through typer's CliRunner (run in a thread where the test's
event loop must keep serving the fake model or the gateway)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from clawgate.agent.session import Message, SessionStore, load_session
from clawgate.gateway.cli import app
from clawgate.gateway.cron.models import Schedule
from clawgate.gateway.cron.store import CronStore
from clawgate.gateway.daemon.lock import InstanceLock
from clawgate.kernel.bus import ChatFacts, Trust
from clawgate.kernel.config import AgentConfig, Config
from tests.fakes.llm import FakeLLM, text
from tests.harness import wait_until
from tests.scheduler_harness import SchedulerHarness, a_job, make, write_jobs


def config_file(config: Config) -> Path:
    agent = config.agent
    lines = [
        f"workspace = {json.dumps(str(config.workspace))}",
        f"data_dir = {json.dumps(str(config.data_dir))}",
        "[agent]",
        f"model = {json.dumps(agent.model)}",
        f"api_base = {json.dumps(agent.api_base)}",
        'api_key = "sk-test-secret"',
        "max_retries = 0",
        "[heartbeat]",
        "enabled = false",
    ]
    path = config.data_dir / "cron-test.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def cron(config: Config, *args: str, extra: str = "") -> Result:
    path = config_file(config)
    if extra:
        path.write_text(path.read_text() + extra)
    return CliRunner().invoke(app, ["--config", str(path), "cron", *args])


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig) -> Config:
    return make(tmp_path, agent_config)


def test_add_list_switch_remove_and_clear_errors(config: Config) -> None:
    bad = cron(config, "add", "--name", "x", "--message", "m", "--cron", "61 * * * *")
    assert bad.exit_code == 2
    assert bad.stderr.strip().splitlines() == [
        "clawgate: invalid cron expression '61 * * * *': invalid minute '61' (use 0-59)"
    ]
    both = cron(
        config, "add", "--name", "x", "--message", "m", "--every", "5", "--cron", "* * * * *"
    )
    assert both.exit_code == 2 and "exactly one schedule" in both.stderr
    past = cron(config, "add", "--name", "x", "--message", "m", "--at", "2020-01-01T09:00")
    assert past.exit_code == 2 and "is in the past" in past.stderr
    zone = cron(config, "add", "--name", "x", "--message", "m", "--every", "5", "--tz", "Nowhere")
    assert zone.exit_code == 2 and "unknown time zone 'Nowhere'" in zone.stderr

    added = cron(
        config, "add", "--name", "agenda", "--message", "Send my agenda",
        "--cron", "0 8 * * 1-5", "--tz", "Europe/Berlin", "--to", "telegram:123",
    )  # fmt: skip
    assert added.exit_code == 0, added.stderr
    job_id = added.stdout.strip()
    listed = json.loads(cron(config, "list", "--json").stdout)
    assert [(j["id"], j["schedule"]["cron"], j["timezone"], j["deliver_to"], j["enabled"])
            for j in listed] == [(job_id, "0 8 * * 1-5", "Europe/Berlin", "telegram:123", True)]  # fmt: skip
    assert listed[0]["state"] is None  # no gateway has run it yet

    assert cron(config, "disable", job_id).exit_code == 0
    assert "disabled" in cron(config, "list").stdout
    assert cron(config, "enable", job_id).exit_code == 0
    assert cron(config, "remove", job_id).stdout.strip() == f"removed {job_id} (agenda)"
    missing = cron(config, "remove", job_id)
    assert missing.exit_code == 1 and f"no job with id '{job_id}'" in missing.stderr
    assert "no scheduled jobs" in cron(config, "list").stdout


OWNER_RULES = '[channels.telegram]\nenabled = true\ntoken = "123:abc"\nallow_from = ["4242", "5005"]\nowners = ["4242"]\n'


def said_in(config: Config, key: str, facts: ChatFacts) -> None:
    """A chat that wrote to the bot: its session recorded the platform facts."""
    asyncio.run(_record(SessionStore(config.workspace / "sessions"), key, facts))


async def _record(store: SessionStore, key: str, facts: ChatFacts) -> None:
    session = await store.get(key)
    store.update_state(session, trust=Trust.ALLOWED, chat=facts)
    store.append(session, Message(role="user", content="hello"))
    await store.flush()


def test_add_without_a_target_goes_to_the_owners_only_private_chat(config: Config) -> None:
    # Issue 35 item 5: without --to a job went to the terminal, which no one has open.
    refused = cron(config, "add", "--name", "tea", "--message", "m", "--every", "3600",
                   extra=OWNER_RULES)  # fmt: skip
    assert refused.exit_code == 2, refused.stdout
    assert "no private chat of the owner is known yet (write to the bot first)" in refused.stderr
    assert "--to CHANNEL:CHAT_ID; known chats: none" in refused.stderr
    assert not (config.workspace / "cron" / "jobs.json").exists()

    said_in(config, "telegram:5005", ChatFacts(private=True, user_id="5005"))  # allowed, not owner
    said_in(config, "telegram:4242", ChatFacts(private=True, user_id="4242"))
    added = cron(config, "add", "--name", "tea", "--message", "m", "--every", "3600",
                 extra=OWNER_RULES)  # fmt: skip
    assert added.exit_code == 0, added.stderr
    assert added.stderr.strip() == "delivers to telegram:4242"
    [job] = json.loads(cron(config, "list", "--json", extra=OWNER_RULES).stdout)
    assert (job["deliver_to"], job["unreachable"]) == ("telegram:4242", None)

    said_in(config, "telegram:7777", ChatFacts(private=True, user_id="7777"))  # no longer served
    terminal = cron(config, "add", "--name", "t", "--message", "m", "--every", "60",
                    "--to", "cli:default", extra=OWNER_RULES)  # fmt: skip
    assert "warning: it reaches no one now: the terminal" in terminal.stderr
    gone = cron(config, "add", "--name", "g", "--message", "m", "--every", "60",
                "--to", "telegram:7777", extra=OWNER_RULES)  # fmt: skip
    assert gone.exit_code == 0, gone.stderr
    listed = cron(config, "list", extra=OWNER_RULES).stdout.splitlines()
    assert [line.split("\t")[-1] for line in listed if "UNREACHABLE" in line] == [
        "UNREACHABLE (the terminal: reached only while `clawgate agent` is open)",
        "UNREACHABLE (the access rules no longer serve this chat)",
    ]
    # Without telegram enabled, its chats reach no one either.
    off = cron(config, "list").stdout
    assert off.count("UNREACHABLE (the telegram channel is not enabled)") == 2


def test_add_refuses_when_the_owner_has_several_private_chats(config: Config) -> None:
    said_in(config, "telegram:4242", ChatFacts(private=True, user_id="4242"))
    said_in(config, "telegram:-100", ChatFacts(private=False, user_id="4242", group_ids=("-100",)))
    rules = OWNER_RULES + '[channels.discord]\nenabled = true\ntoken = "d"\nowners = ["4242"]\n'
    said_in(config, "discord:99", ChatFacts(private=True, user_id="4242"))
    refused = cron(config, "add", "--name", "x", "--message", "m", "--every", "60", extra=rules)
    assert refused.exit_code == 2
    assert "the owner has several private chats: name the target with --to" in refused.stderr
    for chat in ("discord:99 (owner, private)", "telegram:-100 (not served, group)",
                 "telegram:4242 (owner, private)"):  # fmt: skip
        assert chat in refused.stderr


async def test_cli_adds_while_the_gateway_writes_lose_nothing(
    config: Config, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = lambda body: text("ok")
    async with SchedulerHarness(config) as running:
        await running.ask("hi")  # the first model call imports litellm, blocking the loop
        now = datetime.now(UTC)
        # The gateway keeps writing: state.json after each run, jobs.json to disable "once".
        write_jobs(
            running.store,
            a_job("every", schedule=Schedule(every=1), created_at=now),
            a_job("once", schedule=Schedule(at=now + timedelta(seconds=1))),
        )
        added: list[str] = []

        def add_many() -> None:
            deadline = time.monotonic() + 20
            for n in itertools.count():
                assert time.monotonic() < deadline, "the one-shot never ran"
                result = cron(
                    config, "add", "--name", f"n{n}", "--message", "m", "--every", "3600",
                    "--to", "cli:default",
                )  # fmt: skip
                assert result.exit_code == 0, result.stderr
                added.append(result.stdout.strip())
                if n >= 10 and not CronStore(config.workspace / "cron").load().get("once").enabled:
                    return

        await asyncio.to_thread(add_many)
        jobs = {job.id: job for job in running.store.load().jobs}
        assert set(added) | {"every", "once"} == set(jobs)
        assert not jobs["once"].enabled  # the gateway's own write landed too
        await wait_until(lambda: set(running.scheduler.jobs) == set(jobs), timeout=5)
        assert all(running.scheduler.next_run(job_id) for job_id in added)


async def test_run_goes_through_the_running_gateway(config: Config, fake_llm: FakeLLM) -> None:
    fake_llm.handler = lambda body: text("Bank reminder sent.")
    lock = InstanceLock(config.data_dir)
    lock.acquire()  # what a running gateway holds
    try:
        async with SchedulerHarness(config) as running:
            write_jobs(running.store, a_job("bank", message="Remind me to call the bank"))
            await wait_until(lambda: "bank" in running.scheduler.jobs, timeout=5)
            result = await asyncio.to_thread(cron, config, "run", "bank", "--timeout", "20")
            assert result.exit_code == 0, result.stderr
            assert result.stdout.strip() == "Bank reminder sent."
            assert "asked the running gateway" in result.stderr
            assert (await running.channel.next_reply("1")).text == "Bank reminder sent."
            assert running.scheduler.state.jobs["bank"].last_status == "ok"
            assert list(running.store.requests_dir.iterdir()) == []
    finally:
        lock.release()


async def test_run_without_a_gateway_runs_here(config: Config, fake_llm: FakeLLM) -> None:
    fake_llm.handler = lambda body: text("Here is your agenda.")
    write_jobs(CronStore(config.workspace / "cron"), a_job("agenda", deliver_to="cli:default"))
    result = await asyncio.to_thread(cron, config, "run", "agenda")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "Here is your agenda."
    assert "not sent: no 'cli' channel is enabled" in result.stderr
    path = config.workspace / "sessions" / "cli_default.jsonl"
    contents = [m.content for m in load_session(path, "cli:default").messages]
    assert contents == ["[scheduled: job agenda] Here is your agenda."]
    missing = await asyncio.to_thread(cron, config, "run", "nope")
    assert missing.exit_code == 1 and "no job with id 'nope'" in missing.stderr

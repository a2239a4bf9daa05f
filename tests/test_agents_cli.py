"""`--agent NAME` on the workspace commands, `clawgate agents`, `onboard --agent`, and the
terminal's requests naming their agent: each command acts on the named agent's workspace
and data only, and a config without `[agents]` behaves as before."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import Message, SessionStore
from clawgate.channels.groups import SeenGroups
from clawgate.channels.pairing import PairingStore
from clawgate.gateway.cli import app
from clawgate.gateway.daemon.control import ControlChannel, ControlClient
from clawgate.gateway.ops.status_file import StatusWriter, read_status
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import MessageBus, OutboundMessage
from clawgate.kernel.config import load_config
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.process import (
    ClawgateProcess,
    fake_model,
    fake_telegram,
    run_clawgate,
    start_clawgate,
    toml_value,
    write_config,
)
from tests.pty_terminal import Terminal

TWO_AGENTS = """\
# the household assistant
workspace = {ws}
data_dir = {data}

[agent]
model = "openai/main-model"   # the everyday model

[memory]
embedding_model = "none"

[agents.work]
model = "openai/work-model"
bindings = [{{ channel = "telegram", chat = "-100123" }}]
share_memory_from = ["main"]
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        TWO_AGENTS.format(ws=toml_value(tmp_path / "ws"), data=toml_value(tmp_path / "data"))
    )
    return tmp_path


def config_path(home: Path) -> Path:
    return home / "config.toml"


def main_ws(home: Path) -> Path:
    return home / "ws"


def work_ws(home: Path) -> Path:
    return home / "data" / "agents" / "work" / "workspace"


def cli(home: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--config", str(config_path(home)), *args])


def test_memory_search_and_show_read_only_the_named_agents_memory(home: Path) -> None:
    MemoryStore(work_ws(home)).replace_memory("# Memory\n- The badge number is 4711\n")
    MemoryStore(main_ws(home)).replace_memory("# Memory\n- Ann likes tea\n")

    work = cli(home, "memory", "search", "badge number", "--json", "--agent", "work")
    assert work.exit_code == 0, work.output
    assert any("4711" in hit["snippet"] for hit in json.loads(work.stdout))
    main = cli(home, "memory", "search", "badge number", "--json")
    assert main.exit_code == 0, main.output
    assert not any("4711" in hit["snippet"] for hit in json.loads(main.stdout))

    assert "4711" in cli(home, "memory", "show", "--agent", "work").stdout
    shown = cli(home, "memory", "show").stdout
    assert "Ann likes tea" in shown and "4711" not in shown
    # The work agent's index lives in its own data_dir, not beside main's.
    index = cli(home, "memory", "status", "--agent", "work").stdout
    assert str(home / "data" / "agents" / "work") in index


def test_cron_add_lands_in_that_agents_jobs_only(home: Path) -> None:
    added = cli(
        home, "cron", "add", "--name", "standup", "--message", "m", "--every", "3600",
        "--to", "cli:default", "--agent", "work",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    jobs = json.loads((work_ws(home) / "cron" / "jobs.json").read_text())
    assert [job["name"] for job in jobs["jobs"]] == ["standup"]
    assert not (main_ws(home) / "cron" / "jobs.json").exists()
    assert "standup" in cli(home, "cron", "list", "--agent", "work").stdout
    assert "no scheduled jobs" in cli(home, "cron", "list").stdout


OWN_BOT = '[agents.fam.channels.telegram]\nenabled = true\ntoken = "333:fam"\n'
SHARED_BOT = '[channels.telegram]\nenabled = true\ntoken = "111:shared"\n'


def add_to_config(home: Path, text: str) -> None:
    path = config_path(home)
    path.write_text(path.read_text() + text)


def test_pairing_approve_writes_the_pairing_file_of_the_agents_own_bot(home: Path) -> None:
    add_to_config(home, OWN_BOT)
    fam_file = home / "data" / "agents" / "fam" / "pairing.json"
    main_file = home / "data" / "pairing.json"
    code = PairingStore(fam_file).request("telegram", "555", "bob")
    assert code is not None

    # main has no such request: the code is unknown there.
    assert cli(home, "pairing", "approve", code, "--allowed").exit_code != 0
    approved = cli(home, "pairing", "approve", code, "--allowed", "--agent", "fam")
    assert approved.exit_code == 0, approved.output
    assert [a.user_id for a in PairingStore(fam_file).approved()] == ["555"]
    assert not main_file.exists() or PairingStore(main_file).approved() == []
    assert "555" in cli(home, "pairing", "approved", "--agent", "fam").stdout
    assert "nobody approved" in cli(home, "pairing", "approved").stdout


def test_pairing_of_an_agent_on_the_shared_bot_is_that_bots(home: Path) -> None:
    add_to_config(home, SHARED_BOT)
    main_file = home / "data" / "pairing.json"
    code = PairingStore(main_file).request("telegram", "556", "cy")
    assert code is not None

    listed = cli(home, "pairing", "list", "--agent", "work")
    assert code in listed.stdout
    approved = cli(home, "pairing", "approve", code, "--allowed", "--agent", "work")
    assert approved.exit_code == 0, approved.output
    assert [a.user_id for a in PairingStore(main_file).approved()] == ["556"]
    assert not (home / "data" / "agents" / "work" / "pairing.json").exists()


async def test_sessions_and_audit_read_the_named_agents_transcripts(home: Path) -> None:
    sessions = SessionStore(work_ws(home) / "sessions")
    session = await sessions.get("telegram:-100123")
    sessions.append(session, Message(role="user", content="for work"))

    listed = cli(home, "sessions", "list", "--agent", "work")
    assert "telegram:-100123" in listed.stdout
    assert "no sessions yet" in cli(home, "sessions", "list").stdout
    shown = cli(home, "sessions", "show", "telegram:-100123", "--agent", "work")
    assert "for work" in shown.stdout
    audit = cli(home, "memory", "audit", "--agent", "work")
    assert audit.exit_code == 0 and "1 transcripts, 1 messages" in audit.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["memory", "show"],
        ["memory", "search", "x"],
        ["cron", "list"],
        ["pairing", "list"],
        ["groups"],
        ["sessions", "list"],
        ["status"],
        ["housekeeping", "--dry-run"],
        ["agent", "-m", "hi"],
    ],
)
def test_an_unknown_agent_is_one_line_naming_the_known_ones(home: Path, command: list[str]) -> None:
    result = cli(home, *command, "--agent", "nope")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["clawgate: unknown agent 'nope' (known: main, work)"]


def test_agents_lists_each_with_workspace_model_and_bindings(home: Path) -> None:
    listed = cli(home, "agents")
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines() == [
        f"main (default): workspace {main_ws(home)}, model openai/main-model, channels none",
        f"work: workspace {work_ws(home)}, model openai/work-model, channels none, "
        "bindings telegram (chat -100123), reads the memory of main",
    ]
    rows = json.loads(cli(home, "agents", "--json").stdout)
    assert [(r["name"], r["default"], r["model"], r["bindings"]) for r in rows] == [
        ("main", True, "openai/main-model", []),
        ("work", False, "openai/work-model", ["telegram (chat -100123)"]),
    ]
    assert rows[1]["workspace"] == str(work_ws(home))
    assert rows[1]["share_memory_from"] == ["main"]


def test_status_shows_agents_from_the_config_then_from_the_gateway(home: Path) -> None:
    stopped = cli(home, "status", "--agent", "work")
    assert stopped.exit_code == 0, stopped.output
    assert "agents (from the config):" in stopped.stdout
    assert "  work: workspace" in stopped.stdout
    assert f"workspace of work: {work_ws(home)}" in stopped.stdout

    StatusWriter(
        home / "data",
        lambda: {
            "channels": {"telegram": {"state": "running"}},
            "agents": [
                {"name": "main", "workspace": str(main_ws(home)), "model": "openai/main-model",
                 "channels": ["telegram", "cli"], "busy_sessions": []},
                {"name": "work", "workspace": str(work_ws(home)), "model": "openai/work-model",
                 "channels": ["telegram@work"], "busy_sessions": ["work/telegram:1"]},
            ],
        },
    ).write_once()  # fmt: skip
    running = cli(home, "status").stdout
    assert "gateway: running" in running
    assert "agents (as the gateway runs them):" in running
    assert "  main (default): workspace" in running and "channels telegram, cli" in running
    assert "  work: workspace" in running and "telegram@work" in running
    assert "turns running: 1 (work/telegram:1)" in running
    assert f"workspace of main: {main_ws(home)}" in running


def test_onboard_agent_adds_a_section_keeping_comments(home: Path) -> None:
    before = config_path(home).read_text()
    added = cli(
        home, "onboard", "--agent", "family", "--yes", "--no-check",
        "--model", "openai/family-model", "--telegram-token", "999:family",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    after = config_path(home).read_text()
    assert after.startswith(before)  # every line and comment kept, the section appended
    assert "# the everyday model" in after
    config = load_config(config_path(home), environ={})
    assert config.agent_names() == ["main", "work", "family"]
    family = config.for_agent("family")
    assert family.agent.model == "openai/family-model"
    assert family.channels.telegram.enabled
    workspace = home / "data" / "agents" / "family" / "workspace"
    assert family.workspace == workspace
    assert (workspace / "AGENTS.md").exists() and (workspace / "sessions").is_dir()
    assert not (main_ws(home) / "AGENTS.md").exists()  # main's workspace is not touched
    assert "Every chat of its own bot (telegram) is its own" in added.stdout
    assert "pairing approve CODE --owner --agent family" in added.stdout
    # Its own Telegram bot cannot take bound chats of the shared one: only Discord is offered.
    assert 'bindings = [{ channel = "discord", guild = "<guild id>" }]' in added.stdout
    assert "999:family" not in added.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("work", "clawgate: agent 'work' already exists in"),
        ("main", "clawgate: agent 'main' already exists in"),
        ("Bad name", "clawgate: 'Bad name' cannot name an agent: use lowercase letters"),
    ],
)
def test_onboard_agent_refuses_a_taken_or_bad_name(home: Path, name: str, message: str) -> None:
    before = config_path(home).read_text()
    result = cli(home, "onboard", "--agent", name, "--yes", "--no-check")
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(message)
    assert config_path(home).read_text() == before


def test_onboard_agent_needs_a_config_first(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["--config", str(tmp_path / "none.toml"), "onboard", "--agent", "x", "--yes"]
    )
    assert result.exit_code == 2
    assert "run `clawgate onboard` first" in result.stderr
    assert not (tmp_path / "none.toml").exists()


def test_a_single_agent_config_behaves_as_before(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    onboard(path, workspace=tmp_path / "ws", data_dir=tmp_path / "data")
    MemoryStore(tmp_path / "ws").replace_memory("# Memory\n- The boiler code is 1234\n")
    runner = CliRunner()
    listed = runner.invoke(app, ["--config", str(path), "agents"])
    assert listed.stdout.splitlines() == [
        f"main (default): workspace {tmp_path / 'ws'}, model (none), channels none"
    ]
    for args in (["memory", "show"], ["memory", "show", "--agent", "main"]):
        shown = runner.invoke(app, ["--config", str(path), *args])
        assert shown.exit_code == 0 and "1234" in shown.stdout
    added = runner.invoke(
        app,
        [
            "--config",
            str(path),
            "cron",
            "add",
            "--name",
            "n",
            "--message",
            "m",
            "--every",
            "60",
            "--to",
            "cli:default",
        ],
    )
    assert added.exit_code == 0, added.output
    assert (tmp_path / "ws" / "cron" / "jobs.json").exists()
    assert not (tmp_path / "data" / "agents").exists()


async def test_the_control_request_carries_the_agent_to_the_bus(tmp_path: Path) -> None:
    bus = MessageBus()
    channel = ControlChannel(bus, tmp_path)
    await channel.start()
    try:
        for agent in ("work", None):
            client = await ControlClient.connect(tmp_path, "default", agent)
            assert client is not None
            try:
                await client.say("hello", f"id-{agent}", "ann")
                message = await asyncio.wait_for(bus.inbound.get(), timeout=10)
            finally:
                await client.close()
            assert (message.channel, message.chat_id, message.text) == ("cli", "default", "hello")
            assert message.agent == agent
    finally:
        await channel.stop()


async def test_a_reply_to_no_message_reaches_only_its_own_agents_terminal(
    tmp_path: Path,
) -> None:
    # Two agents' `cli:default` are two sessions: a notice or file sent to one (no reply_to)
    # must not show in the other agent's terminal of the same name.
    channel = ControlChannel(MessageBus(), tmp_path)  # the default agent is main
    await channel.start()
    work = await ControlClient.connect(tmp_path, "default", "work")
    main = await ControlClient.connect(tmp_path, "default")
    assert work is not None and main is not None
    try:
        for client in (work, main):
            await client.say("hello", f"id-{client.agent}", "ann")
            await asyncio.wait_for(channel.bus.inbound.get(), timeout=10)
        await channel.send(
            OutboundMessage(channel="cli", chat_id="default", text="for work", agent="work")
        )
        await channel.send(
            OutboundMessage(channel="cli", chat_id="default", text="for main", agent="main")
        )
        assert (await asyncio.wait_for(work.next_reply(), timeout=10)).text == "for work"
        assert (await asyncio.wait_for(main.next_reply(), timeout=10)).text == "for main"
    finally:
        await work.close()
        await main.close()
        await channel.stop()


async def test_agent_without_a_gateway_runs_in_the_named_agents_workspace(
    home: Path, fake_llm: FakeLLM
) -> None:
    model = fake_model(fake_llm)
    section = "\n".join(f"{key} = {toml_value(value)}" for key, value in model.items())
    path = config_path(home)
    path.write_text(path.read_text().replace('model = "openai/work-model"', section))
    fake_llm.script(text("Work here."))

    code, stderr = await run_clawgate(
        home, "--config", str(path), "agent", "--agent", "work", "-m", "hi", timeout=90
    )
    assert code == 0, stderr
    session = work_ws(home) / "sessions" / "cli_default.jsonl"
    said = [json.loads(line) for line in session.read_text().splitlines()]
    assert [(r["role"], r["content"]) for r in said if "role" in r] == [
        ("user", "hi"),
        ("assistant", "Work here."),
    ]
    assert not (main_ws(home) / "sessions" / "cli_default.jsonl").exists()
    assert fake_llm.requests[-1]["model"] == "fake-model"


async def test_interactive_onboard_agent_asks_for_its_model_and_own_bot(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    path = write_config(
        tmp_path, agent=fake_model(fake_llm), telegram=fake_telegram(telegram, [1001])
    )
    fake_llm.script(text("ok"))
    term = await Terminal().start(tmp_path, "--config", str(path), "onboard", "--agent", "family")
    try:
        await term.expect(r"Model, as provider/name.*\[openai/fake-model\]: ")
        term.type("openai/family-model")
        await term.expect(r"API base URL.*: ")
        term.type("")  # the inherited endpoint
        await term.expect(r"Replace the API key set now\? \[y/N\]: ")
        term.type("")
        await term.expect(r"model: openai/family-model answered")
        # The main bot is shared unless the agent gets its own.
        await term.expect(r"Its own Telegram bot token.*Enter to share the main bot.*: ")
        term.type("")
        await term.expect(r"Discord bot token.*Enter to skip\): ")
        term.type("")
        await term.expect(r"agents\.family\.model = openai/family-model")
        await term.expect(r"bindings = ")
        assert await term.exit_code() == 0
    finally:
        await term.close()
    config = load_config(path, environ={})
    family = config.for_agent("family")
    assert family.agent.model == "openai/family-model"
    assert family.agent.api_key is not None  # inherited, not written again
    assert "api_key" not in path.read_text().split("[agents.family]")[1]
    assert family.channels.telegram.token == config.channels.telegram.token
    assert fake_llm.requests[-1]["model"] == "family-model"


def test_groups_allow_for_an_agent_follows_the_bot_it_answers_through(home: Path) -> None:
    add_to_config(home, OWN_BOT)
    path = config_path(home)
    assert cli(home, "groups", "allow", "-100999", "--channel", "telegram").exit_code == 0

    # work shares main's bot: the bot's rules let the group in, a binding routes it to work.
    shared = cli(home, "groups", "allow", "-100555", "--channel", "telegram", "--agent", "work")
    assert shared.exit_code == 0, shared.output
    assert shared.stdout.startswith(
        "added -100555 to [channels.telegram] group_allow and bound it to agent work"
    )
    config = load_config(path, environ={})
    assert config.channels.telegram.group_allow == ["-100999", "-100555"]
    assert [b.chat for b in config.agents["work"].bindings] == ["-100123", "-100555"]
    assert config.for_agent("work").channels.telegram.group_allow == ["-100999", "-100555"]
    assert "# the everyday model" in path.read_text()

    # fam has its own bot: its own rules, no binding (its bot's chats are all its own).
    own = cli(home, "groups", "allow", "-100777", "--channel", "telegram", "--agent", "fam")
    assert own.exit_code == 0, own.output
    assert own.stdout.startswith("added -100777 to [agents.fam.channels.telegram] group_allow in")
    config = load_config(path, environ={})
    assert config.channels.telegram.group_allow == ["-100999", "-100555"]
    fam = config.for_agent("fam").channels.telegram.group_allow
    assert fam == ["-100999", "-100555", "-100777"]  # what it inherited stays in its list
    assert config.agents["fam"].bindings == []

    again = cli(home, "groups", "allow", "-100555", "--channel", "telegram", "--agent", "work")
    assert "already in group_allow" in again.stdout


def test_groups_lists_what_the_agents_own_bot_saw(home: Path) -> None:
    add_to_config(home, OWN_BOT)
    SeenGroups(home / "data" / "agents" / "fam" / "groups.json").note(
        "telegram", "-100321", "Cousins", "7", "ann"
    )
    SeenGroups(home / "data" / "groups.json").note("telegram", "-100654", "Book club", "8", "bo")

    fam = cli(home, "groups", "--agent", "fam").stdout
    assert "Cousins" in fam and "Book club" not in fam
    # work shares main's bot: it sees what that bot saw.
    for args in ((), ("--agent", "work")):
        shared = cli(home, "groups", *args).stdout
        assert "Book club" in shared and "Cousins" not in shared


def test_the_gateway_names_what_each_agent_lacks(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        f"workspace = {toml_value(tmp_path / 'ws')}\n"
        f"data_dir = {toml_value(tmp_path / 'data')}\n"
        '[agent]\nmodel = "openai/m"\napi_key = "sk-main"\n'
        '[agents.work]\napi_key_env = "WORK_KEY_UNSET"\n'
        "[agents.work.channels.discord]\nenabled = true\n"
    )
    result = CliRunner().invoke(app, ["--config", str(path), "gateway"], env={})
    assert result.exit_code == 2
    assert result.stderr.splitlines()[1:-1] == [
        "  - agents.work.api_key_env names WORK_KEY_UNSET, which is not set in the environment",
        "  - agents.work.channels.discord is enabled but has no token: set "
        "[agents.work.channels.discord] token",
    ]


async def agent_says(
    home: Path, *args: str, env: dict[str, str], timeout: float = 60
) -> tuple[int, str, str]:
    """`clawgate agent ...` as a child process: (exit code, stdout, stderr)."""
    child = await start_clawgate(home, "--config", str(config_path(home)), "agent", *args, env=env)
    try:
        out, err = await asyncio.wait_for(child.communicate(), timeout)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
    assert child.returncode is not None
    return child.returncode, out.decode(), err.decode()


async def test_agent_option_through_the_running_gateway_reaches_that_agent(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram
) -> None:
    fake_llm.handler = lambda body: text(f"{body['model']} answers")
    write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        telegram=fake_telegram(telegram, [1001]),
        extra='[agents.work]\nmodel = "openai/work-model"\n',
    )
    # The terminal's own config cannot reach the model: only the daemon can answer.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    unreachable = {"CLAWGATE_AGENT__API_BASE": f"http://127.0.0.1:{closed}/v1"}
    work_sessions = tmp_path / "data" / "agents" / "work" / "workspace" / "sessions"
    main_sessions = tmp_path / "workspace" / "sessions"

    async with ClawgateProcess(
        tmp_path, "--config", str(config_path(tmp_path)), "gateway"
    ) as gateway:
        await gateway.wait_for_log("channel telegram ready", 60)
        # What the notice below compares with: the settings in the gateway's status file.
        await wait_until(lambda: "settings" in (read_status(tmp_path / "data") or {}), 60)
        code, out, err = await agent_says(tmp_path, "--agent", "work", "-m", "hi", env=unreachable)
        assert code == 0, err
        assert out.strip() == "work-model answers"
        # Issue 35: said, not silently ignored; and only when the settings do differ.
        [ignored] = [line for line in err.splitlines() if "settings" in line]
        assert "CLAWGATE_* settings differ and are not used" in ignored, err
        code, out, err = await agent_says(tmp_path, "-m", "hello", env={})
        assert code == 0, err
        assert out.strip() == "fake-model answers"
        assert "settings" not in err, err
        code, out, err = await agent_says(tmp_path, "--agent", "nope", "-m", "x", env=unreachable)
        assert code == 2 and "unknown agent 'nope'" in err
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(40) == 0, gateway.stderr

    def said(path: Path) -> list[str]:
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return [r["content"] for r in lines if "role" in r]

    assert said(work_sessions / "cli_default.jsonl") == ["hi", "work-model answers"]
    assert said(main_sessions / "cli_default.jsonl") == ["hello", "fake-model answers"]


def test_doctor_checks_the_named_agents_workspace(home: Path) -> None:
    onboard(config_path(home))  # main's workspace laid down; work's is not
    main = cli(home, "doctor")
    assert f"workspace {main_ws(home)}" in main.stdout
    work = cli(home, "doctor", "--agent", "work")
    assert f"workspace {work_ws(home)} does not exist" in work.stdout
    assert f"no gateway running on {home / 'data'}\n" in work.stdout  # the one gateway's
    unknown = cli(home, "doctor", "--agent", "nope")
    assert unknown.exit_code == 1
    assert "config: unknown agent 'nope' (known: main, work)" in unknown.stdout

"""`clawgate doctor`: each problem found, notes that do not fail, online checks on loopback."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clawgate.gateway.cli import app
from clawgate.gateway.ops.doctor import Finding, diagnose
from clawgate.gateway.ops.online import online_checks, ping_telegram
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.config import load_config
from clawgate.kernel.net import tls_context
from clawgate.kernel.storage import DiskWriter
from tests.fakes.discord import FakeDiscord
from tests.fakes.llm import FakeLLM, error, text
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.process import fake_model, start_clawgate, write_config

API_KEY = "sk-test-secret"  # what tests.process.fake_model configures
DISCORD_TOKEN = "fake-discord-token"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") or name.lower() in {"http_proxy", "https_proxy"}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


def healthy_setup(home: Path, **telegram: object) -> Path:
    """A config with a model and its key, private files, a workspace from the template, a
    data_dir."""
    agent = {"model": "openai/gpt-4o-mini", "api_key": "sk-doctor-test"}
    config = write_config(home, agent=agent, telegram=telegram)
    config.chmod(0o600)
    onboard(config)  # creates the configured workspace, 0700 / 0600
    (home / "data").mkdir(mode=0o700)
    return config


def installed(version: str = "1.80.0") -> Callable[[str], str]:
    """Stands in for importlib.metadata.version."""

    def package_version(name: str) -> str:
        assert name == "litellm"
        return version

    return package_version


def run(config: Path, **kwargs: object) -> list[Finding]:
    kwargs.setdefault("package_version", installed())
    return diagnose(config, environ={}, **kwargs)[1]  # type: ignore[arg-type]


def problems(findings: list[Finding]) -> list[str]:
    return [f.message for f in findings if f.level == "problem"]


def notes(findings: list[Finding]) -> list[str]:
    return [f.message for f in findings if f.level == "note"]


def test_a_healthy_install_has_no_problems(tmp_path: Path) -> None:
    findings = run(healthy_setup(tmp_path, enabled=True, token=TOKEN))
    assert problems(findings) == []
    oks = [f.message for f in findings if f.level == "ok"]
    assert "litellm 1.80.0" in oks
    assert any(m.startswith("model openai/gpt-4o-mini") for m in oks)
    assert "channels.telegram: enabled, token set" in oks
    assert any("no gateway running" in m for m in oks)
    assert not list(tmp_path.rglob(".clawgate-doctor-*"))  # the write probe cleaned up


def test_an_invalid_config_is_one_problem_line_and_the_rest_still_runs(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[agent]\nmodle = "x"\n', encoding="utf-8")
    config.chmod(0o600)
    findings = run(config)
    assert problems(findings) == [
        f"config: {config}: unknown key 'agent.modle' (did you mean 'agent.model'?)"
    ]
    assert "litellm 1.80.0" in [f.message for f in findings]


@pytest.mark.parametrize(
    ("opened", "label"),
    [
        (["config.toml"], "config file"),
        (["data"], "data_dir"),
        (["data", "data/pairing.json"], "data_dir"),
        (["data", "data/status.json"], "data_dir"),
        (["workspace", "workspace/sessions"], "workspace data"),
        (
            ["workspace", "workspace/sessions", "workspace/sessions/telegram_1.jsonl"],
            "workspace data",
        ),
        (["workspace", "workspace/memory", "workspace/memory/MEMORY.md"], "workspace data"),
    ],
)
def test_files_open_to_group_or_others_are_problems(
    tmp_path: Path, opened: list[str], label: str
) -> None:
    config = healthy_setup(tmp_path)
    paths = [tmp_path / relative for relative in opened]
    for path in paths:
        if not path.exists():
            path.write_text("{}", encoding="utf-8")
        path.chmod(0o755 if path.is_dir() else 0o644)
    [found] = problems(run(config))
    # chmod -R on the topmost checked path fixes it all (the workspace root is not checked).
    top = paths[1] if label == "workspace data" else paths[0]
    assert found.startswith(f"{label}: open to group/others: ")
    assert f"{paths[-1]} (0" in found
    assert found.endswith(f"fix: chmod -R go-rwx {top}")


def test_open_modes_inside_a_private_folder_are_only_a_note(tmp_path: Path) -> None:
    # What a channel's plain mkdir leaves: 0755 folders in the 0700 data_dir and workspace.
    config = healthy_setup(tmp_path)
    journal = tmp_path / "data" / "channels" / "telegram"
    journal.mkdir(parents=True, mode=0o755)
    (journal / "journal.jsonl").write_text("", encoding="utf-8")
    (journal / "journal.jsonl").chmod(0o600)
    sessions = tmp_path / "workspace" / "sessions"
    sessions.chmod(0o755)
    findings = run(config)
    assert problems(findings) == []
    data_note, workspace_note = (m for m in notes(findings) if "open modes inside" in m)
    assert data_note.startswith("data_dir: open modes inside private folders")
    assert f"{tmp_path / 'data' / 'channels'} (0755)" in data_note
    assert f"{sessions} (0755)" in workspace_note


def test_workspace_missing_or_not_writable(tmp_path: Path) -> None:
    config = healthy_setup(tmp_path)
    workspace = tmp_path / "workspace"

    class ReadOnlyDisk(DiskWriter):
        # Root ignores file modes, so the refusal comes through the writer seam.
        def _check(self, path: Path) -> None:
            raise OSError(errno.EROFS, "Read-only file system")

    assert problems(run(config, writer=ReadOnlyDisk())) == [
        f"workspace {workspace} is not writable: Read-only file system"
    ]
    workspace.rename(tmp_path / "elsewhere")
    assert problems(run(config)) == [
        f"workspace {workspace} does not exist: run `clawgate onboard`"
    ]


def test_an_enabled_channel_without_a_token(tmp_path: Path) -> None:
    config = healthy_setup(tmp_path, enabled=True)
    [found] = problems(run(config))
    assert found.startswith("channels.telegram is enabled but has no token")


def test_no_model_configured(tmp_path: Path) -> None:
    config = healthy_setup(tmp_path)
    config.write_text(config.read_text("utf-8").replace('model = "openai/gpt-4o-mini"', ""))
    [found] = problems(run(config))
    assert found.startswith("no model configured")


@pytest.mark.parametrize("version", ["1.82.7", "1.82.8"])
def test_a_compromised_litellm_release_is_a_problem(tmp_path: Path, version: str) -> None:
    config = healthy_setup(tmp_path)
    [found] = problems(run(config, package_version=installed(version)))
    assert found.startswith(f"litellm {version} is installed: a compromised release")


def test_the_real_litellm_metadata_is_read_without_importing_it(tmp_path: Path) -> None:
    import importlib.metadata
    import sys

    config = healthy_setup(tmp_path)
    findings = diagnose(config, environ={})[1]
    assert f"litellm {importlib.metadata.version('litellm')}" in [f.message for f in findings]
    assert problems(findings) == []
    if "litellm" not in sys.modules:  # another test may have imported it already
        assert "litellm" not in sys.modules


def test_notes_do_not_fail(tmp_path: Path) -> None:
    config = healthy_setup(tmp_path)
    media = tmp_path / "workspace" / "media" / "telegram" / "1"
    media.mkdir(parents=True, mode=0o700)
    (media / "photo.jpg").write_bytes(b"x" * 3072)
    (tmp_path / "data" / "status.json").write_text(
        json.dumps({"pid": os.getpid(), "started_at": time.time()}), encoding="utf-8"
    )
    (tmp_path / "data" / "status.json").chmod(0o600)

    findings = run(config)
    assert problems(findings) == []
    found = notes(findings)
    [disk] = [m for m in found if m.startswith("disk use:")]
    assert "media 3.0 KB (kept 90 days)" in disk
    assert "sessions/archive 0 B" in disk and "memory/.versions 0 B" in disk
    assert any(
        f"a gateway is running on {tmp_path / 'data'} (pid {os.getpid()}" in m for m in found
    )
    vector = [f for f in findings if "sqlite-vec" in f.message]
    assert len(vector) == 1 and vector[0].level in {"ok", "note"}
    if vector[0].level == "note":
        assert "keyword and numpy vector search" in vector[0].message


def test_the_command_prints_a_report_and_exits_1_on_problems(tmp_path: Path) -> None:
    config = healthy_setup(tmp_path, enabled=True, token=TOKEN)
    config.chmod(0o644)
    result = CliRunner().invoke(app, ["--config", str(config), "doctor"])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert f"✓ config loads: {config}" in lines
    assert any(line.startswith(f"✗ config file: open to group/others: {config}") for line in lines)
    assert lines[-1] == "1 problem, " + lines[-1].split(", ")[1]
    assert TOKEN not in result.output

    config.chmod(0o600)
    result = CliRunner().invoke(app, ["--config", str(config), "doctor"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("No problems (0 problems,")


# -- online ---------------------------------------------------------------------------------


@pytest.fixture
async def discord() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord(token=DISCORD_TOKEN) as fake:
        yield fake


def online_config(
    home: Path,
    llm: FakeLLM,
    telegram: FakeTelegram,
    discord: FakeDiscord,
    *,
    telegram_token: str = TOKEN,
    discord_token: str = DISCORD_TOKEN,
) -> Path:
    config = write_config(
        home,
        agent=fake_model(llm),
        telegram={
            "enabled": True,
            "token": telegram_token,
            "base_url": telegram.base_url,
            "base_file_url": telegram.base_file_url,
        },
        extra="",
    )
    with config.open("a", encoding="utf-8") as handle:
        handle.write(
            f'[channels.discord]\nenabled = true\ntoken = "{discord_token}"\n'
            f'api_base = "{discord.api_url}"\ngateway_url = "{discord.gateway_url}"\n'
        )
    return config


async def test_online_checks_pass_against_the_fakes(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, discord: FakeDiscord
) -> None:
    fake_llm.script(text("ok"))
    config = load_config(online_config(tmp_path, fake_llm, telegram, discord), environ={})
    findings = await online_checks(config, timeout=10)
    assert [f.level for f in findings] == ["ok", "ok", "ok"], findings
    model, tg, dc = (f.message for f in findings)
    assert model == "model: openai/fake-model answered"
    assert tg == "telegram: getMe ok: @claw_test_bot (id 999000)"
    assert dc.startswith("discord: /users/@me ok: claw (id ")
    [request] = fake_llm.requests
    assert request["max_tokens"] <= 5
    [ledger] = (config.data_dir / "usage").glob("*.jsonl")
    [record] = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert (record["purpose"], record["model"]) == ("check", "openai/fake-model")
    assert telegram.calls["getMe"] == 1
    assert discord.count("GET /users/@me") == 1


async def test_online_checks_fail_when_credentials_are_rejected(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, discord: FakeDiscord
) -> None:
    fake_llm.script(error(401, "Incorrect API key provided"))
    path = online_config(
        tmp_path,
        fake_llm,
        telegram,
        discord,
        telegram_token="654321:wrong-token",
        discord_token="wrong-discord-token",
    )
    config = load_config(path, environ={})
    findings = await online_checks(config, timeout=10)
    assert [f.level for f in findings] == ["problem", "problem", "problem"], findings
    model, tg, dc = (f.message for f in findings)
    assert model.startswith("model: failed: The model provider rejected the API key")
    assert tg == "telegram: failed: the token was rejected (Unauthorized)"
    assert dc == "discord: failed: the token was rejected (HTTP 401)"
    for finding in findings:
        for secret in config.secrets():
            assert secret not in finding.message


async def test_an_unreachable_platform_is_a_problem_with_its_reason(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, discord: FakeDiscord
) -> None:
    fake_llm.script(text("ok"))
    path = online_config(tmp_path, fake_llm, telegram, discord)
    await telegram.stop()
    await discord.stop()
    findings = await online_checks(load_config(path, environ={}), timeout=5)
    assert [f.level for f in findings] == ["ok", "problem", "problem"], findings
    assert findings[1].message.startswith("telegram: failed:")
    assert findings[2].message.startswith("discord: failed: could not reach http://127.0.0.1:")
    assert all(TOKEN not in f.message and DISCORD_TOKEN not in f.message for f in findings)


async def test_doctor_online_command_against_the_fakes(
    tmp_path: Path, fake_llm: FakeLLM, telegram: FakeTelegram, discord: FakeDiscord
) -> None:
    """The real command, in its own process (it pays litellm's import); the failing case
    is covered in-process above."""
    fake_llm.script(text("ok"))
    config = online_config(tmp_path, fake_llm, telegram, discord)
    config.chmod(0o600)
    onboard(config)
    (tmp_path / "data").mkdir(mode=0o700)
    code, stdout = await run_doctor_online(tmp_path, config)
    assert code == 0, stdout
    lines = stdout.splitlines()
    assert "✓ model: openai/fake-model answered" in lines
    assert "✓ telegram: getMe ok: @claw_test_bot (id 999000)" in lines
    assert lines[-1].startswith("No problems")
    for secret in (TOKEN, DISCORD_TOKEN, API_KEY):
        assert secret not in stdout


async def run_doctor_online(home: Path, config: Path) -> tuple[int, str]:
    """`clawgate doctor --online` as a child: (exit code, stdout and stderr). The fakes keep
    serving meanwhile (tests.process.run_clawgate keeps only stderr)."""
    process = await start_clawgate(
        home, "--config", str(config), "doctor", "--online", merge_stderr=True
    )
    stdout, _ = await asyncio.wait_for(process.communicate(), timeout=90)
    assert process.returncode is not None
    return process.returncode, stdout.decode()


def test_doctor_says_when_unknown_prices_are_capped_by_tokens(tmp_path: Path) -> None:
    config = healthy_setup(tmp_path)
    findings = run(config)
    assert "every configured model has a known price" in [f.message for f in findings]

    text = config.read_text().replace("openai/gpt-4o-mini", "openai/my-local-model")
    config.write_text(text + "[budget]\ndaily_usd = 2.0\n")
    [unknown] = problems(run(config))
    assert unknown.startswith("no price known for openai/my-local-model")
    assert "budget.daily_usd cannot count them" in unknown
    assert "else to the log only" in " ".join(notes(run(config)))

    config.write_text(text + "[budget]\ndaily_tokens = 200000\n")
    findings = run(config)
    assert problems(findings) == []
    assert any(
        "caps their calls by tokens (budget.daily_tokens = 200,000 a day)" in m
        for m in notes(findings)
    )


async def test_the_telegram_check_loads_no_ca_bundle_of_its_own(
    tmp_path: Path,
    fake_llm: FakeLLM,
    telegram: FakeTelegram,
    discord: FakeDiscord,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Its two Bot API clients trust the process's one store, as the channel's do: httpx
    # would otherwise parse the CA bundle again for each (~20 ms of CPU apiece).
    config = load_config(online_config(tmp_path, fake_llm, telegram, discord), environ={})
    tls_context()
    loaded: list[str] = []
    for name in ("load_verify_locations", "set_default_verify_paths"):
        real = getattr(ssl.SSLContext, name)

        def counted(self: ssl.SSLContext, *args: Any, _real: Any = real, _name: str = name) -> Any:
            loaded.append(_name)
            return _real(self, *args)

        monkeypatch.setattr(ssl.SSLContext, name, counted)
    ok, message = await ping_telegram(config, timeout=10)
    assert ok, message
    assert telegram.calls["getMe"] == 1
    assert loaded == []

"""`clawgate service install`: the unit's content, and systemd's own verdict on it."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgate.gateway.cli import app
from clawgate.gateway.ops.service import UnitSpec, render_unit
from tests.process import write_config

CLAWGATE = str(Path(sys.executable).with_name("clawgate"))
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("CLAWGATE_") or name == "SUDO_USER":
            monkeypatch.delenv(name)


def install(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def directives(unit: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            found.setdefault(key, []).append(value)
    return found


def verify(unit_path: Path, *, user: bool, tmp_path: Path) -> None:
    """systemd-analyze verify: exit 0 and not one warning."""
    if SYSTEMD_ANALYZE is None:
        pytest.skip("systemd-analyze is not installed")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    command = [SYSTEMD_ANALYZE, *(["--user"] if user else []), "verify", str(unit_path)]
    # A user manager needs a runtime dir; the test's own keeps the real one out of it.
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr


def test_system_unit_runs_the_gateway_as_the_user_with_a_full_sandbox(tmp_path: Path) -> None:
    config = write_config(tmp_path, agent={"model": "openai/x"})
    code, out, _ = install("--config", str(config), "service", "install", "--dir", str(tmp_path))
    assert code == 0
    unit_path = tmp_path / "clawgate.service"
    assert f"wrote {unit_path}" in out
    assert "sudo systemctl daemon-reload && sudo systemctl enable --now clawgate" in out
    assert "enable-linger" not in out

    unit = unit_path.read_text("utf-8")
    found = directives(unit)
    assert found["ExecStart"] == [f"{CLAWGATE} --config {config} gateway"]
    assert found["Environment"] == [f"CLAWGATE_CONFIG={config}"]
    assert found["User"] == [pwd.getpwuid(os.geteuid()).pw_name]
    assert found["Restart"] == ["on-failure"] and found["RestartSec"] == ["5"]
    assert found["RestartPreventExitStatus"] == ["2"]
    assert found["WantedBy"] == ["multi-user.target"]
    assert found["After"] == ["network-online.target"]
    for setting in (
        "NoNewPrivileges=yes",
        "PrivateTmp=yes",
        "ProtectSystem=strict",
        "ProtectHome=read-only",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectControlGroups=yes",
        "UMask=0077",
    ):
        key, value = setting.split("=")
        assert found[key] == [value], setting
    # Both folders are writable, nothing else (see the nested case below).
    assert found["ReadWritePaths"] == [f"-{tmp_path / 'data'} -{tmp_path / 'workspace'}"]
    verify(unit_path, user=False, tmp_path=tmp_path)


def test_user_unit_keeps_to_options_a_user_manager_can_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    code, out, _ = install("service", "install", "--user")
    assert code == 0
    unit_path = tmp_path / ".config" / "systemd" / "user" / "clawgate.service"
    assert f"wrote {unit_path}" in out
    assert "systemctl --user daemon-reload && systemctl --user enable --now clawgate" in out
    assert "loginctl enable-linger $USER" in out

    found = directives(unit_path.read_text("utf-8"))
    # No --config given: the default config, found under the service's own HOME.
    assert found["ExecStart"] == [f"{CLAWGATE} gateway"]
    assert "Environment" not in found and "User" not in found
    assert found["WantedBy"] == ["default.target"]
    assert found["NoNewPrivileges"] == ["yes"] and found["UMask"] == ["0077"]
    # Mount-namespace options would make a user manager need user namespaces: offered,
    # commented out.
    for key in ("PrivateTmp", "ProtectSystem", "ProtectHome", "ReadWritePaths"):
        assert key not in found
    assert f"#ReadWritePaths=-{tmp_path / '.clawgate'}" in unit_path.read_text("utf-8")
    verify(unit_path, user=True, tmp_path=tmp_path)


def test_print_writes_nothing_and_sends_advice_to_stderr(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    code, out, err = install("--config", str(config), "service", "install", "--user", "--print")
    assert code == 0
    assert out.startswith("# Written by `clawgate service install`.\n[Unit]")
    assert "systemctl --user enable --now clawgate" in err
    assert not list(tmp_path.rglob("*.service"))


def test_a_system_unit_that_would_run_as_root_is_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 35: `service install --print` as root printed a User=root unit without a word.
    monkeypatch.setattr("clawgate.gateway.ops.service.invoking_user", lambda: "root")
    config = write_config(tmp_path)
    code, out, err = install("--config", str(config), "service", "install", "--print")
    assert code == 0 and "User=root" in out
    assert "warning: the service would run as root (User=root)" in err
    _, _, user_unit = install("--config", str(config), "service", "install", "--user", "--print")
    assert "run as root" not in user_unit


def test_print_and_dir_exclude_each_other(tmp_path: Path) -> None:
    code, _, err = install("service", "install", "--print", "--dir", str(tmp_path))
    assert code == 2
    assert "--print and --dir" in err


def test_paths_with_spaces_and_percent_signs_survive(tmp_path: Path) -> None:
    home = tmp_path / "my home"
    spec = UnitSpec(
        command=(CLAWGATE,),
        config_path=home / "100% config.toml",
        workspace=home / "work space",
        data_dir=home / "data",
        user_mode=False,
        user="alice",
    )
    unit = render_unit(spec)
    found = directives(unit)
    assert found["ExecStart"] == [f'{CLAWGATE} --config "{home}/100%% config.toml" gateway']
    assert found["Environment"] == [f'"CLAWGATE_CONFIG={home}/100%% config.toml"']
    assert found["ReadWritePaths"] == [f'-"{home}/data" -"{home}/work space"']
    unit_path = tmp_path / "clawgate.service"
    unit_path.write_text(unit, encoding="utf-8")
    verify(unit_path, user=False, tmp_path=tmp_path)

"""Backup, verify, restore and export through the real `clawgate` commands (typer's runner,
in-process) on an installation laid out as onboard and the gateway leave one. The backup
taken while a gateway runs is in test_moving_process.py."""

from __future__ import annotations

import io
import json
import os
import re
import stat
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgate.gateway.cli.root import app
from clawgate.gateway.daemon.lock import InstanceLock
from clawgate.gateway.moving.config_text import PLACEHOLDER, without_secrets
from clawgate.kernel.config import load_config
from tests.pty_terminal import Terminal

TOKEN = "123456:ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij"
KEY = "sk-test-0123456789abcdefghij"


def install(home: Path) -> Path:
    """A config with secrets and two agents, and files in every kind of place."""
    data = home / ".clawgate"
    config = data / "config.toml"
    work = home / "elsewhere" / "work"
    files = {
        data / "workspace" / "AGENTS.md": "# Agents\n",
        data / "workspace" / "memory" / "MEMORY.md": "- Ann likes tea\n",
        data / "workspace" / "memory" / "HISTORY.md": "[2026-12-01 10:00] Ann said hi.\n\n",
        data / "workspace" / "memory" / "2026-12-01.md": "- 10:00 Ann said hi.\n",
        data / "workspace" / "skills" / "tea" / "SKILL.md": "---\nname: tea\n---\nBrew.\n",
        data / "workspace" / "cron" / "jobs.json": '{"version": 1, "jobs": []}\n',
        data / "workspace" / "media" / "photo.jpg": "\xff\xd8 not really a jpeg",
        data / "pairing.json": '{"approved": []}\n',
        data / "usage" / "2026-12.jsonl": '{"model": "m", "cost": 0.1}\n',
        data / "index" / "memory-abc.sqlite": "derived",
        data / "logs" / "clawgate.log": "a log line\n",
        data / "service.env": f"CLAWGATE_AGENT__API_KEY={KEY}\n",
        work / "memory" / "MEMORY.md": "- the work agent's notes\n",
        data / "agents" / "work" / "pairing.json": '{"approved": ["7"]}\n',
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    session = data / "workspace" / "sessions" / "telegram_1.jsonl"
    session.parent.mkdir(parents=True)
    (session.parent / "archive").mkdir()
    header = {"type": "session", "key": "telegram:1", "version": 1, "first_seq": 1}
    lines = [header, {"seq": 1, "role": "user", "content": "hi", "message_id": "5"}]
    lines.append({"seq": 2, "role": "assistant", "content": "Hello!"})
    # The last line is being appended: a backup must stop before it.
    session.write_text(
        "".join(json.dumps(line) + "\n" for line in lines) + '{"seq": 3, "role": "us',
        encoding="utf-8",
    )
    (data / "workspace" / "skills" / "tea" / "brew.sh").write_text("echo brew\n")
    (data / "workspace" / "skills" / "tea" / "brew.sh").chmod(0o755)
    config.write_text(
        f'data_dir = "{data}"\nworkspace = "{data / "workspace"}"\n\n'
        f'[agent]\nmodel = "openai/gpt-4o"\napi_key = "{KEY}"  # mine\n\n'
        f'[channels.telegram]\nenabled = true\ntoken = "{TOKEN}"\nallow_from = ["1"]\n\n'
        f'[agents.work]\nworkspace = "{work}"\napi_key_env = "WORK_MODEL_KEY"\n',
        encoding="utf-8",
    )
    return config


def run(home: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"HOME": str(home)})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def test_backup_verify_restore_round_trip(tmp_path: Path) -> None:
    config = install(tmp_path)
    archive = tmp_path / "b.tar.gz"
    code, out = run(tmp_path, "-c", str(config), "backup", "-o", str(archive))
    assert code == 0, out
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    names = members(archive)
    assert next(iter(names)) == "manifest.json"
    manifest = json.loads(names["manifest.json"])
    assert manifest["schema_version"] == 1 and manifest["clawgate_version"]
    listed = {entry["path"] for entry in manifest["files"]}
    assert listed == set(names) - {"manifest.json"}
    assert "data/pairing.json" in listed and "data/agents/work/pairing.json" in listed
    assert "workspaces/work/memory/MEMORY.md" in listed
    assert "workspaces/main/media/photo.jpg" in listed
    # The search index and the logs are left out; the config travels once, as config.toml.
    assert not [n for n in listed if "index" in n or "logs" in n or n.endswith("/config.toml")]
    # The line being appended is not in the backup; the whole lines are.
    session = names["workspaces/main/sessions/telegram_1.jsonl"].decode()
    assert session.endswith('"Hello!"}\n') and '"seq": 3' not in session

    code, out = run(tmp_path, "backup", "verify", str(archive))
    assert code == 0, out
    assert "memory audit clean" in out

    target = tmp_path / "new-home"
    code, out = run(tmp_path, "restore", str(archive), "--to", str(target))
    assert code == 0, out
    restored = load_config(target / "config.toml", environ={})
    assert restored.data_dir == target
    assert restored.workspace == target / "workspace"
    assert restored.for_agent("work").workspace == target / "workspaces" / "work"
    assert restored.agent.api_key is not None and restored.agent.api_key.get_secret_value() == KEY
    assert "# mine" in (target / "config.toml").read_text()  # comments kept
    work_memory = target / "workspaces" / "work" / "memory" / "MEMORY.md"
    assert work_memory.read_text() == "- the work agent's notes\n"
    assert (target / "agents" / "work" / "pairing.json").read_text() == '{"approved": ["7"]}\n'
    assert (target / "service.env").exists()
    assert not (target / "index").exists()
    for folder, _dirs, files in os.walk(target):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700, folder
        for name in files:
            mode = stat.S_IMODE(os.stat(Path(folder) / name).st_mode)
            assert mode == (0o700 if name == "brew.sh" else 0o600), name
    code, out = run(tmp_path, "-c", str(target / "config.toml"), "memory", "audit")
    assert code == 0, out


def test_no_secrets_backup_names_what_to_fill_in(tmp_path: Path) -> None:
    config = install(tmp_path)
    archive = tmp_path / "b.tar.gz"
    code, out = run(tmp_path, "-c", str(config), "backup", "--no-secrets", "-o", str(archive))
    assert code == 0, out
    assert "agent.api_key" in out and "channels.telegram.token" in out
    assert "service.env" in out
    for name, raw in members(archive).items():
        assert KEY.encode() not in raw and TOKEN.encode() not in raw, name
    target = tmp_path / "restored"
    code, out = run(tmp_path, "restore", str(archive), "--to", str(target))
    assert code == 0, out
    assert f"fill in agent.api_key in {target / 'config.toml'}" in out
    assert "fill in channels.telegram.token" in out
    assert "recreate service.env" in out
    assert "set WORK_MODEL_KEY (the config reads a model key from it" in out
    text = (target / "config.toml").read_text()
    assert text.count(PLACEHOLDER) == 2


def tampered(archive: Path, member: str, change: bytes) -> Path:
    """The archive again with `member`'s bytes changed and the manifest left as it was."""
    out = archive.with_name("tampered.tar.gz")
    with tarfile.open(archive, "r:gz") as source, tarfile.open(out, "w:gz") as tar:
        for info in source:
            raw = source.extractfile(info).read()  # type: ignore[union-attr]
            if info.name == member:
                raw = raw.replace(b"tea", change)
                info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return out


def test_a_tampered_archive_fails_verify_and_restores_nothing(tmp_path: Path) -> None:
    config = install(tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert run(tmp_path, "-c", str(config), "backup", "-o", str(archive))[0] == 0
    bad = tampered(archive, "workspaces/main/memory/MEMORY.md", b"coffee")
    code, out = run(tmp_path, "backup", "verify", str(bad))
    assert code == 1
    assert "workspaces/main/memory/MEMORY.md: checksum does not match the manifest" in out
    target = tmp_path / "new"
    code, out = run(tmp_path, "restore", str(bad), "--to", str(target))
    assert code == 1 and "checksum does not match" in out and "nothing restored" in out
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".new")] == []
    truncated = tmp_path / "cut.tar.gz"
    truncated.write_bytes(archive.read_bytes()[:-200])
    code, out = run(tmp_path, "backup", "verify", str(truncated))
    assert code == 1 and "not a readable backup" in out


def test_restore_never_goes_over_an_installation(tmp_path: Path) -> None:
    config = install(tmp_path)
    archive = tmp_path / "b.tar.gz"
    assert run(tmp_path, "-c", str(config), "backup", "-o", str(archive))[0] == 0
    live = tmp_path / ".clawgate"
    with InstanceLock(live):  # a gateway runs there
        before = {p: p.read_bytes() for p in live.rglob("*") if p.is_file()}
        code, out = run(tmp_path, "restore", str(archive), "--to", str(live))
    assert code == 1
    assert f"pid {os.getpid()}) is running on {live}" in out
    code, out = run(tmp_path, "restore", str(archive))  # the default: ~/.clawgate, not empty
    assert code == 1 and "is not empty" in out
    after = {p: p.read_bytes() for p in live.rglob("*") if p.is_file()}
    assert after == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(tmp_path, "restore", str(archive), "--to", str(empty))[0] == 0


def tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_export_is_secret_free_and_stable(tmp_path: Path) -> None:
    config = install(tmp_path)
    # The dashboard keeps the owner's files' old versions beside them: git's job in an export.
    kept = tmp_path / ".clawgate" / "workspace" / ".versions" / "SOUL.1.md"
    kept.parent.mkdir()
    kept.write_text("an older soul\n")
    out = tmp_path / "export"
    code, output = run(tmp_path, "-c", str(config), "export", str(out))
    assert code == 0, output
    first = tree(out)
    assert "agents/main/memory/MEMORY.md" in first and "agents/work/memory/MEMORY.md" in first
    assert "agents/main/media/photo.jpg" not in first
    assert not [name for name in first if ".versions" in name]
    assert not [name for name in first if "index" in name or "pairing" in name]
    for name, (raw, _) in first.items():
        assert KEY.encode() not in raw and TOKEN.encode() not in raw, name
    assert first["agents/main/sessions/telegram_1.jsonl"][0].endswith(b'"Hello!"}\n')

    code, output = run(tmp_path, "-c", str(config), "export", str(out))
    assert code == 0 and "0 files written, 0 removed" in output
    assert tree(out) == first  # same bytes, not even rewritten

    memory = tmp_path / ".clawgate" / "workspace" / "memory" / "MEMORY.md"
    memory.write_text("- Ann likes green tea\n")
    (tmp_path / ".clawgate" / "workspace" / "skills" / "tea" / "brew.sh").unlink()
    code, output = run(tmp_path, "-c", str(config), "export", str(out))
    assert "1 files written, 1 removed" in output
    assert (out / "agents/main/memory/MEMORY.md").read_text() == "- Ann likes green tea\n"


def test_export_refuses_a_folder_of_something_else(tmp_path: Path) -> None:
    config = install(tmp_path)
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("\\begin{document}")
    code, output = run(tmp_path, "-c", str(config), "export", str(other))
    assert code == 1 and "holds files of its own" in output
    assert [p.name for p in other.iterdir()] == ["thesis.tex"]


@pytest.mark.parametrize("flag", ["--agent", "--all"])
def test_backup_of_one_agent_or_all(tmp_path: Path, flag: str) -> None:
    config = install(tmp_path)
    archive = tmp_path / "one.tar.gz"
    args = ["--agent", "work"] if flag == "--agent" else ["--all"]
    code, out = run(tmp_path, "-c", str(config), "backup", *args, "-o", str(archive))
    assert code == 0, out
    listed = set(members(archive))
    assert ("workspaces/main/memory/MEMORY.md" in listed) == (flag == "--all")
    assert "workspaces/work/memory/MEMORY.md" in listed
    assert ("data/pairing.json" in listed) == (flag == "--all")
    assert "data/agents/work/pairing.json" in listed


def test_a_backup_written_into_the_data_dir_leaves_itself_out(tmp_path: Path) -> None:
    config = install(tmp_path)
    archive = tmp_path / ".clawgate" / "backups" / "b.tar.gz"
    archive.parent.mkdir()
    (archive.parent / "older.tar.gz").write_bytes(b"an older backup")
    code, out = run(tmp_path, "-c", str(config), "backup", "-o", str(archive))
    assert code == 0, out
    listed = set(members(archive))
    assert "data/backups/older.tar.gz" in listed
    assert not [name for name in listed if ".clawgate-backup-" in name or "b.tar.gz" in name]
    assert {p.name for p in archive.parent.iterdir()} == {"b.tar.gz", "older.tar.gz"}


async def test_backup_shows_a_progress_bar_in_a_terminal_only(tmp_path: Path) -> None:
    config = install(tmp_path)
    terminal = await Terminal().start(tmp_path, "-c", str(config), "backup", "-o", "b.tar.gz")
    try:
        await terminal.expect(r"backing up")
        assert await terminal.exit_code() == 0
        await terminal.expect(r"\d+ files of main, work")
        assert re.search(r"backing up\s+\[#+\]\s+100%", terminal.seen), terminal.seen
    finally:
        await terminal.close()
    # Without a terminal (the runner above, a cron job's log) only the summary line.
    code, out = run(tmp_path, "-c", str(config), "backup", "-o", str(tmp_path / "c.tar.gz"))
    assert code == 0 and "backing up" not in out


def test_verify_fails_a_backup_whose_memory_audit_is_not_clean(tmp_path: Path) -> None:
    config = install(tmp_path)
    # A consolidation record whose HISTORY.md entry is missing: the install's own damage,
    # which a backup carries and verify must name.
    session = tmp_path / ".clawgate" / "workspace" / "sessions" / "telegram_1.jsonl"
    whole = session.read_text()[: session.read_text().rfind("\n") + 1]
    record = {"type": "consolidation", "from_seq": 1, "to_seq": 2, "mode": "llm"}
    session.write_text(whole + json.dumps(record) + "\n")
    archive = tmp_path / "b.tar.gz"
    assert run(tmp_path, "-c", str(config), "backup", "-o", str(archive))[0] == 0
    code, out = run(tmp_path, "backup", "verify", str(archive))
    assert code == 1
    assert "PROBLEM main: audit: sessions/telegram_1.jsonl: consolidation" in out
    assert "has no HISTORY.md entry" in out


def test_every_secret_key_is_replaced_and_nothing_else() -> None:
    text = (
        # A local server takes any key: some give it the model's name.
        '[agent]\nmodel = "local-llama-3"\napi_key = "local-llama-3"\n\n'
        '[[mcp.servers]]\nname = "notes"\nurl = "https://mcp.example/x"\n'
        'headers = { Authorization = "Bearer 0123456789abcdef" }\n\n'
        '[[mcp.servers]]\nname = "files"\ncommand = "files-mcp"\n'
        'env = { FILES_API_KEY = "files-secret-9876", FILES_ROOT = "/srv" }\n'
    )
    secrets = ["local-llama-3", "Bearer 0123456789abcdef", "files-secret-9876"]
    scrubbed, removed = without_secrets(text, secrets)
    assert removed == [
        "agent.api_key",
        "mcp.servers[0].headers.Authorization",
        "mcp.servers[1].env.FILES_API_KEY",
    ]
    assert 'model = "local-llama-3"' in scrubbed  # the same value under no secret's key
    assert 'api_key = "local-llama-3"' not in scrubbed
    assert not [s for s in secrets[1:] if s in scrubbed]
    assert 'FILES_ROOT = "/srv"' in scrubbed

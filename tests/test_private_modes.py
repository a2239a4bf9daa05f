"""Derived and tool-written files are private whatever the umask: 0600 files, 0700 folders."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgate.agent.memory.index import MemoryIndex
from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.tools import ToolContext, ToolRegistry, default_tools
from clawgate.gateway.cli import app
from clawgate.gateway.setup.onboard import onboard
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.storage import DiskWriter
from tests.process import write_config


@pytest.fixture(autouse=True)
def open_umask() -> Iterator[None]:
    """The common default umask, under which the old code made 0644 files and 0755 folders."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def db_file_modes(db_path: Path) -> dict[str, int]:
    """The database and whichever of its -wal/-shm files exist, with their modes."""
    paths = [Path(f"{db_path}{suffix}") for suffix in ("", "-wal", "-shm")]
    return {path.name: mode(path) for path in paths if path.exists()}


def make_ctx(workspace: Path, trust: Trust) -> ToolContext:
    ctx = ToolContext(
        workspace=workspace.resolve(),
        trust=trust,
        session_key="telegram:-5",
        config=ToolsConfig(),
        secrets=(),
        writer=(disk := DiskWriter()),
        memory_lock=MemoryLock(workspace.resolve(), disk),
    )
    ctx.make_root()
    return ctx


async def test_the_index_db_and_its_folder_are_private(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "memory").mkdir(parents=True)
    (workspace / "memory" / "MEMORY.md").write_text("# Facts\n\nThe safe code is 4711.\n")
    index = MemoryIndex.for_workspace(workspace, tmp_path / "data", None)
    try:
        await index.refresh()
        assert index.db_path.exists()
        assert mode(index.db_path.parent) == 0o700
        assert mode(tmp_path / "data") == 0o700
        modes = db_file_modes(index.db_path)
        assert modes and set(modes.values()) == {0o600}, modes
    finally:
        await index.close()


async def test_tool_written_files_and_folders_are_private(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ctx = make_ctx(workspace, Trust.OWNER)
    await ToolRegistry(default_tools()).execute(
        "write_file", json.dumps({"path": "notes/deep/plan.md", "content": "x"}), ctx
    )
    assert mode(workspace / "notes/deep/plan.md") == 0o600
    assert mode(workspace / "notes") == 0o700
    assert mode(workspace / "notes/deep") == 0o700


async def test_public_is_private_to_the_gateway_user(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    ctx = make_ctx(workspace, Trust.GROUP)
    assert ctx.root.parent == workspace.resolve() / "public"  # the chat's own area
    assert mode(ctx.root) == mode(ctx.root.parent) == 0o700
    await ToolRegistry(default_tools()).execute(
        "write_file", json.dumps({"path": "a.txt", "content": "x"}), ctx
    )
    assert mode(ctx.root / "a.txt") == 0o600


def test_doctor_fix_modes_fixes_what_it_flagged(tmp_path: Path) -> None:
    config = write_config(tmp_path, agent={"model": "openai/gpt-4o-mini", "api_key": "sk-x"})
    config.chmod(0o600)
    onboard(config)
    (tmp_path / "data").mkdir(mode=0o700)
    # No private folder above them to shield them: what umask 0022 used to leave behind.
    (tmp_path / "workspace").chmod(0o755)
    (tmp_path / "workspace" / "memory").chmod(0o755)
    leaked = tmp_path / "workspace" / "memory" / "MEMORY.md"
    leaked.chmod(0o644)
    public = tmp_path / "workspace" / "public"
    public.chmod(0o755)
    runner = CliRunner()
    flagged = runner.invoke(app, ["--config", str(config), "doctor"])
    assert flagged.exit_code == 1, flagged.output
    assert str(leaked) in flagged.stdout and str(public) in flagged.stdout

    fixed = runner.invoke(app, ["--config", str(config), "doctor", "--fix-modes"])
    assert fixed.exit_code == 0, fixed.output
    assert "modes fixed" in fixed.stdout
    assert mode(leaked) == 0o600
    assert mode(leaked.parent) == 0o700
    assert mode(public) == 0o700


def test_disk_writer_mkdir_makes_every_missing_parent_private(
    tmp_path: Path, open_umask: None
) -> None:
    tmp_path.chmod(0o755)
    target = tmp_path / "data" / "channels" / "telegram"
    DiskWriter().mkdir(target)
    for folder in (tmp_path / "data", tmp_path / "data" / "channels", target):
        assert mode(folder) == 0o700, folder
    assert mode(tmp_path) == 0o755  # a folder that existed is not the writer's to change

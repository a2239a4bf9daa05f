"""`clawgate import openclaw|nanobot` on the hand-written fixture homes in tests/fixtures/:
the dry-run report, the apply, a second apply that changes nothing, conflicts left alone,
imported transcripts that nothing answers again, and the source never touched."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgate.agent.session import SessionStore, load_session, read_key
from clawgate.agent.session.delivery import unanswered
from clawgate.gateway.cli.root import app
from clawgate.gateway.cron.store import CronStore

FIXTURES = Path(__file__).parent / "fixtures"
TEMPLATE = Path(__file__).parent.parent / "workspace"


def digest(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(folder)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run(home: Path, *args: str) -> str:
    config = home / "config.toml"
    if not config.exists():
        config.write_text(f'workspace = "{home / "workspace"}"\ndata_dir = "{home / "data"}"\n')
    result = CliRunner().invoke(app, ["-c", str(config), *args], env={"HOME": str(home)})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def source(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    # A copy: the test checks that the import leaves every byte and mtime of it alone.
    copy = tmp_path / "source"
    shutil.copytree(FIXTURES / request.param, copy)
    return copy


EXPECTED = {
    "openclaw": {
        "files": {
            "AGENTS.md": "workspace/AGENTS.md",
            "USER.md": "workspace/USER.md",
            "memory/MEMORY.md": "workspace/MEMORY.md",
            "memory/2026-12-01.md": "workspace/memory/2026-12-01.md",
            "skills/weather/SKILL.md": "workspace/skills/weather/SKILL.md",
        },
        "transcript": "imported:openclaw:agent:main:telegram:dm:123",
        "said": ["Train times Lisbon to Porto tomorrow morning?", "Book the 9:00 one for 12 March"],
        "jobs": {
            "openclaw-4b9e2f10-6c1d-4e8a-b2f3-0a1b2c3d4e5f": ("telegram:123", "0 8 * * *"),
            "openclaw-9c8d7e6f-1111-4222-8333-444455556666": ("telegram:123", None),
        },
        "skipped": ["IDENTITY.md", "projects.md", "'Check inbox': no chat to deliver to"],
        "history": [],
    },
    "nanobot": {
        "files": {
            "SOUL.md": "workspace/SOUL.md",
            "memory/MEMORY.md": "workspace/memory/MEMORY.md",
            "skills/notes/SKILL.md": "workspace/skills/notes/SKILL.md",
        },
        "transcript": "imported:nanobot:telegram:42",
        "said": ["What's my run today?", "Done, felt good!"],
        "jobs": {"nanobot-a1b2c3d4": ("telegram:42", "30 6 * * 2,4")},
        "skipped": ["'stretch': no chat to deliver to"],
        "history": [
            "[2026-11-20 18:02] Carl asked for a 10k training plan",
            "[2026-11-28 08:00] Carl finished week 2 of the plan without pain.",
        ],
    },
}


@pytest.mark.parametrize("source", ["openclaw", "nanobot"], indirect=True)
def test_import_reports_applies_once_and_leaves_the_source_alone(
    tmp_path: Path, source: Path
) -> None:
    name = "openclaw" if (source / "agents").exists() else "nanobot"
    expected = EXPECTED[name]
    home = tmp_path / "home"
    home.mkdir()
    workspace = home / "workspace"
    before = digest(source)

    report = run(home, "import", name, str(source))
    assert "Dry run: nothing written" in report
    assert not workspace.exists()
    for target in expected["files"]:
        assert f"new       {target}" in report
    skipped = "\n".join(line for line in report.splitlines() if "skipped" in line)
    for reason in expected["skipped"]:
        assert reason in skipped
    assert "tool steps left out" in report

    applied = run(home, "import", name, str(source), "--apply")
    assert "Written." in applied and "0 conflicts" in applied
    for target, theirs in expected["files"].items():
        assert (workspace / target).read_bytes() == (source / theirs).read_bytes()
    history = (workspace / "memory" / "HISTORY.md").read_text() if expected["history"] else ""
    for entry in expected["history"]:
        assert entry in history
    jobs = {job.id: job for job in CronStore(workspace / "cron").load().jobs}
    assert {j: (jobs[j].deliver_to, jobs[j].schedule.cron) for j in jobs} == expected["jobs"]

    # The transcript: archived, marked, every message covered, nothing for the gateway to do.
    [path] = (workspace / "sessions" / "archive").glob("*.jsonl")
    header = json.loads(path.read_text().splitlines()[0])
    assert header["imported_from"] == name and read_key(path) == expected["transcript"]
    session = load_session(path, expected["transcript"])
    assert [m.content for m in session.messages if m.role == "user"] == expected["said"]
    assert all(m.message_id is None for m in session.messages)
    assert unanswered(session) is None
    assert SessionStore(workspace / "sessions").list_keys() == []
    audit = run(home, "memory", "audit")
    assert "everything accounted for" in audit

    after_first = digest(workspace)
    again = run(home, "import", name, str(source), "--apply")
    assert again.startswith(f"{name} ") and "0 to write" in again and "0 conflicts" in again
    assert digest(workspace) == after_first
    assert digest(source) == before


@pytest.mark.parametrize("source", ["openclaw"], indirect=True)
def test_conflicts_are_reported_and_kept_and_an_unedited_template_is_replaced(
    tmp_path: Path, source: Path
) -> None:
    home = tmp_path / "home"
    workspace = home / "workspace"
    (workspace / "memory").mkdir(parents=True)
    shutil.copy(TEMPLATE / "AGENTS.md", workspace / "AGENTS.md")  # as onboard left it
    (workspace / "USER.md").write_text("# USER.md\n\n- Ann, in my own words\n")
    (workspace / "memory" / "2026-12-01.md").write_text("- my own log of that day\n")

    report = run(home, "import", "openclaw", str(source), "--apply")
    assert "replaces  AGENTS.md" in report
    assert (
        f"conflict  USER.md  (bootstrap file): yours differs; theirs is {source / 'workspace' / 'USER.md'}"
        in report
    )
    assert "conflict  memory/2026-12-01.md" in report
    assert "2 conflicts" in report
    assert (workspace / "AGENTS.md").read_bytes() == (
        source / "workspace" / "AGENTS.md"
    ).read_bytes()
    assert (workspace / "USER.md").read_text() == "# USER.md\n\n- Ann, in my own words\n"
    assert (workspace / "memory" / "2026-12-01.md").read_text() == "- my own log of that day\n"
    assert "2 conflicts" in run(home, "import", "openclaw", str(source), "--apply")

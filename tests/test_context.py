from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clawgate.agent.context import ContextBuilder, PromptPart
from clawgate.agent.skills_loader import BUILTIN_SKILLS_DIR, load_skills
from clawgate.kernel.bus import Trust

NOW = datetime(2025, 3, 14, 18, 30, tzinfo=UTC)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(workspace: Path, folder: str, front: str, body: str = "Body text.") -> Path:
    return write(workspace / "skills" / folder / "SKILL.md", f"---\n{front}\n---\n\n{body}\n")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write(ws / "AGENTS.md", "# Agents\nagents-marker")
    write(ws / "SOUL.md", "# Soul\nsoul-marker")
    write(ws / "USER.md", "# User\nThe owner is called Rita.")
    write(ws / "TOOLS.md", "# Tools\ntools-marker")
    write(ws / "memory" / "MEMORY.md", "# Memory\nRita's sister lives in Lisbon.")
    (ws / "public").mkdir()
    return ws


async def prompt(builder: ContextBuilder, trust: Trust, text: str = "") -> str:
    return await builder.system_prompt(
        trust=trust, session_key="telegram:1", now=NOW, incoming_text=text
    )


async def test_owner_prompt_has_private_files_in_order(workspace: Path) -> None:
    builder = ContextBuilder(workspace, timezone="Europe/Lisbon")
    parts = await builder.system_prompt_parts(trust=Trust.OWNER, session_key="cli:me", now=NOW)
    names = [p.name for p in parts]
    assert names == ["identity", "AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "memory", "skills"]
    identity = parts[0].text
    assert "clawgate" in identity and "cli:me" in identity and str(workspace) in identity
    assert "2025-03-14 18:30" in identity and "Europe/Lisbon" in identity

    text = await builder.system_prompt(trust=Trust.OWNER, session_key="cli:me", now=NOW)
    assert "## identity" in text and "## memory" in text
    assert "Rita's sister lives in Lisbon." in text
    assert "The owner is called Rita." in text


@pytest.mark.parametrize("trust", [Trust.ALLOWED, Trust.GROUP])
async def test_shared_chats_never_see_private_memory(workspace: Path, trust: Trust) -> None:
    builder = ContextBuilder(workspace)
    text = await prompt(builder, trust)
    assert "agents-marker" in text and "soul-marker" in text and "tools-marker" in text
    assert "Lisbon" not in text
    assert "Rita" not in text
    assert "private memory is unavailable" in text
    assert "limited to the shared folder" in text


async def test_missing_files_are_skipped(tmp_path: Path) -> None:
    builder = ContextBuilder(tmp_path, builtin_skills_dir=tmp_path / "none")
    parts = await builder.system_prompt_parts(trust=Trust.OWNER, session_key="cli:x", now=NOW)
    assert [p.name for p in parts] == ["identity"]


async def test_file_cap_truncates(workspace: Path) -> None:
    write(workspace / "SOUL.md", "x" * 500 + "TAIL")
    write(workspace / "memory" / "MEMORY.md", "m" * 500 + "MEMTAIL")
    builder = ContextBuilder(workspace, file_cap_chars=100)
    parts = {
        p.name: p.text
        for p in await builder.system_prompt_parts(trust=Trust.OWNER, session_key="cli:x", now=NOW)
    }
    assert parts["SOUL.md"].startswith("x" * 100)
    assert "TAIL" not in parts["SOUL.md"] and "[truncated" in parts["SOUL.md"]
    assert "MEMTAIL" not in parts["memory"] and "[truncated" in parts["memory"]
    assert "[truncated" not in parts["AGENTS.md"]


async def test_changed_file_is_picked_up_and_unchanged_file_is_cached(workspace: Path) -> None:
    builder = ContextBuilder(workspace)
    soul = workspace / "SOUL.md"
    write(soul, "first-version")
    stamp = soul.stat().st_mtime_ns
    assert "first-version" in await prompt(builder, Trust.OWNER)

    # Same size and mtime: the cache answers, proving the file is not reread.
    write(soul, "other-version")
    os.utime(soul, ns=(stamp, stamp))
    assert "first-version" in await prompt(builder, Trust.OWNER)

    os.utime(soul, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))
    text = await prompt(builder, Trust.OWNER)
    assert "other-version" in text and "first-version" not in text

    soul.unlink()
    assert "## SOUL.md" not in await prompt(builder, Trust.OWNER)


async def test_a_skill_is_parsed_once_until_its_file_changes(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import clawgate.agent.skills_loader as skills_loader

    parsed: list[str] = []
    real_load = skills_loader.yaml.safe_load

    def counting_load(text: str) -> object:
        parsed.append(text)
        return real_load(text)

    monkeypatch.setattr(skills_loader.yaml, "safe_load", counting_load)
    builder = ContextBuilder(workspace, builtin_skills_dir=workspace / "none")
    path = skill(workspace, "weather", "description: first-version")
    stamp = path.stat().st_mtime_ns
    assert "weather: first-version" in await prompt(builder, Trust.OWNER)
    assert "weather: first-version" in await prompt(builder, Trust.OWNER)
    assert len(parsed) == 1

    # Edited in place: the next turn has the new text.
    skill(workspace, "weather", "description: other-version")
    os.utime(path, ns=(stamp + 1_000_000_000, stamp + 1_000_000_000))
    text = await prompt(builder, Trust.OWNER)
    assert "weather: other-version" in text and "first-version" not in text
    assert len(parsed) == 2

    # A broken edit is reported on every turn, as before, without being parsed again.
    skill(workspace, "weather", "always: sometimes")
    with caplog.at_level(logging.WARNING, logger="clawgate.agent.skills_loader"):
        for _ in range(2):
            assert "weather" not in await prompt(builder, Trust.OWNER)
    assert [r.getMessage().count("'always' must be") for r in caplog.records] == [1, 1]
    assert len(parsed) == 3

    path.unlink()
    assert "## skills" not in await prompt(builder, Trust.OWNER)


async def test_extra_parts_only_for_owner(workspace: Path) -> None:
    calls: list[tuple[Trust, str]] = []

    async def recall(trust: Trust, text: str) -> PromptPart | None:
        calls.append((trust, text))
        return PromptPart("recalled", f"snippets about {text}")

    async def nothing(trust: Trust, text: str) -> PromptPart | None:
        return None

    async def broken(trust: Trust, text: str) -> PromptPart | None:
        raise RuntimeError("index is gone")

    builder = ContextBuilder(workspace, extra_parts=[nothing, broken, recall])
    parts = await builder.system_prompt_parts(
        trust=Trust.OWNER, session_key="cli:x", now=NOW, incoming_text="lisbon trip"
    )
    names = [p.name for p in parts]
    assert names.index("memory") < names.index("recalled") < names.index("skills")
    assert "snippets about lisbon trip" in parts[names.index("recalled")].text
    assert calls == [(Trust.OWNER, "lisbon trip")]

    text = await prompt(builder, Trust.GROUP, "lisbon trip")
    assert "snippets about" not in text
    assert len(calls) == 1


async def test_skills_always_in_full_others_summarised(workspace: Path, tmp_path: Path) -> None:
    skill(workspace, "weather", "description: Forecasts from wttr.in.", "weather-body-marker")
    skill(
        workspace,
        "video",
        "description: Cut videos.\nrequires:\n  bins: [definitely-not-a-binary-xyz]\n"
        "  env: [CLAWGATE_TEST_UNSET_VAR]",
    )
    builder = ContextBuilder(workspace)
    text = await prompt(builder, Trust.OWNER)
    # The built-in memory skill is always on: its body is in full.
    assert "grep -i -n" in text and "HISTORY.md" in text
    assert "weather-body-marker" not in text
    assert "- weather: Forecasts from wttr.in." in text
    assert str(Path("skills") / "weather" / "SKILL.md") in text
    assert (
        "- video: Cut videos. (unavailable: missing bin: definitely-not-a-binary-xyz, "
        "env: CLAWGATE_TEST_UNSET_VAR)" in text
    )


async def test_shared_chats_get_skill_names_without_bodies_or_paths(workspace: Path) -> None:
    skill(workspace, "weather", "description: Forecasts.")
    text = await prompt(ContextBuilder(workspace), Trust.GROUP)
    assert "- weather: Forecasts." in text
    assert "- memory:" in text
    assert "SKILL.md" not in text
    assert "grep -i -n" not in text


async def test_workspace_skill_overrides_builtin(workspace: Path) -> None:
    skill(
        workspace, "memory", "name: memory\ndescription: Mine.\nalways: true", "my-own-memory-rules"
    )
    text = await prompt(ContextBuilder(workspace), Trust.OWNER)
    assert "my-own-memory-rules" in text
    assert "grep -i -n" not in text
    skills = load_skills(workspace)
    assert [s.name for s in skills] == ["memory"]
    assert skills[0].path == workspace / "skills" / "memory" / "SKILL.md"


def test_builtin_memory_skill_is_always_on() -> None:
    [memory] = load_skills(Path("/nonexistent"), BUILTIN_SKILLS_DIR)
    assert memory.name == "memory" and memory.always and memory.available
    for needle in ("memory/MEMORY.md", "memory/HISTORY.md", "[YYYY-MM-DD HH:MM]", "grep -i -n"):
        assert needle in memory.body


def test_broken_skills_are_skipped_with_a_warning(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    skill(workspace, "broken", "name: [unclosed\ndescription: x")
    skill(workspace, "notamap", "- just\n- a list")
    skill(workspace, "badalways", "always: sometimes")
    write(workspace / "skills" / "unterminated" / "SKILL.md", "---\nname: x\n")
    write(workspace / "skills" / "plain" / "SKILL.md", "No front matter, just words.")
    skill(workspace, "zeta", "description: Last.")
    skill(workspace, "alpha", "description: First.")
    (workspace / "skills" / "empty-folder").mkdir()
    with caplog.at_level(logging.WARNING, logger="clawgate.agent.skills_loader"):
        skills = load_skills(workspace)
    assert [s.name for s in skills] == ["alpha", "memory", "plain", "zeta"]
    plain = next(s for s in skills if s.name == "plain")
    assert plain.body == "No front matter, just words." and not plain.always
    warned = caplog.text
    for folder in ("broken", "notamap", "badalways", "unterminated"):
        assert folder in warned


async def test_build_messages_prepends_system(workspace: Path) -> None:
    builder = ContextBuilder(workspace)
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    messages = builder.build_messages("SYSTEM", history)
    assert messages == [{"role": "system", "content": "SYSTEM"}, *history]


async def test_an_unchanged_workspace_is_not_read_again(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = ContextBuilder(workspace, builtin_skills_dir=workspace / "none")
    reads: list[bool] = []
    read_snapshot = builder._read_snapshot

    def counting(owner: bool):  # type: ignore[no-untyped-def]
        reads.append(owner)
        return read_snapshot(owner)

    monkeypatch.setattr(builder, "_read_snapshot", counting)
    first = await prompt(builder, Trust.OWNER)
    assert await prompt(builder, Trust.OWNER) == first
    assert reads == [True]

    # A new skill folder changes its parent's listing: the next turn lists it.
    skill(workspace, "weather", "description: rain or shine")
    assert "weather: rain or shine" in await prompt(builder, Trust.OWNER)
    # An edited file and a new MEMORY.md are seen too.
    write(workspace / "SOUL.md", "# Soul\nrenewed-marker")
    write(workspace / "memory" / "MEMORY.md", "memory-marker-2")
    text = await prompt(builder, Trust.OWNER)
    assert "renewed-marker" in text and "memory-marker-2" in text
    assert len(reads) == 3
    assert await prompt(builder, Trust.OWNER) == text and len(reads) == 3

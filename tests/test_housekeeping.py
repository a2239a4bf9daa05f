import os
import time

from clawgate.agent.session import Archived, Message, SessionStore
from clawgate.gateway.ops.housekeeping import DAY, sweep
from clawgate.kernel.config import AgentConfig, Config, HousekeepingConfig


def _age(path, days):
    then = time.time() - days * DAY
    os.utime(path, (then, then))


async def _archived(workspace, key, landed):
    store = SessionStore(workspace / "sessions")
    session = await store.get(key)
    store.append(session, Message(role="user", content="hello"))
    path = await store.archive(session)
    if landed:
        store.append(session, Archived())
    return path


async def test_sweep_respects_ages_and_never_drops_an_unarchived_transcript(tmp_path):
    workspace = tmp_path / "ws"
    config = Config(
        workspace=workspace,
        data_dir=tmp_path / "data",
        agent=AgentConfig(),
        housekeeping=HousekeepingConfig(
            media_days=30, archive_days=100, versions_days=10, keep_newest=0
        ),
    )
    old_media = workspace / "media" / "telegram" / "1" / "old.jpg"
    new_media = workspace / "public" / "media" / "telegram" / "2" / "new.jpg"
    old_public = workspace / "public" / "media" / "discord" / "3" / "old.png"
    for path in (old_media, new_media, old_public):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 1000)
    _age(old_media, 31)
    _age(old_public, 45)
    landed = await _archived(workspace, "telegram:1", landed=True)
    pending = await _archived(workspace, "telegram:2", landed=False)
    _age(landed, 200)
    _age(pending, 200)
    versions = workspace / "memory" / ".versions"
    versions.mkdir(parents=True)
    (versions / "MEMORY.old.md").write_text("old")
    (versions / "MEMORY.new.md").write_text("new")
    _age(versions / "MEMORY.old.md", 11)

    dry = sweep(config, dry_run=True)
    assert dry.removed == {"media files": 2, "archived transcripts": 1, "memory versions": 1}
    assert old_media.exists() and landed.exists()

    report = sweep(config)
    assert report.removed == dry.removed and report.freed >= 2000
    assert not old_media.exists() and not old_public.exists() and new_media.exists()
    assert not landed.exists()
    assert pending.exists() and report.kept_unarchived == 1
    assert (versions / "MEMORY.new.md").exists() and not (versions / "MEMORY.old.md").exists()
    assert "2 media files" in report.summary()


def test_zero_days_keeps_everything(tmp_path):
    workspace = tmp_path / "ws"
    config = Config(
        workspace=workspace,
        agent=AgentConfig(),
        housekeeping=HousekeepingConfig(media_days=0, archive_days=0, versions_days=0),
    )
    old = workspace / "media" / "x.jpg"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"x")
    _age(old, 10_000)
    assert sweep(config).freed == 0 and old.exists()

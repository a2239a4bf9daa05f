"""Backup, verify, restore and export of a large installation: seconds and archive size.

The install: `--sessions` transcripts of `--messages` messages each (with the consolidation
and delivery records a gateway writes), a MEMORY.md and HISTORY.md, daily logs, and
`--media-mb` of downloads. Each step runs through the library functions the commands call
(no progress bar, no process start). Export runs twice: the second is the no-change re-run.

Run: python bench/moving.py [--sessions 200] [--messages 500] [--media-mb 50]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from clawgate.gateway.moving.backup import write_backup
from clawgate.gateway.moving.export import export_tree
from clawgate.gateway.moving.restore import restore_backup
from clawgate.gateway.moving.verify import verify_backup
from clawgate.kernel.config import load_config

TEXT = "Could you look at the notes from yesterday and tell me what we decided? " * 3


def build(home: Path, sessions: int, messages: int, media_mb: int) -> Path:
    workspace = home / "workspace"
    (workspace / "sessions" / "archive").mkdir(parents=True)
    (workspace / "memory").mkdir()
    (workspace / "media").mkdir()
    for s in range(sessions):
        lines = [{"type": "session", "key": f"telegram:{s}", "version": 1, "first_seq": 1}]
        for seq in range(1, messages + 1):
            role = "user" if seq % 2 else "assistant"
            lines.append({"seq": seq, "role": role, "content": f"{seq} {TEXT}"})
            if role == "assistant":
                lines.append({"type": "delivery", "seq": seq, "status": "sent"})
        lines.append(
            {"type": "consolidation", "from_seq": 1, "to_seq": messages, "mode": "trimmed"}
        )
        path = workspace / "sessions" / f"telegram_{s}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (workspace / "memory" / "MEMORY.md").write_text("- a fact\n" * 500)
    (workspace / "memory" / "HISTORY.md").write_text(f"[2026-12-01 10:00] {TEXT}\n\n" * 2000)
    for day in range(1, 29):
        (workspace / "memory" / f"2026-11-{day:02d}.md").write_text(f"- 10:00 {TEXT}\n" * 20)
    for n in range(media_mb):
        (workspace / "media" / f"photo{n}.jpg").write_bytes(os.urandom(1 << 20))
    config = home / "config.toml"
    config.write_text(
        f'workspace = "{workspace}"\ndata_dir = "{home}"\n[agent]\napi_key = "sk-bench-0123456789abcdef"\n'
    )
    return config


def timed(label: str, work, *args, **kwargs):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = work(*args, **kwargs)
    print(f"{label:<32} {time.perf_counter() - start:7.2f} s")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--media-mb", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config_path = build(root / "home", args.sessions, args.messages, args.media_mb)
        config = load_config(config_path, environ={})
        size = sum(p.stat().st_size for p in (root / "home").rglob("*") if p.is_file())
        print(
            f"install: {args.sessions} transcripts x {args.messages} messages, "
            f"{args.media_mb} MB media, {size / 1e6:.1f} MB in all"
        )
        archive = root / "b.tar.gz"
        result = timed("backup", write_backup, config, config_path, archive, agents=["main"])
        print(f"{'archive':<32} {result.size / 1e6:7.1f} MB, {result.files} files")
        report = timed("backup verify", verify_backup, archive)
        assert report.ok, report.problems
        timed("restore", restore_backup, archive, root / "restored")
        first = timed(
            "export (first run)", export_tree, config, config_path, root / "export", ["main"]
        )
        again = timed(
            "export (no change)", export_tree, config, config_path, root / "export", ["main"]
        )
        print(f"{'export files written':<32} {first.written} then {again.written}")


if __name__ == "__main__":
    main()

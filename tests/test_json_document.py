"""The kernel's one JSON-document store: load, locked update, atomic write, fingerprint."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from clawgate.kernel.errors import DocumentDamaged
from clawgate.kernel.json_document import JsonDocument


class Counters(BaseModel):
    version: int = 1
    counts: dict[str, int] = {}


def counters(path: Path) -> JsonDocument[Counters]:
    return JsonDocument.of_model(path, Counters)


def test_missing_file_loads_as_the_default(tmp_path: Path) -> None:
    doc = counters(tmp_path / "none" / "c.json")
    assert doc.load() == Counters()
    assert doc.fingerprint() is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "the file is empty"),
        (b"  \n", "the file is empty"),
        (b'{"version": 1, "counts": {', "not valid JSON"),
        (b'{"version": 1, "counts": {"a": "many"}}', "counts.a"),
        (b"\xff\xfe{}", "not valid UTF-8"),
    ],
)
def test_garbled_file_raises_and_update_writes_nothing(
    tmp_path: Path, content: bytes, problem: str
) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(content)
    doc = counters(path)
    with pytest.raises(DocumentDamaged, match=problem) as raised:
        doc.load()
    assert "\n" not in str(raised.value)
    with pytest.raises(DocumentDamaged):
        doc.update(lambda c: c.counts.update(a=1))
    assert path.read_bytes() == content


def test_repair_overwrites_a_garbled_file_with_the_change(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text("{not json")
    doc = counters(path)
    doc.update(lambda c: c.counts.update(a=1), repair=True)
    assert doc.load().counts == {"a": 1}


def test_update_returns_the_result_and_writes_atomically_0600(tmp_path: Path) -> None:
    doc = counters(tmp_path / "sub" / "c.json")
    assert doc.update(lambda c: c.counts.setdefault("a", 7)) == 7
    assert json.loads(doc.path.read_text()) == {"version": 1, "counts": {"a": 7}}
    assert doc.path.stat().st_mode & 0o777 == 0o600
    assert not [p for p in doc.path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_failing_change_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    doc = counters(tmp_path / "c.json")
    doc.update(lambda c: c.counts.update(a=1))
    before = doc.path.read_bytes()

    def half_then_fail(c: Counters) -> None:
        c.counts["a"] = 2
        raise RuntimeError("changed my mind")

    with pytest.raises(RuntimeError):
        doc.update(half_then_fail)
    assert doc.path.read_bytes() == before


def test_fingerprint_changes_on_every_write_and_not_on_a_no_op(tmp_path: Path) -> None:
    doc = counters(tmp_path / "c.json")
    seen = {doc.fingerprint()}
    for n in range(5):
        # Same size each time: the inode of the atomic replace tells them apart.
        doc.update(lambda c, n=n: c.counts.update(a=n))
        seen.add(doc.fingerprint())
    assert len(seen) == 6
    unchanged = doc.fingerprint()
    doc.update(lambda c: None)
    assert doc.fingerprint() == unchanged


def _bump(path: Path, name: str, times: int) -> None:
    doc = counters(path)
    for _ in range(times):
        doc.update(lambda c: c.counts.update({name: c.counts.get(name, 0) + 1}))


def test_concurrent_updaters_in_threads_lose_no_change(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    threads = [threading.Thread(target=_bump, args=(path, "n", 50)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert counters(path).load().counts == {"n": 200}


def test_concurrent_updaters_in_processes_lose_no_change(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_bump, args=(path, "n", 40)) for _ in range(2)]
    for worker in workers:
        worker.start()
    _bump(path, "n", 40)
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert counters(path).load().counts == {"n": 120}

"""Session file I/O: appends per second (write-only and fsync per turn) and reload time.

Reload is timed three times: messages only, and the same number of messages with the
records a gateway writes beside them (a delivery record per reply, a consolidation every 20
turns), parsed whole (`load_session`, as the CLI reads a file) and as the store reloads it
(`live_only`: the consolidated part stays on disk until something asks for it).

Run: python bench/session_io.py [--messages 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from clawgate.agent.session import (
    Consolidation,
    Delivery,
    Message,
    SessionStore,
    State,
    load_session,
)

TEXT = "Could you look at the notes from yesterday and tell me what we decided? " * 3


def _message(i: int) -> Message:
    return Message(role="user" if i % 2 == 0 else "assistant", content=f"{i} {TEXT}")


async def run(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(Path(tmp) / "sessions")

        session = await store.get("bench:write-only")
        start = time.perf_counter()
        for i in range(count):
            store.append(session, _message(i))
        write_only = count / (time.perf_counter() - start)

        late = []
        for i in range(200):  # append cost at the far end of a 10k-message file
            t = time.perf_counter()
            store.append(session, _message(i))
            late.append(time.perf_counter() - t)

        synced = await store.get("bench:fsync")
        start = time.perf_counter()
        for i in range(count):
            store.append(synced, _message(i))
            if i % 2 == 1:  # a turn = the user's message + the reply, then one fsync
                await store.sync(synced)
        with_fsync = count / (time.perf_counter() - start)

        loads = []
        for _ in range(5):
            t = time.perf_counter()
            loaded = load_session(session.path, session.key)
            loads.append((time.perf_counter() - t) * 1000)
        assert len(loaded.messages) == count + 200
        size = session.path.stat().st_size

        gateway = await store.get("bench:records")
        store.append(gateway, State(trust="owner"))
        for turn in range(count // 2):
            store.append(gateway, _message(0))
            reply = store.append(gateway, _message(1))
            store.append(gateway, Delivery(seq=reply.seq, status="sent"))
            if turn % 20 == 19:
                first = gateway.last_consolidated + 1
                store.append(gateway, Consolidation(from_seq=first, to_seq=reply.seq, mode="llm"))
        with_records = []
        for _ in range(5):
            t = time.perf_counter()
            loaded = load_session(gateway.path, gateway.key)
            with_records.append((time.perf_counter() - t) * 1000)
        assert len(loaded.messages) == count // 2 * 2
        live_only = []
        for _ in range(5):
            t = time.perf_counter()
            live = load_session(gateway.path, gateway.key, live_only=True)
            live_only.append((time.perf_counter() - t) * 1000)
        assert live.unconsolidated() == loaded.unconsolidated()

    print(f"messages: {count}  file: {size / 1e6:.1f} MB")
    print(f"append write-only:     {write_only:,.0f} appends/s")
    print(f"append at message {count}: p50 {statistics.median(late) * 1e6:.0f} us")
    print(f"append + fsync/turn:   {with_fsync:,.0f} appends/s")
    print(
        f"reload {count + 200} messages: min {min(loads):.1f} ms, median {statistics.median(loads):.1f} ms"
    )
    print(
        f"reload {len(loaded.messages)} messages + {len(loaded.records)} records: "
        f"min {min(with_records):.1f} ms, median {statistics.median(with_records):.1f} ms"
    )
    print(
        f"reload the same, live window only (the store's reload): "
        f"min {min(live_only):.1f} ms, median {statistics.median(live_only):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=10_000)
    asyncio.run(run(parser.parse_args().messages))


if __name__ == "__main__":
    main()

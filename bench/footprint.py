"""The running gateway's resident memory and its first replies after a start.

For each embedder setting (the default "builtin" and "none") a real `clawgate gateway`
process is started against the loopback fakes (FakeTelegram for the chat, FakeLLM for the
OpenAI-compatible model, both in this process) with a workspace whose memory holds a few
notes, so an owner's turn runs auto-recall. Two starts per setting:

- "at start": the owner writes the moment the log says "gateway running", while the
  background warm-up may still run; then two more messages, the last taken as steady.
- "after warm-up": the owner writes `--settle` seconds after "gateway running"; then the
  same. Resident memory (VmRSS) is read after that first reply.

Each reply time runs from the update being queued at the fake to the reply arriving there
(the long poll, the turn, the model round trip, sendMessage): the steady reply is the same
path, so "first - steady" is what a start costs the first message.

Run: python bench/footprint.py [--settle 8] [--embedders builtin none] [--litellm]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

OWNER = 1001
READY = "gateway running"
NOTES = "\n".join(
    f"- {topic}: noted on day {day}" for day, topic in enumerate(("tea", "bikes", "taxes"))
)


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def _reply_time(telegram: FakeTelegram, text: str) -> float:
    start = time.perf_counter()
    telegram.user_says(OWNER, text)
    await telegram.next_message(OWNER, timeout=60)
    return time.perf_counter() - start


async def one_start(embedder: str, settle: float, direct: bool) -> tuple[list[float], float]:
    """Reply times (first, second, third) and VmRSS in MB after the first reply."""
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        async with FakeTelegram() as telegram, FakeLLM() as llm:
            config = write_config(
                home,
                agent={**fake_model(llm, request_timeout=60), "direct_http": direct},
                telegram=fake_telegram(telegram, (OWNER,)),
                extra=f'[memory]\nembedding_model = "{embedder}"\n',
            )
            (home / "workspace" / "memory").mkdir(parents=True)
            (home / "workspace" / "memory" / "MEMORY.md").write_text(NOTES + "\n")
            async with ClawgateProcess(home, "--config", str(config), "gateway") as gateway:
                await gateway.wait_for_log(READY, 120)
                await asyncio.sleep(settle)
                times = [await _reply_time(telegram, "what do I drink, tea?")]
                rss = _rss_mb(gateway.process.pid)
                for text in ("and bikes?", "and taxes?"):
                    await asyncio.sleep(0.2)
                    times.append(await _reply_time(telegram, text))
    return times, rss


async def main_async(settle: float, embedders: list[str], direct: bool) -> None:
    print(f"model path {'direct' if direct else 'litellm'}; reply times in ms, RSS in MB")
    print(f"{'embedder':>9} {'when':>14} {'first':>8} {'second':>8} {'steady':>8} {'RSS':>7}")
    for embedder in embedders:
        for label, wait in (("at start", 0.0), ("after warm-up", settle)):
            times, rss = await one_start(embedder, wait, direct)
            first, second, steady = (t * 1000 for t in times)
            print(
                f"{embedder:>9} {label:>14} {first:>8.1f} {second:>8.1f} {steady:>8.1f} {rss:>7.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--settle", type=float, default=8.0)
    parser.add_argument("--embedders", nargs="+", default=["builtin", "none"])
    parser.add_argument("--litellm", dest="direct", action="store_false")
    args = parser.parse_args()
    asyncio.run(main_async(args.settle, args.embedders, args.direct))


if __name__ == "__main__":
    main()

"""What the bwrap sandbox adds to one exec call.

Runs the exec tool the way a turn does (ToolRegistry.execute with the turn's ToolContext,
no approval asked) on a small workspace, `--runs` times per mode and command, alternating
the modes so a busy machine weighs on both alike:

  none   the per-call subreaper (python -I -S reaper.py), then /bin/sh
  bwrap  bubblewrap (new PID, IPC, UTS namespaces; network kept), then /bin/sh

Figures: p50 and p95 of the call's wall time in ms per mode, and the difference of the
medians: the sandbox's cost on a turn that runs one command. Nothing is asserted.

Run: python bench/exec_sandbox.py [--runs 200]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.tools import default_tools
from clawgate.agent.tools.base import ToolContext
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.storage import DiskWriter

COMMANDS = ("true", "ls -la && cat notes.md | wc -l")


def context(workspace: Path, sandbox: str) -> ToolContext:
    disk = DiskWriter()
    return ToolContext(
        workspace=workspace,
        trust=Trust.OWNER,
        session_key="cli:bench",
        config=ToolsConfig(exec_approval="never", exec_sandbox=sandbox),  # type: ignore[arg-type]
        secrets=(),
        writer=disk,
        memory_lock=MemoryLock(workspace, disk),
    )


def prepare(folder: str) -> Path:
    workspace = Path(folder).resolve()
    (workspace / "notes.md").write_text("- milk\n- eggs\n")
    return workspace


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def main(runs: int) -> None:
    if shutil.which("bwrap") is None:
        raise SystemExit("bwrap is not installed (apt-get install bubblewrap)")
    registry = ToolRegistry(default_tools())
    with tempfile.TemporaryDirectory() as folder:
        workspace = prepare(folder)
        modes = {"none": context(workspace, "none"), "bwrap": context(workspace, "bwrap")}
        for command in COMMANDS:
            times: dict[str, list[float]] = {mode: [] for mode in modes}
            for _ in range(runs):
                for mode, ctx in modes.items():
                    started = time.perf_counter()
                    result = await registry.execute("exec", {"command": command}, ctx)
                    times[mode].append((time.perf_counter() - started) * 1000)
                    if not result.endswith("exit code 0"):
                        raise SystemExit(f"{mode}: {command!r} failed: {result}")
            print(f"exec {command!r}, {runs} calls per mode:")
            for mode, values in times.items():
                print(
                    f"  {mode:6} p50 {statistics.median(values):7.1f} ms"
                    f"   p95 {percentile(values, 0.95):7.1f} ms"
                )
            extra = statistics.median(times["bwrap"]) - statistics.median(times["none"])
            print(f"  sandbox overhead (p50 difference): {extra:+.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(main(parser.parse_args().runs))

"""Wall time of `clawgate --help` (the console script of this venv), run N times: the median
and the fastest. The budget is 150 ms on a small machine; the commands are registered lazily
(gateway/cli/root.py), so this is Python's start, typer's import and the root group. Prints
figures; asserts nothing.

Run: python bench/cli_help.py [--runs 21]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timings(runs: int) -> list[float]:
    exe = Path(sys.executable).with_name("clawgate")
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(exe), "--help"], capture_output=True, check=True)
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    runs = timings(parser.parse_args().runs)
    print(
        f"clawgate --help: median {statistics.median(runs) * 1000:.0f} ms, "
        f"fastest {min(runs) * 1000:.0f} ms ({len(runs)} runs)"
    )


if __name__ == "__main__":
    main()

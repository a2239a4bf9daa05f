"""The gateway's heap setting (gateway/daemon/heap.py): large blocks freed after a large
block was freed go back to the system instead of staying resident in the heap."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Frees one large block (which, unset, raises glibc's threshold for mapping blocks), then
# allocates 32 MiB in blocks of 512 KiB, each followed by a small block that stays, and
# frees the large ones: the MiB still resident afterwards.
CHILD = """
import sys
from pathlib import Path
from clawgate.gateway.daemon.heap import keep_large_blocks_mapped

def rss_mib():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines()
                if l.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024

if sys.argv[1] == "set":
    keep_large_blocks_mapped()
big = bytearray(8 << 20)
del big
before = rss_mib()
large, small = [], []
for _ in range(64):
    large.append(bytearray(512 << 10))
    small.append(bytearray(1 << 10))
del large
print(rss_mib() - before)
"""


def resident_after(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's heap")
def test_large_blocks_freed_after_a_large_one_leave_the_heap() -> None:
    assert resident_after("unset") > 24  # what the gateway would keep without the setting
    assert resident_after("set") < 4

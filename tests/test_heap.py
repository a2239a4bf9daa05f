"""kernel/heap.py: what start-up freed leaves the process's resident memory once the warm-up
is over (the gateway calls it then)."""

from __future__ import annotations

import subprocess
import sys

# Freed blocks between kept ones: glibc cannot shrink its heap past a kept block by itself,
# so those pages stay resident until they are trimmed.
SCRIPT = """
import re
from clawgate.kernel.heap import give_back_free_heap

def rss_mb():
    status = open("/proc/self/status").read()
    return int(re.search(r"VmRSS:\\s+(\\d+)", status).group(1)) // 1024

blocks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]
kept = blocks[::100]
del blocks
before = rss_mb()
print(give_back_free_heap(), before, rss_mb())
"""


def test_the_freed_heap_is_given_back() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True
    ).stdout.split()
    trimmed, before, after = out[0] == "True", int(out[1]), int(out[2])
    assert trimmed  # this machine's libc is glibc
    assert before - after > 100, (before, after)  # of ~190 MB freed

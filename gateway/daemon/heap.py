"""glibc's heap, set for a process that runs for weeks.

glibc serves a block of 128 KiB or more from a mapping of its own and unmaps it when it is
freed, but the first time such a block is freed it raises that threshold to the block's
size (up to 32 MiB): from then on blocks up to that size come from the heap, where a few
long-lived neighbours keep the freed pages resident. A gateway frees large blocks while it
starts (files read whole, the embedder's tables while they load), so it would stay
megabytes above what it holds. Setting the threshold turns that adjustment off (mallopt(3));
an owner's MALLOC_MMAP_THRESHOLD_ is left as they set it, and a libc without mallopt is left
alone.
"""

from __future__ import annotations

import ctypes
import os

M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024  # glibc's own starting value


def keep_large_blocks_mapped() -> None:
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)

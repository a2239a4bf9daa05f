"""Giving freed heap back to the system once start-up is over.

Start-up allocates and frees a lot (imports, the config models, the memory index's first
load, the embedder's tokenizer): glibc keeps those freed pages in its arenas, where they
count as the gateway's resident memory for as long as it runs. `malloc_trim(0)` hands every
whole free page back; it changes no object, so it is safe at any moment. Elsewhere than
glibc (musl, macOS) there is nothing to call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from functools import cache
from typing import Any

log = logging.getLogger(__name__)


@cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def give_back_free_heap() -> bool:
    """Return the heap's free pages to the system (glibc); False where there is no such call."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True

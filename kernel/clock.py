"""The two clocks that code weighing "how long ago" must tell apart.

The wall clock (`time.time`) is what a person, NTP or a hypervisor may set: it can jump a
day or a year in either direction while the gateway runs. The elapsed clock
(`CLOCK_BOOTTIME` on Linux: seconds since the machine booted, suspend included) is never
set, so the difference of two of its readings is time that really passed, also between two
processes of one boot (the boot id tells them apart from readings of an earlier boot).
Where there is no `CLOCK_BOOTTIME`, `time.monotonic` stands in (it stops while suspended).

Code that decides by age (housekeeping, the scheduler's missed one-shots) takes a `Clock`,
so a test moves the wall clock without moving the elapsed one, as a real jump does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def since_boot() -> float:
    """Seconds that really passed since the machine booted; never set, never jumps."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


def boot_id() -> str | None:
    """This boot's identity (Linux), so a `since_boot` reading from a file is only compared
    with one of the same boot; None where the system does not say."""
    try:
        return _BOOT_ID.read_text().strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class Clock:
    """The wall clock, the elapsed clock and the boot they belong to."""

    wall: Callable[[], float] = time.time
    elapsed: Callable[[], float] = since_boot
    boot: Callable[[], str | None] = boot_id


SYSTEM_CLOCK = Clock()

"""libfaketime (Debian package `libfaketime`) for `clawgate` children: a clock set apart
from the real one (clock jumps), or running faster than it (waits of a minute or more).

Absent libfaketime the tests that need it skip, except with CI=true, where they must run
(.ci/run installs it). A child with LD_PRELOAD is exec'd, never forked (tests/process.py).
"""

from __future__ import annotations

import glob
import os

import pytest


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))
    if found:
        return found[0]
    if os.environ.get("CI") == "true":
        pytest.fail("libfaketime missing: CI must run the tests that move a child's clock")
    pytest.skip("no libfaketime (apt-get install libfaketime)")


def sped_up(factor: int) -> dict[str, str]:
    """The environment of a child whose clocks, wall and monotonic, run `factor` times as
    fast as the real ones from its start. libfaketime divides the waits the child asks of
    the kernel (epoll_wait, poll, nanosleep) by the same factor, so a minute the child waits
    by its own clock passes in 60 / factor real seconds. Its timeouts shrink with it: keep
    the factor small enough that the fakes answer within the child's shortest timeout."""
    return {"LD_PRELOAD": libfaketime(), "FAKETIME": f"+0 x{factor}"}

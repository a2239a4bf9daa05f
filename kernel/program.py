"""How a person runs clawgate again: the command the texts we show them should name.

Plain `clawgate` when that is on PATH and is this very program; else this program's real
path (the README's install puts it in `.venv/bin/`, which is usually not on PATH), so a
command copied from onboard's advice or the bot's pairing reply works as pasted.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def command() -> str:
    me = Path(sys.argv[0]).resolve()
    found = shutil.which("clawgate")
    if found and Path(found).resolve() == me:
        return "clawgate"
    return str(me) if me.name == "clawgate" else "clawgate"

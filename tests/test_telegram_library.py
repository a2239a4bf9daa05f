"""python-telegram-bot is imported without the packages it would load for features clawgate
does not use (channels/telegram/library.py), and they stay importable for everything else."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, sys
import clawgate.channels.telegram
loaded = {name: name in sys.modules for name in ("telegram", "cryptography", "pygments", "rich")}
import cryptography.hazmat.primitives.hashes, pygments.lexers
from telegram.request import HTTPXRequest
HTTPXRequest()
print(json.dumps(loaded))
"""


def test_telegram_comes_without_passport_crypto_or_httpx_s_command_line_tool() -> None:
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {
        "telegram": True,
        "cryptography": False,
        "pygments": False,
        "rich": False,
    }

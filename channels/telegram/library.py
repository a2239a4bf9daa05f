"""python-telegram-bot, imported without the optional parts clawgate never uses.

Two of its imports load a package whenever it is installed, for a feature clawgate does not
use, and both packages are installed for something else:
- `telegram` imports `cryptography` for Telegram Passport decryption alone (clawgate's
  `Bot` is never given a private key); pyjwt, which the MCP SDK uses, installs it. ~6.5 MB
  of a gateway's memory (OpenSSL's bindings).
- `httpx`, its HTTP client, imports its own command-line tool, with rich and pygments,
  when click, rich and pygments are installed (typer and clawgate's progress bars install
  them). ~5 MB.

Each is hidden for that one import, which the library takes as it takes the package not
being installed (`except ImportError`); whatever imports it afterwards gets the real one.
Import this module before `telegram`: the package's __init__ does, and so do the commands
that call the Bot API themselves.
"""

from __future__ import annotations

import sys

# A name set to None in sys.modules makes its import raise ImportError.
UNUSED = ("cryptography", "pygments")

if "telegram" not in sys.modules:
    hidden = [name for name in UNUSED if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import telegram  # noqa: F401
    finally:
        for name in hidden:
            del sys.modules[name]

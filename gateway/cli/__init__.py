"""The `clawgate` command line (typer). `root.py` assembles it: the top-level options,
the chat commands and the sub-apps, one module each; `context.py` is what they share.
Plain `clawgate --help` is answered by `fast_help.py` before typer is imported."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["app", "main"]


def main() -> None:
    from clawgate.gateway.cli.fast_help import answered

    if answered(sys.argv[1:]):
        return
    from clawgate.gateway.cli.root import main as run

    run()


def __getattr__(name: str) -> Any:
    # `app` is typer's; importing this package must not load typer for the fast help.
    if name == "app":
        from clawgate.gateway.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

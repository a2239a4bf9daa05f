"""The `clawgate` command line (typer). `root.py` assembles it: the top-level options,
the chat commands and the sub-apps, one module each; `context.py` is what they share."""

from clawgate.gateway.cli.root import app, main

__all__ = ["app", "main"]

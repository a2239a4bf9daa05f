"""The `clawgate` command line (typer). `root.py` assembles it: the top-level options and
the table of commands, each in its own module, imported only when it runs; `context.py` is
what they share."""

from clawgate.gateway.cli.root import app, main

__all__ = ["app", "main"]

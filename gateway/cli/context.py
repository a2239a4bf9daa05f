"""What every `clawgate` command shares: the top-level options, the config they point at,
and how a command stops with one line.

The root callback stores one `CliContext` as typer's context object; commands reach it with
`cli_context(ctx)` and load the config through it, at most once per run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer

if TYPE_CHECKING:
    from clawgate.kernel.config import Config


@dataclass
class CliContext:
    """The options given before the command, and the config they name."""

    # --config as given; None means $CLAWGATE_CONFIG, else ~/.clawgate/config.toml.
    config_option: Path | None = None
    _config: Config | None = field(default=None, init=False, repr=False)

    @property
    def config_path(self) -> Path:
        """The config file this run reads (it may not exist: then defaults apply)."""
        from clawgate.kernel.config import default_config_path

        return self.config_option or default_config_path()

    def config(self) -> Config:
        """The loaded, validated config; raises ConfigError, which the root reports."""
        if self._config is None:
            from clawgate.kernel.config import load_config

            self._config = load_config(self.config_option)
        return self._config


def cli_context(ctx: typer.Context) -> CliContext:
    """The run's `CliContext`; a sub-app invoked on its own gets the defaults."""
    return ctx.ensure_object(CliContext)


def fail(message: str, code: int = 2) -> NoReturn:
    """Stop the command with `clawgate: <message>` on stderr. Exit 2 is a usage or setup
    problem (systemd does not restart on it), 1 a failure of the work itself."""
    typer.echo(f"clawgate: {message}", err=True)
    raise typer.Exit(code)

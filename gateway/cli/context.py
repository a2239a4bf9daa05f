"""What every `clawgate` command shares: the top-level options, the config they point at,
the agent a command works on, and how a command stops with one line.

The root callback stores one `CliContext` as typer's context object; commands reach it with
`cli_context(ctx)` and load the config through it, at most once per run. A command that
touches a workspace declares `agent: AgentOption = None`: the option's callback records the
name here, so `config()` is that agent's effective config (its workspace, data_dir, model)
for the command and for every helper it hands `ctx` to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from clawgate.kernel.config import Config


@dataclass
class CliContext:
    """The options given before the command, and the config they name."""

    # --config as given; None means $CLAWGATE_CONFIG, else ~/.clawgate/config.toml.
    config_option: Path | None = None
    # --agent as given; None means the config's default agent.
    agent: str | None = None
    _file_config: Config | None = field(default=None, init=False, repr=False)
    _config: Config | None = field(default=None, init=False, repr=False)

    @property
    def config_path(self) -> Path:
        """The config file this run reads (it may not exist: then defaults apply)."""
        from clawgate.kernel.config import default_config_path

        return self.config_option or default_config_path()

    def file_config(self) -> Config:
        """The whole config, every agent in it; raises ConfigError, which the root reports.
        What the gateway itself reads (its data_dir holds status.json and the control
        socket)."""
        if self._file_config is None:
            from clawgate.kernel.config import load_config

            self._file_config = load_config(self.config_option)
        return self._file_config

    def config(self) -> Config:
        """The chosen agent's effective config; an unknown --agent is a ConfigError naming
        the agents there are."""
        if self._config is None:
            self._config = self.file_config().for_agent(self.agent)
        return self._config


def cli_context(ctx: typer.Context) -> CliContext:
    """The run's `CliContext`; a sub-app invoked on its own gets the defaults."""
    return ctx.ensure_object(CliContext)


def _choose_agent(ctx: typer.Context, value: str | None) -> str | None:
    if value is not None:
        cli_context(ctx).agent = value
    return value


# The one `--agent` of every workspace command. Its value reaches the command through
# `cli_context(ctx).config()`, not through the parameter (hence expose_value=False).
AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent",
        metavar="NAME",
        help="The agent to act on (default: the config's default agent; see `clawgate agents`).",
        callback=_choose_agent,
        expose_value=False,
    ),
]


def fail(message: str, code: int = 2) -> NoReturn:
    """Stop the command with `clawgate: <message>` on stderr. Exit 2 is a usage or setup
    problem (systemd does not restart on it), 1 a failure of the work itself."""
    typer.echo(f"clawgate: {message}", err=True)
    raise typer.Exit(code)

"""`clawgate onboard`'s setup: the model, its key and the chat bots, each checked live
before anything is written, then set in the config file with its comments kept.

Answers come from flags (`--model`, `--api-key-env`, `--telegram-token`, ... - unattended)
and, when stdin is a terminal and `--yes` is not given, from questions for whatever is still
missing. The live checks are the ones `clawgate doctor --online` runs: a one-token model
call, Telegram's getMe, Discord's /users/@me.

With an agent name (`clawgate onboard --agent NAME`) the same answers land in that agent's
section instead: `[agents.NAME]` takes the agent keys (model, api_key, ...) and its
workspace, `[agents.NAME.channels.<platform>]` its own bot; the questions and the checks
see that agent's effective config.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from pydantic import BaseModel, SecretStr

from clawgate.agent.llm.providers import KEY_VARIABLES, KEYLESS_PROVIDERS, provider
from clawgate.kernel.config import MAIN_AGENT, Config, load_config
from clawgate.kernel.config_hints import provider_missing
from clawgate.kernel.errors import ConfigError
from clawgate.kernel.storage import DiskWriter

CHECK_TIMEOUT = 20.0
MODEL_EXAMPLES = "openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, ollama/llama3.1"


class Setup(BaseModel):
    """What onboard sets in the config; None leaves a key as it is."""

    # Only an added agent's section gets one here; the main workspace is onboard's argument.
    workspace: Path | None = None
    model: str | None = None
    api_base: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    telegram_token: SecretStr | None = None
    discord_token: SecretStr | None = None

    def is_empty(self) -> bool:
        return all(value is None for value in self.model_dump().values())


def apply(document: tomlkit.TOMLDocument, setup: Setup, agent_name: str | None = None) -> list[str]:
    """Set the answers in a parsed config - in `[agents.<agent_name>]` when a name is given,
    else in `[agent]` and `[channels]`; the lines say what changed (secrets hidden)."""
    changed: list[str] = []
    # `root` holds workspace and channels, `agent` the model keys; `prefix`, `where` name them.
    if agent_name is None:
        root: Any = document
        agent, prefix, where = _table(document, "agent"), "", "agent."
    else:
        root = agent = _table(_table(document, "agents", holder=True), agent_name)
        prefix = where = f"agents.{agent_name}."
    if setup.workspace is not None:
        root["workspace"] = str(setup.workspace)
        changed.append(f"{prefix}workspace = {setup.workspace}")
    if setup.model is not None:
        agent["model"] = setup.model
        changed.append(f"{where}model = {setup.model}")
    if setup.api_base is not None:
        agent["api_base"] = setup.api_base
        changed.append(f"{where}api_base = {setup.api_base}")
    if setup.api_key is not None:
        agent["api_key"] = setup.api_key.get_secret_value()
        agent.pop("api_key_env", None)
        changed.append(f"{where}api_key = (hidden)")
    elif setup.api_key_env is not None:
        agent["api_key_env"] = setup.api_key_env
        agent.pop("api_key", None)
        changed.append(f"{where}api_key_env = {setup.api_key_env} (read from the environment)")
    for name, token in (("telegram", setup.telegram_token), ("discord", setup.discord_token)):
        if token is not None:
            section = _table(_table(root, "channels", holder=True), name)
            section["enabled"] = True
            section["token"] = token.get_secret_value()
            changed.append(f"{prefix}channels.{name}: enabled, token = (hidden)")
    return changed


def _table(parent: Any, name: str, *, holder: bool = False) -> Any:
    # A holder is a super-table: only `[agents.work]` headers, no bare `[agents]` line.
    if name not in parent:
        parent[name] = tomlkit.table(is_super_table=holder)
    return parent[name]


def edit_config(
    config_path: Path,
    change: Callable[[tomlkit.TOMLDocument], object],
    environ: Mapping[str, str] | None = None,
) -> tuple[str, Config]:
    """The config text with `change` applied to its parsed document (comments kept), and
    what it loads to - environment overrides included, as the gateway will read it
    (`environ` None: this process's); nothing is written. Raises ConfigError (one line)
    when the file does not parse or the result would not load."""
    text = config_path.read_text(encoding="utf-8") if config_path.exists() else ""
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(f"{config_path}: not valid TOML: {exc}") from None
    change(document)
    new_text = tomlkit.dumps(document)
    return new_text, load_config(config_path, environ, text=new_text)


def preview(
    config_path: Path, setup: Setup, environ: dict[str, str], agent_name: str | None = None
) -> tuple[str, Config]:
    """The config text with the answers applied, and what it loads to (with `agent_name`,
    that agent's effective config): nothing is written."""
    text, config = edit_config(
        config_path, lambda document: apply(document, setup, agent_name), environ
    )
    return text, config if agent_name is None else config.for_agent(agent_name)


def save(config_path: Path, text: str, writer: DiskWriter | None = None) -> None:
    # Atomic and private: the file holds the API key and the bot tokens.
    (writer or DiskWriter()).replace(config_path, text, mode=0o600)


async def check(config: Config, what: str, timeout: float = CHECK_TIMEOUT) -> tuple[bool, str]:
    """One live check ("model", "telegram" or "discord"): (passed, one line)."""
    from clawgate.gateway.ops.online import (
        load_model_libraries,
        ping_discord,
        ping_model,
        ping_telegram,
    )
    from clawgate.kernel.errors import one_line
    from clawgate.kernel.secrets import Redactor

    ping = {"model": ping_model, "telegram": ping_telegram, "discord": ping_discord}[what]
    if what == "model":
        await load_model_libraries(config)
    try:
        async with asyncio.timeout(timeout + 5):
            passed, detail = await ping(config, timeout)
    except TimeoutError:
        passed, detail = False, f"failed: no answer within {timeout:g} s"
    except Exception as exc:
        passed, detail = False, f"failed: {one_line(exc)}"
    return passed, Redactor(config.secrets())(detail)


@dataclass(frozen=True)
class SetupResult:
    """What onboard's setup did with the answers, for its closing summary."""

    saved: list[str] = field(default_factory=list)  # config lines written (secrets hidden)
    not_saved: list[str] = field(default_factory=list)  # answers given, left out, and why
    failed: list[str] = field(default_factory=list)  # saved although their check failed


class Asker:
    """The questions, through callables so tests and the CLI share one flow."""

    def __init__(
        self,
        prompt: Callable[..., str],
        confirm: Callable[..., bool],
        say: Callable[[str], None],
    ) -> None:
        self.prompt = prompt
        self.confirm = confirm
        self.say = say

    def text(self, question: str, default: str = "", *, hidden: bool = False) -> str:
        answer = self.prompt(
            question, default=default, show_default=bool(default) and not hidden, hide_input=hidden
        )
        return str(answer).strip()


def ask_model(asker: Asker, current: Config, setup: Setup) -> Setup:
    """Model, endpoint and key, asked for what the flags did not give."""
    agent = current.agent
    model = setup.model or asker.text(
        f"Model, as provider/name (e.g. {MODEL_EXAMPLES})", agent.model
    )
    while not model or provider_missing(model):
        asker.say(
            f"  {provider_missing(model)}."
            if model
            else "A model is needed: the assistant cannot answer without one."
        )
        model = asker.text("Model, as provider/name", "")
    api_base = setup.api_base
    if api_base is None and (provider(model) in KEYLESS_PROVIDERS or agent.api_base):
        api_base = asker.text(
            "API base URL (Enter for the provider's default)", agent.api_base or ""
        )
    elif api_base is None and provider(model) == "openai":
        api_base = asker.text(
            "API base URL, for an OpenAI-compatible server (Enter for OpenAI itself)",
            agent.api_base or "",
        )
    answers = setup.model_copy(update={"model": model, "api_base": api_base or None})
    if setup.api_key is not None or setup.api_key_env is not None:
        return answers
    if provider(model) in KEYLESS_PROVIDERS:
        return answers
    if agent.api_key is not None and not asker.confirm(
        "Replace the API key set now?", default=False
    ):
        return answers
    key = asker.text(
        "API key (input hidden; Enter to read it from an environment variable instead)",
        hidden=True,
    )
    if key:
        return answers.model_copy(update={"api_key": SecretStr(key)})
    variable = asker.text(
        "Environment variable that holds the key", KEY_VARIABLES.get(provider(model), "")
    )
    return answers.model_copy(update={"api_key_env": variable or None})


def ask_token(asker: Asker, name: str, current: Config) -> SecretStr | None:
    settings = getattr(current.channels, name)
    # An added agent's bot settings are inherited: a token given for it is its own bot.
    shares = current.agent_name != MAIN_AGENT and settings.enabled
    if settings.enabled and settings.token is not None and not shares:
        if not asker.confirm(f"{name.title()} is set up. Change its token?", default=False):
            return None
    where = {
        "telegram": "Telegram bot token, from @BotFather's /newbot",
        "discord": "Discord bot token, from the Developer Portal's Bot page",
    }[name]
    if shares:
        where = f"Its own {where}"
    skip = "Enter to share the main bot, with bindings" if shares else "Enter to skip"
    token = asker.text(f"{where} (input hidden; {skip})", hidden=True)
    return SecretStr(token) if token else None


async def run_setup(
    config_path: Path,
    flags: Setup,
    asker: Asker | None,
    *,
    live: bool = True,
    environ: dict[str, str],
    agent_name: str | None = None,
) -> SetupResult:
    """Ask (when `asker` is given) for what the flags left out, check it live, write it -
    into `[agents.<agent_name>]` when a name is given.

    Unattended, a failed check saves none of the answers and raises ConfigError; asked, the
    person decides whether to try again (as often as they like), save the answer anyway, or
    leave it out. Nothing is left out silently: the result says what was saved, what was
    not, and which saved answer failed its check.
    """
    if agent_name is None:
        current = load_config(config_path, environ)
    else:  # a new agent: what its section alone (the workspace) makes of it
        _, current = preview(config_path, Setup(workspace=flags.workspace), environ, agent_name)
    setup = flags
    outcome = _Outcome()
    if asker is not None:
        setup = await _ask_all(
            asker,
            config_path,
            current,
            setup,
            outcome,
            live=live,
            environ=environ,
            agent_name=agent_name,
        )
    elif live:
        _, config = preview(config_path, setup, environ, agent_name)
        wanted = [
            what
            for what, given in (
                ("model", setup.model or setup.api_key or setup.api_key_env or setup.api_base),
                ("telegram", setup.telegram_token),
                ("discord", setup.discord_token),
            )
            if given
        ]
        for what in wanted:
            passed, line = await check(config, what)
            if not passed:
                raise ConfigError(
                    f"{what} check {line}; none of the answers given was saved in "
                    f"{config_path} (--no-check saves them anyway)"
                )
    if setup.is_empty():
        return SetupResult(not_saved=outcome.not_saved)
    text, _ = preview(config_path, setup, environ, agent_name)
    save(config_path, text)
    return SetupResult(
        saved=apply(tomlkit.document(), setup, agent_name),
        not_saved=outcome.not_saved,
        failed=outcome.failed,
    )


@dataclass
class _Outcome:
    """What the questions left out or kept despite a failed check, as summary lines."""

    not_saved: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def settle(self, asker: Asker, what: str, line: str) -> bool:
        """The check of `what` failed and no other answer is coming: True to save it anyway."""
        if asker.confirm(f"Save these {what} settings anyway?", default=False):
            self.failed.append(f"{what}: saved, but its check {line}")
            return True
        self.not_saved.append(f"{what}: not saved (its check {line})")
        return False


async def _ask_all(
    asker: Asker,
    config_path: Path,
    current: Config,
    setup: Setup,
    outcome: _Outcome,
    *,
    live: bool,
    environ: dict[str, str],
    agent_name: str | None,
) -> Setup:
    asker.say("The model")
    while True:
        setup = ask_model(asker, current, setup)
        if not live:
            break
        _, config = preview(config_path, setup, environ, agent_name)
        asker.say("  checking the model with a one-word request...")
        passed, line = await check(config, "model")
        asker.say(f"  model: {line}")
        if passed:
            break
        if not asker.confirm("Try other model settings?", default=True):
            if not outcome.settle(asker, "model", line):
                setup = setup.model_copy(
                    update={"model": None, "api_base": None, "api_key": None, "api_key_env": None}
                )
            break
        # Offer the last answers as defaults; the key is asked again, never shown.
        last = {"model": setup.model or "", "api_base": setup.api_base}
        current = current.model_copy(update={"agent": current.agent.model_copy(update=last)})
        setup = setup.model_copy(
            update={"model": None, "api_base": None, "api_key": None, "api_key_env": None}
        )
    for name in ("telegram", "discord"):
        asker.say(f"\n{name.title()}")
        field_name = f"{name}_token"
        token = getattr(setup, field_name)
        while True:
            token = token or ask_token(asker, name, current)
            if token is None or not live:
                break
            answer = setup.model_copy(update={field_name: token})
            _, config = preview(config_path, answer, environ, agent_name)
            passed, line = await check(config, name)
            asker.say(f"  {name}: {line}")
            if passed:
                break
            if not asker.confirm("Try another token?", default=True):
                if not outcome.settle(asker, name, line):
                    token = None
                break
            token = None
        setup = setup.model_copy(update={field_name: token})
    return setup

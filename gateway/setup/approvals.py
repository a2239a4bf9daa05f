"""Who may chat: the owner's decisions on pairing requests and groups.

With several agents, access belongs to a bot (gateway/daemon/routing.py): an agent's own bot has
its own rules, pairing.json and groups.json; a bot several agents share has its agent's
(the default agent's), and a group reaches another agent only through a binding.

`clawgate pairing`, `clawgate groups` and the dashboard's people page all come here, so a
decision made in the browser and one made in a terminal are the same write: approvals go to
`<data_dir>/pairing.json` through `PairingStore` (the running gateway re-reads it on the next
message), groups to the config's `group_allow` through onboard's config editor (tomlkit,
comments kept, validated, atomic 0600 write; the gateway applies it on restart).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clawgate.kernel.config import MAIN_AGENT
from clawgate.kernel.errors import ConfigError

if TYPE_CHECKING:
    import tomlkit

    from clawgate.channels.groups import SeenGroup, SeenGroups
    from clawgate.channels.pairing import Approval, PairingStore
    from clawgate.kernel.config import Config

CHANNELS = ("telegram", "discord")


def bot_config(config: Config, platform: str) -> Config:
    """The config of the bot `config`'s agent answers through on `platform`: its own bot,
    else the shared bot's agent's - whose rules let a chat in, whose pairing approvals
    decide trust and whose data_dir keeps the groups the bot saw."""
    from clawgate.gateway.daemon.routing import Router
    from clawgate.kernel.agent_configs import own_token

    if own_token(config.root, config, platform) is not None:
        return config
    account = Router(config.root).accounts.get(platform)
    return account.config if account is not None else config.root.for_agent()


def pairing_config(config: Config) -> Config:
    """Whose pairing approvals an agent's owner manages: its own when it has a bot of its
    own (or no chat channel at all), else those of the bot it shares."""
    from clawgate.kernel.agent_configs import own_token

    enabled = [p for p in CHANNELS if getattr(config.channels, p).enabled]
    if not enabled or any(own_token(config.root, config, p) for p in enabled):
        return config
    return bot_config(config, enabled[0])


def seen_groups(config: Config, platform: str) -> SeenGroups:
    """The groups.json of the bot `config`'s agent answers through on `platform`."""
    from clawgate.channels.groups import SeenGroups

    return SeenGroups(bot_config(config, platform).data_dir / "groups.json")


def seen(config: Config) -> list[SeenGroup]:
    """Every group the agent's bots saw mentioning them, newest first."""
    found = []
    for platform in CHANNELS:
        found += [g for g in seen_groups(config, platform).seen() if g.channel == platform]
    return sorted(found, key=lambda g: g.last_seen, reverse=True)


def channels_with_configured_owner(config: Config) -> frozenset[str]:
    """Channels whose config names an owner (`owners`, else the `allow_from` entries;
    "*" never makes an owner)."""
    found = set()
    for name in CHANNELS:
        settings = getattr(config.channels, name)
        entries = settings.owners if settings.owners is not None else settings.allow_from
        if any(e.strip() and e.strip() != "*" for e in entries):
            found.add(name)
    return frozenset(found)


def approve(store: PairingStore, config: Config, code: str, owner: bool | None) -> Approval:
    """Approve the person who was sent `code`: as an owner (True), a plain user (False), or
    (None) the owner when their channel has none yet."""
    return store.approve(code, owner=owner, owned_channels=channels_with_configured_owner(config))


def group_allowed(config: Config, group: SeenGroup) -> bool:
    entries = set(_entries(bot_config(config, group.channel), group.channel))
    return group.group_id in entries or (group.guild_id or "") in entries


def group_channel(config: Config, group_id: str, channel: str | None) -> str:
    """The channel a group id belongs to: given, or the one it was seen on."""
    if channel is not None:
        if channel not in CHANNELS:
            raise ConfigError(f"unknown channel {channel!r} (use {' or '.join(CHANNELS)})")
        return channel
    found = {g.channel for g in seen(config) if group_id in (g.group_id, g.guild_id)}
    if len(found) == 1:
        return found.pop()
    if found:
        raise ConfigError(
            f"group {group_id} was seen on {' and '.join(sorted(found))}: add --channel"
        )
    raise ConfigError(
        f"group {group_id} has not mentioned the bot yet: add --channel telegram or discord"
    )


@dataclass(frozen=True)
class GroupEdit:
    channel: str
    group_id: str
    changed: bool  # False: the config already said so, nothing was written
    path: Path
    done: tuple[str, ...] = ()  # what was written, one phrase each

    def summary(self) -> str:
        if not self.changed:
            return f"{self.channel} group {self.group_id} is already in group_allow of {self.path}"
        return f"{' and '.join(self.done)} in {self.path}; restart the gateway to apply it"


def allow_group(config_path: Path, config: Config, group_id: str, channel: str | None) -> GroupEdit:
    """Let a group in for `config`'s agent, in the config file (comments kept): into the
    rules of the bot the agent answers through, the agent's own list where it has one, and
    a binding to the agent when it shares that bot with others."""
    import tomlkit

    from clawgate.kernel.agent_configs import own_token

    group_id = group_id.strip()
    name = group_channel(config, group_id, channel)
    bot = bot_config(config, name)
    targets = [bot]
    spec = config.root.agents.get(config.agent_name)
    if bot.agent_name != config.agent_name and spec is not None and spec.channels is not None:
        if "group_allow" in getattr(spec.channels, name).model_fields_set:
            targets.append(config)  # the agent's own list, if it has one, must agree
    missing = [t for t in targets if group_id not in _entries(t, name)]
    guild = any(g.guild_id == group_id for g in seen(config) if g.channel == name)
    bind = (
        spec is not None
        and config.agent_name != bot.agent_name
        and own_token(config.root, config, name) is None
        and not any(b.channel == name and group_id in (b.chat, b.guild) for b in spec.bindings)
    )
    if not missing and not bind:
        return GroupEdit(name, group_id, False, config_path)

    def add(document: tomlkit.TOMLDocument) -> None:
        for target in missing:
            # main's list is the file's own; another agent's starts from what it inherits.
            start = [] if target.agent_name == MAIN_AGENT else _entries(target, name)
            _allow_in(_section_of(document, target), name, group_id, start)
        if bind:
            binding = tomlkit.inline_table()
            binding.update({"channel": name, "guild" if guild else "chat": _id(group_id)})
            section = _section_of(document, config)
            section.setdefault("bindings", tomlkit.array()).append(binding)

    done = [f"added {group_id} to [{_where(t)}channels.{name}] group_allow" for t in missing]
    if bind:
        done.append(
            f"bound it to agent {config.agent_name} ([agents.{config.agent_name}] bindings)"
        )
    return _edit(config_path, add, name, group_id, lambda: True, tuple(done))


def deny_group(config_path: Path, config: Config, group_id: str, channel: str | None) -> GroupEdit:
    """Take a group out of the `group_allow` of the bot `config`'s agent answers through
    (if there) and forget that it was seen: it shows up again only if it mentions the bot
    again."""
    import tomlkit

    group_id = group_id.strip()
    name = group_channel(config, group_id, channel)
    bot = bot_config(config, name)
    removed = False

    def drop(document: tomlkit.TOMLDocument) -> None:
        nonlocal removed
        rules = _section_of(document, bot).get("channels", {}).get(name, {})
        entries = rules.get("group_allow", tomlkit.array())
        for index in reversed(range(len(entries))):
            if str(entries[index]).strip() == group_id:
                del entries[index]
                removed = True

    done = (f"removed {group_id} from [{_where(bot)}channels.{name}] group_allow",)
    edit = _edit(config_path, drop, name, group_id, lambda: removed, done)
    seen_groups(config, name).forget(name, group_id)
    return edit


def _entries(config: Config, platform: str) -> list[str]:
    return [e.strip() for e in getattr(config.channels, platform).group_allow]


def _where(config: Config) -> str:
    return "" if config.agent_name == MAIN_AGENT else f"agents.{config.agent_name}."


def _section_of(document: tomlkit.TOMLDocument, config: Config) -> Any:
    """The table holding `config`'s agent's keys: the top level for main (its rules are the
    top-level ones), else `[agents.<name>]`."""
    import tomlkit

    if config.agent_name == MAIN_AGENT:
        return document
    agents = document.setdefault("agents", tomlkit.table(is_super_table=True))
    return agents.setdefault(config.agent_name, tomlkit.table())


def _allow_in(section: Any, platform: str, group_id: str, start: list[str]) -> None:
    import tomlkit

    rules = section.setdefault("channels", tomlkit.table(is_super_table=True)).setdefault(
        platform, tomlkit.table()
    )
    if "group_allow" not in rules:
        # A list of its own replaces what an agent inherits, so it starts from that.
        rules["group_allow"] = tomlkit.array()
        rules["group_allow"].extend(_id(e) for e in start)
    rules["group_allow"].append(_id(group_id))


def _id(value: str) -> int | str:
    # Ids as numbers, the way the README writes them; anything else stays a string.
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def _edit(
    config_path: Path,
    change: Callable[[tomlkit.TOMLDocument], None],
    channel: str,
    group_id: str,
    changed: Callable[[], bool],
    done: tuple[str, ...],
) -> GroupEdit:
    """Apply `change` through onboard's editor; write only if `changed()` says it did."""
    from clawgate.gateway.setup.wizard import edit_config, save

    new_text, _ = edit_config(config_path, change)
    if not changed():
        return GroupEdit(channel, group_id, False, config_path)
    save(config_path, new_text)
    return GroupEdit(channel, group_id, True, config_path, done)

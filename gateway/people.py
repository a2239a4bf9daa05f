"""Who may chat: the owner's decisions on pairing requests and groups.

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
from typing import TYPE_CHECKING

from clawgate.kernel.errors import ConfigError

if TYPE_CHECKING:
    import tomlkit

    from clawgate.channels.groups import SeenGroup, SeenGroups
    from clawgate.channels.pairing import Approval, PairingStore
    from clawgate.kernel.config import Config

CHANNELS = ("telegram", "discord")


def pairing_store(config: Config) -> PairingStore:
    from clawgate.channels.pairing import PairingStore

    return PairingStore(config.data_dir / "pairing.json")


def seen_groups(config: Config) -> SeenGroups:
    from clawgate.channels.groups import SeenGroups

    return SeenGroups(config.data_dir / "groups.json")


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
    entries = {e.strip() for e in getattr(config.channels, group.channel).group_allow}
    return group.group_id in entries or (group.guild_id or "") in entries


def group_channel(config: Config, group_id: str, channel: str | None) -> str:
    """The channel a group id belongs to: given, or the one it was seen on."""
    if channel is not None:
        if channel not in CHANNELS:
            raise ConfigError(f"unknown channel {channel!r} (use {' or '.join(CHANNELS)})")
        return channel
    found = {g.channel for g in seen_groups(config).seen() if group_id in (g.group_id, g.guild_id)}
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


def allow_group(config_path: Path, config: Config, group_id: str, channel: str | None) -> GroupEdit:
    """Add a group to its channel's `group_allow` in the config file (comments kept)."""

    group_id = group_id.strip()
    name = group_channel(config, group_id, channel)
    present = False

    def add(document: tomlkit.TOMLDocument) -> None:
        nonlocal present
        entries = _group_allow(document, name)
        present = group_id in {str(e).strip() for e in entries}
        if not present:
            # Ids as numbers, the way the README writes them; anything else stays a string.
            entries.append(int(group_id) if re.fullmatch(r"-?\d+", group_id) else group_id)

    return _edit(config_path, add, name, group_id, lambda: not present)


def deny_group(config_path: Path, config: Config, group_id: str, channel: str | None) -> GroupEdit:
    """Take a group out of its channel's `group_allow` (if there) and forget that it was
    seen: it shows up again only if it mentions the bot again."""
    group_id = group_id.strip()
    name = group_channel(config, group_id, channel)
    removed = False

    def drop(document: tomlkit.TOMLDocument) -> None:
        nonlocal removed
        entries = _group_allow(document, name)
        for index in reversed(range(len(entries))):
            if str(entries[index]).strip() == group_id:
                del entries[index]
                removed = True

    edit = _edit(config_path, drop, name, group_id, lambda: removed)
    seen_groups(config).forget(name, group_id)
    return edit


def _group_allow(document: tomlkit.TOMLDocument, channel: str) -> tomlkit.items.Array:
    import tomlkit

    section = document.setdefault("channels", tomlkit.table()).setdefault(channel, tomlkit.table())
    entries: tomlkit.items.Array = section.setdefault("group_allow", tomlkit.array())
    return entries


def _edit(
    config_path: Path,
    change: Callable[[tomlkit.TOMLDocument], None],
    channel: str,
    group_id: str,
    changed: Callable[[], bool],
) -> GroupEdit:
    """Apply `change` through onboard's editor; write only if `changed()` says it did."""
    from clawgate.gateway.onboard_setup import edit_config, save

    new_text, _ = edit_config(config_path, change)
    if not changed():
        return GroupEdit(channel, group_id, False, config_path)
    save(config_path, new_text)
    return GroupEdit(channel, group_id, True, config_path)

"""Access control: the pairing store, the per-channel policy, and `clawgate pairing`."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clawgate.channels.access import AccessPolicy, Decision
from clawgate.channels.pairing import CODE_ALPHABET, PairingStore
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import DiscordConfig, TelegramConfig
from clawgate.kernel.errors import PairingError

HOUR = 3600.0


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "pairing.json"


@pytest.fixture
def store(store_path: Path, clock: Clock) -> PairingStore:
    return PairingStore(store_path, clock=clock)


# -- PairingStore --------------------------------------------------------------------------


def test_code_is_eight_unambiguous_characters(store: PairingStore) -> None:
    codes = {store.request(f"ch{i}", "1", None) for i in range(30)}
    assert len(codes) == 30
    for code in codes:
        assert code is not None and len(code) == 8
        assert set(code) <= set(CODE_ALPHABET)
        assert not set(code) & set("0O1I")


def test_same_user_gets_the_same_code_back(store: PairingStore, store_path: Path) -> None:
    first = store.request("telegram", "1001", "alice")
    assert store.request("telegram", "1001", "alice") == first
    [pending] = store.pending()
    assert (pending.channel, pending.user_id, pending.username, pending.code) == (
        "telegram",
        "1001",
        "alice",
        first,
    )
    data = json.loads(store_path.read_text())
    assert data["version"] == 1 and len(data["pending"]) == 1 and data["approved"] == []
    assert stat.S_IMODE(store_path.stat().st_mode) == 0o600


def test_at_most_three_pending_per_channel_the_oldest_expiring_first(
    store: PairingStore, clock: Clock
) -> None:
    codes = []
    for uid in (1, 2, 3):
        codes.append(store.request("telegram", str(uid), None))
        clock.advance(1)
    # A fourth requester gets a code; the oldest one makes room for it.
    fourth = store.request("telegram", "4", None)
    assert fourth not in codes
    assert [p.user_id for p in store.pending()] == ["2", "3", "4"]
    # Other channels have their own budget, and those already pending keep their code.
    assert store.request("discord", "4", None) is not None
    assert store.request("telegram", "2", None) == codes[1]
    assert len([p for p in store.pending() if p.channel == "telegram"]) == 3


def test_codes_expire_after_an_hour(store: PairingStore, clock: Clock) -> None:
    code = store.request("telegram", "1001", None)
    assert code is not None
    clock.advance(HOUR - 1)
    assert store.request("telegram", "1001", None) == code
    assert [p.code for p in store.pending()] == [code]
    clock.advance(1)
    assert store.pending() == []
    with pytest.raises(PairingError, match=f"no pending pairing with code {code}"):
        store.approve(code)
    fresh = store.request("telegram", "1001", None)
    assert fresh is not None and fresh != code


def test_expired_codes_free_the_channel_budget(store: PairingStore, clock: Clock) -> None:
    for uid in (1, 2, 3):
        store.request("telegram", str(uid), None)
    clock.advance(HOUR)
    assert store.request("telegram", "4", None) is not None
    assert [p.user_id for p in store.pending()] == ["4"]


def test_approve_and_revoke_round_trip(store: PairingStore, clock: Clock) -> None:
    code = store.request("telegram", "1001", "Alice")
    assert code is not None
    clock.advance(5)
    approval = store.approve(code.lower())  # people type codes however they like
    assert (approval.channel, approval.user_id, approval.username) == ("telegram", "1001", "Alice")
    assert approval.owner is False and approval.approved_at == clock.now
    assert store.pending() == []
    assert store.lookup("telegram", "1001") == approval
    assert store.lookup("discord", "1001") is None
    assert store.approved() == [approval] == store.approved("telegram")
    assert store.approved("discord") == []

    assert store.revoke("1001") == [approval]
    assert store.lookup("telegram", "1001") is None
    with pytest.raises(PairingError, match="no approved user 1001"):
        store.revoke("1001")


def test_owner_flag_and_reapproval_replaces(store: PairingStore) -> None:
    store.approve(store.request("telegram", "1001", None) or "")
    owner = store.approve(store.request("telegram", "1001", None) or "", owner=True)
    assert store.approved() == [owner]
    assert owner.owner is True


def test_revoke_by_channel_and_by_username(store: PairingStore) -> None:
    store.approve(store.request("telegram", "7", "Bob") or "")
    store.approve(store.request("discord", "7", None) or "")
    with pytest.raises(PairingError, match="no approved user 7 on slack"):
        store.revoke("7", channel="slack")
    [removed] = store.revoke("7", channel="discord")
    assert removed.channel == "discord"
    assert [a.channel for a in store.revoke("@bob")] == ["telegram"]


def test_second_store_sees_approval_without_restart(store_path: Path, clock: Clock) -> None:
    daemon = PairingStore(store_path, clock=clock)
    cli = PairingStore(store_path, clock=clock)
    code = daemon.request("telegram", "1001", None)
    assert code is not None
    assert daemon.lookup("telegram", "1001") is None  # loaded and cached

    cli.approve(code, owner=True)
    seen = daemon.lookup("telegram", "1001")
    assert seen is not None and seen.owner

    cli.revoke("1001")
    assert daemon.lookup("telegram", "1001") is None


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from clawgate.channels.pairing import PairingStore

    store = PairingStore(Path(sys.argv[1]))
    channel, count = sys.argv[2], int(sys.argv[3])
    for i in range(count):
        code = store.request(channel, f"{channel}-{i}", None)
        store.approve(code)
    """
)


def test_two_processes_writing_lose_nothing(store_path: Path) -> None:
    count = 40
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(store_path), channel, str(count)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for channel in ("telegram", "discord")
    ]
    for proc in procs:
        try:
            _, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        assert proc.returncode == 0, stderr
    approved = PairingStore(store_path).approved()
    assert {(a.channel, a.user_id) for a in approved} == {
        (channel, f"{channel}-{i}") for channel in ("telegram", "discord") for i in range(count)
    }


def test_corrupt_file_reads_as_empty_and_is_never_overwritten(
    store_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.write_text('{"version": 1, "approved": [{"channel": "telegram"')
    store = PairingStore(store_path, clock=clock)
    with caplog.at_level(logging.WARNING, logger="clawgate.channels.pairing"):
        assert store.pending() == []
        assert store.lookup("telegram", "1001") is None
        assert store.approved() == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "pairing.json" in warnings[0].getMessage()

    with pytest.raises(PairingError, match="fix or delete it"):
        store.request("telegram", "1001", None)
    with pytest.raises(PairingError, match="fix or delete it"):
        store.approve("ABCDEFGH")
    assert store_path.read_text() == '{"version": 1, "approved": [{"channel": "telegram"'

    store_path.write_text('{"version": 1, "pending": [], "approved": []}')
    assert store.request("telegram", "1001", None) is not None


def test_wrong_shape_counts_as_corrupt(store_path: Path) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.write_text('{"version": 1, "pending": [{"channel": "telegram"}]}')
    store = PairingStore(store_path)
    assert store.pending() == []
    with pytest.raises(PairingError, match="damaged"):
        store.request("telegram", "1", None)


# -- AccessPolicy --------------------------------------------------------------------------


def policy(store: PairingStore, clock: Clock, channel: str = "telegram", **config) -> AccessPolicy:
    make = DiscordConfig if channel == "discord" else TelegramConfig
    return AccessPolicy(channel, make(**config), store, clock=clock)


def test_allow_from_ids_and_usernames_are_owners(store: PairingStore, clock: Clock) -> None:
    p = policy(store, clock, allow_from=[1001, "@Alice"])
    assert p.private("1001") == Decision(Trust.OWNER)
    assert p.private("2002", "alice") == Decision(Trust.OWNER)
    assert p.private("2002", "@ALICE") == Decision(Trust.OWNER)
    assert p.is_owner("2002", "Alice") and p.is_owner("1001")
    assert not p.is_owner("2002", "bob")


def test_numeric_entry_never_matches_a_username(store: PairingStore, clock: Clock) -> None:
    p = policy(store, clock, allow_from=["1001"], dm_policy="allowlist")
    assert p.private("6666", "1001") == Decision(None)


def test_owners_override_allow_from(store: PairingStore, clock: Clock) -> None:
    p = policy(store, clock, allow_from=["1001", "2002"], owners=["2002"])
    assert p.private("1001") == Decision(Trust.ALLOWED)
    assert p.private("2002") == Decision(Trust.OWNER)
    assert not p.is_owner("1001")


def test_star_never_makes_an_owner(store: PairingStore, clock: Clock) -> None:
    p = policy(store, clock, allow_from=["*", "1001"], dm_policy="open")
    assert p.private("5555") == Decision(Trust.ALLOWED)
    assert not p.is_owner("5555")
    assert p.private("1001") == Decision(Trust.OWNER)
    assert policy(store, clock, allow_from=["*"], owners=["*"]).private("5") == Decision(
        Trust.ALLOWED
    )


def test_allowlist_ignores_strangers_silently(
    store: PairingStore, clock: Clock, store_path: Path
) -> None:
    p = policy(store, clock, allow_from=["1001"], dm_policy="allowlist")
    assert p.private("6666", "mallory") == Decision(None)
    assert not store_path.exists()


def test_pairing_reply_once_an_hour(store: PairingStore, clock: Clock) -> None:
    p = policy(store, clock, allow_from=["1001"])
    first = p.private("6666", "mallory")
    assert first.trust is None and first.reply is not None
    [pending] = store.pending()
    assert pending.code in first.reply and "6666" in first.reply
    assert f"clawgate pairing approve {pending.code}" in first.reply

    clock.advance(HOUR - 1)
    assert p.private("6666") == Decision(None)
    clock.advance(1)
    again = p.private("6666")
    assert again.trust is None and again.reply is not None
    [renewed] = store.pending()
    assert renewed.code in again.reply and renewed.code != pending.code


def test_a_fourth_stranger_still_gets_a_code(store: PairingStore, clock: Clock) -> None:
    # Once there is an owner: before that the cap never applies (tests/test_pairing_flow.py).
    p = policy(store, clock, allow_from=["1001"])
    replies = [p.private(str(uid)).reply for uid in (1, 2, 3, 4)]
    assert all(replies)
    assert len(store.pending()) == 3


def test_approval_takes_effect_through_a_second_store(
    store: PairingStore, clock: Clock, store_path: Path
) -> None:
    p = policy(store, clock, allow_from=["1001"])
    p.private("6666")
    cli = PairingStore(store_path, clock=clock)
    [pending] = cli.pending()
    cli.approve(pending.code)
    assert p.private("6666") == Decision(Trust.ALLOWED)
    assert not p.is_owner("6666")

    cli.revoke("6666")
    cli.approve(cli.request("telegram", "6666", None) or "", owner=True)
    assert p.private("6666") == Decision(Trust.OWNER)
    assert p.is_owner("6666")

    cli.revoke("6666")
    assert p.private("6666").trust is None


def test_broken_store_keeps_strangers_out(store_path: Path, clock: Clock) -> None:
    store_path.parent.mkdir(parents=True)
    store_path.write_text("not json")
    p = policy(PairingStore(store_path, clock=clock), clock, allow_from=["1001"])
    assert p.private("6666") == Decision(None)
    assert p.private("1001") == Decision(Trust.OWNER)


def test_group_allow_matches_chat_or_guild(store: PairingStore, clock: Clock) -> None:
    p = policy(store, clock, channel="discord", group_allow=[4455, "-100987"])
    assert p.group("-100987")
    assert p.group("777", "4455")  # a channel of an allowed guild
    assert not p.group("777", "888")
    assert not p.group()
    assert not policy(store, clock).group("-100987")


# -- clawgate pairing ----------------------------------------------------------------------


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from clawgate.gateway.cli import app

    for name in list(os.environ):
        if name.startswith("CLAWGATE_"):
            monkeypatch.delenv(name)
    config = tmp_path / "config.toml"
    config.write_text(f'workspace = "{tmp_path / "workspace"}"\ndata_dir = "{tmp_path / "data"}"\n')
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, ["--config", str(config), "pairing", *args])

    return run


def test_cli_list_approve_revoke(cli, store_path: Path) -> None:
    assert cli("list").output.strip() == "no pending pairing requests"
    code = PairingStore(store_path).request("telegram", "1001", "alice")
    assert code is not None

    listed = cli("list")
    assert listed.exit_code == 0
    assert "1001" in listed.stdout and code in listed.stdout and "alice" in listed.stdout

    approved = cli("approve", code, "--owner")
    assert approved.exit_code == 0, approved.output
    assert approved.stdout.strip() == (
        "approved telegram user 1001 (@alice) as an owner; they can chat now"
    )
    assert PairingStore(store_path).lookup("telegram", "1001").owner  # type: ignore[union-attr]

    table = cli("approved")
    assert "1001" in table.stdout and "owner" in table.stdout

    revoked = cli("revoke", "1001")
    assert revoked.exit_code == 0
    assert revoked.stdout.strip() == "revoked telegram user 1001 (@alice)"
    assert cli("approved").stdout.strip() == "nobody approved through pairing yet"


def test_cli_errors_are_one_line_exit_1(cli) -> None:
    result = cli("approve", "ZZZZZZZZ")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "clawgate: no pending pairing with code ZZZZZZZZ (codes expire after 1 hour)"
    ]
    result = cli("revoke", "42", "--channel", "telegram")
    assert result.exit_code == 1
    assert result.stderr.strip() == "clawgate: no approved user 42 on telegram"

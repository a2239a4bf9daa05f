"""Strangers cannot lock pairing once an owner exists (#33 item 6): one code per requester
(asking again reissues it), the oldest pending code expiring first when the channel's pending
list is full, and the owner told of the flood once, in their private chat."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clawgate.channels.access import AccessPolicy, flood_message
from clawgate.channels.pairing import MAX_PENDING_PER_CHANNEL, PairingStore
from clawgate.kernel.config import TelegramConfig
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OWNER = 1001
READY = "channel telegram ready"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def policy(tmp_path: Path, clock: Clock) -> AccessPolicy:
    store = PairingStore(tmp_path / "pairing.json", clock=clock)
    return AccessPolicy("telegram", TelegramConfig(allow_from=[str(OWNER)]), store, clock=clock)


def code_in(reply: str | None) -> str:
    found = re.search(r"Pairing code: (\w{8})", reply or "")
    assert found is not None, reply
    return found.group(1)


def test_asking_again_reissues_the_same_code_and_never_adds_one(
    policy: AccessPolicy, clock: Clock
) -> None:
    first = code_in(policy.private("3001").reply)
    for _ in range(5):
        clock.now += 600  # within the code's hour
        assert policy.store.request("telegram", "3001", None) == first
    assert [p.user_id for p in policy.store.pending()] == ["3001"]


def test_a_full_list_drops_its_oldest_code_for_each_newcomer(
    policy: AccessPolicy, clock: Clock
) -> None:
    codes = {}
    for stranger in ("3001", "3002", "3003", "3004", "3005"):
        codes[stranger] = code_in(policy.private(stranger).reply)
        clock.now += 1
    pending = policy.store.pending()
    assert [p.user_id for p in pending] == ["3003", "3004", "3005"]
    assert [p.code for p in pending] == [codes["3003"], codes["3004"], codes["3005"]]
    # The first stranger, whose code went, gets a new one by asking again.
    again = code_in(policy.private("3001").reply)
    assert again != codes["3001"]
    assert [p.user_id for p in policy.store.pending()] == ["3004", "3005", "3001"]


def test_the_owner_is_told_once_per_flood(policy: AccessPolicy, clock: Clock) -> None:
    notices = []
    for stranger in range(3001, 3001 + MAX_PENDING_PER_CHANNEL + 4):
        notices.append(policy.private(str(stranger)).owner_notice)
        clock.now += 1
    assert notices.count(None) == len(notices) - 1
    assert notices[MAX_PENDING_PER_CHANNEL] == flood_message("telegram")
    # Once the flood is over (fewer than the cap pending), a new one is told again.
    policy.store.clear("telegram")
    for stranger in range(4001, 4001 + MAX_PENDING_PER_CHANNEL + 1):
        last = policy.private(str(stranger)).owner_notice
    assert last == flood_message("telegram")
    assert policy.owner_ids() == [str(OWNER)]


def test_before_there_is_an_owner_nobody_is_told_and_nothing_is_dropped(
    tmp_path: Path, clock: Clock
) -> None:
    store = PairingStore(tmp_path / "pairing.json", clock=clock)
    ownerless = AccessPolicy("telegram", TelegramConfig(), store, clock=clock)
    decisions = [ownerless.private(str(stranger)) for stranger in range(3001, 3006)]
    assert all(d.reply and d.owner_notice is None for d in decisions)
    assert len(store.pending()) == 5


async def test_a_real_gateway_gives_a_fourth_stranger_a_code_and_tells_the_owner_once(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = write_config(
        tmp_path, agent=fake_model(fake_llm), telegram=fake_telegram(telegram, [OWNER])
    )
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, 30)
        for stranger in (3001, 3002, 3003):
            telegram.user_says(stranger, "let me in")
            code_in((await telegram.next_message(stranger, timeout=30))["text"])
        telegram.user_says(3004, "me too, I am new")
        newcomer = code_in((await telegram.next_message(3004, timeout=30))["text"])
        notice = (await telegram.next_message(OWNER, timeout=30))["text"]
        telegram.user_says(3005, "and me")
        code_in((await telegram.next_message(3005, timeout=30))["text"])
        telegram.user_says(3006, "and me")
        code_in((await telegram.next_message(3006, timeout=30))["text"])
    assert notice == flood_message("telegram")
    assert [m["text"] for m in telegram.messages_to(OWNER)] == [notice]
    assert fake_llm.requests == []
    assert newcomer

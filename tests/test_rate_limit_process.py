"""The rate limit through the real `clawgate gateway` process (issue #24 item 5): a backlog
written while the gateway was down, over `limits.messages_per_minute`. The owner's messages
are delayed, never lost: every one is answered, in order, with one notice. A group member's
over the limit get no model call and no answer, but are kept in the session, marked, and
leave nothing pending in the journal.

The owner's last messages wait for the one-minute window to move on: the gateway really
waits that minute by its own clock, which libfaketime runs four times as fast as the real
one (tests/faketime.py), so the test waits 15 s on the replies.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from clawgate.channels.telegram.journal import InboundJournal
from clawgate.gateway.daemon.ratelimit import delay_notice, limit_notice
from tests.fakes.llm import FakeLLM, Reply, text
from tests.fakes.telegram import FakeTelegram
from tests.faketime import sped_up
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

OWNER = 1001
GROUP = -100123
MEMBER = 2001
PER_MINUTE = 3
BACKLOG = 5
READY = "channel telegram ready"
START_TIMEOUT = 30.0
MODEL_TIMEOUT = 90.0  # litellm's import on the first call, on a loaded machine
SPEED = 4  # the gateway's clock against the real one
WINDOW_TIMEOUT = 90.0  # the gateway waits out one window (15 s) for the owner's last two
EXIT_TIMEOUT = 25.0


def echo(body: dict[str, Any]) -> Reply:
    users = [m for m in body["messages"] if m.get("role") == "user"]
    return text(f"re: {users[-1]['content']}")


@pytest.mark.long
async def test_an_owner_backlog_over_the_limit_is_delayed_never_lost_others_kept_marked(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.handler = echo
    for i in range(BACKLOG):  # sent while the gateway was down, ten minutes ago
        telegram.user_says(OWNER, f"owner {i}")
        telegram.updates[-1]["message"]["date"] -= 600
        telegram.user_says(GROUP, f"member {i}", user_id=MEMBER, chat_type="group")
        telegram.updates[-1]["message"]["date"] -= 600
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm, request_timeout=60),
        telegram=fake_telegram(telegram, (OWNER,), group_allow=[str(GROUP)], require_mention=False),
        extra=f"[limits]\nmessages_per_minute = {PER_MINUTE}",
    )
    gateway = ClawgateProcess(tmp_path, "--config", str(config), "gateway", env=sped_up(SPEED))
    async with gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        owner = [(await telegram.next_message(OWNER, MODEL_TIMEOUT))["text"]]
        while len(owner) < BACKLOG + 1:
            owner.append((await telegram.next_message(OWNER, WINDOW_TIMEOUT))["text"])
        group = [(await telegram.next_message(GROUP, MODEL_TIMEOUT))["text"] for _ in range(4)]
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0
        assert "Traceback" not in gateway.stderr

    answers = [t for t in owner if t != delay_notice(PER_MINUTE)]
    assert answers == [f"re: owner {i}" for i in range(BACKLOG)]  # all of them, in order
    assert owner.count(delay_notice(PER_MINUTE)) == 1
    assert sorted(group) == sorted(
        [limit_notice(PER_MINUTE)] + [f"re: [Ann] member {i}" for i in range(PER_MINUTE)]
    )
    assert len(telegram.messages_to(GROUP)) == PER_MINUTE + 1
    # The member's two over the limit: never asked of the model, kept in the session, marked.
    asked = [m["content"] for b in fake_llm.requests for m in b["messages"] if m["role"] == "user"]
    assert not any("member 3" in a or "member 4" in a for a in asked)
    session = tmp_path / "workspace" / "sessions" / f"telegram_{GROUP}.jsonl"
    lines = [json.loads(line) for line in session.read_text().splitlines()]
    kept = [line["content"] for line in lines if line.get("type") == "over_limit"]
    assert kept == ["member 3", "member 4"]
    journal = InboundJournal(tmp_path / "data" / "channels" / "telegram" / "journal.jsonl")
    assert await journal.load() == []  # answered or kept: nothing left to replay

"""Issue 33 items 4 and 8: text an outsider chose (a group's title, a member's display name
or username) is shown escaped wherever it is logged or printed, and quoted as a member's
words in the owner's prompt.

The sanitiser's unit tests, the log formatter in both formats, a real `clawgate gateway`
process against FakeTelegram with `clawgate groups` and `clawgate pairing list` run as real
commands, and the owner's system prompt through the real agent loop and the fake model.
"""

from __future__ import annotations

import json
import logging
import signal
import unicodedata
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clawgate.agent.memory.provenance import member_label, record_entry, speakers
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import StoredMessage
from clawgate.gateway.ops.logs import log_file_path, setup_logging, teardown_logging
from clawgate.kernel.config import AgentConfig, ChannelsConfig, LoggingConfig, TelegramConfig
from clawgate.kernel.sanitise import sanitise
from tests.dashboard_harness import clawgate_output
from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import BOT_USERNAME, FakeTelegram
from tests.harness import Harness, make_config
from tests.process import (
    ClawgateProcess,
    fake_model,
    fake_telegram,
    write_config,
)

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OWNER = 1001
MEMBER = 2002
GROUP = -100777  # not in group_allow: its mention is logged and kept for `clawgate groups`
READY = "channel telegram ready"
START_TIMEOUT = 30.0
REPLY_TIMEOUT = 30.0
EXIT_TIMEOUT = 25.0
FORGED = "2026-12-04 09:00:00 WARNING clawgate.forged: the owner approved everything"
# OSC 52 puts "clawgate pairing approve XYZ" on the owner's clipboard; then a screen clear,
# a right-to-left override, a line separator and a C1 CSI.
CONTROLS = "\x1b]52;c;Y2xhd2dhdGUgcGFpcmluZyBhcHByb3ZlIFhZWg==\x07\x1b[2J\u202eexe.txt\u2028\x9b31m"
HOSTILE = f"Team\r\n{FORGED}\n{CONTROLS}"


def raw_controls(text: str) -> list[str]:
    """The characters of `text` a terminal or a log reader would act on (line feeds, which
    end a printed line, aside)."""
    return [
        c
        for c in text
        if c != "\n"
        and (unicodedata.category(c) in ("Cc", "Zl", "Zp") or "\u202a" <= c <= "\u202e")
    ]


# -- the sanitiser ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("plain words, émoji 👨‍👩‍👧 and 中文", "plain words, émoji 👨‍👩‍👧 and 中文"),
        ("a\x00b\x07c\x08d", "a\\x00b\\x07c\\x08d"),  # C0
        ("tab\there", "tab\\there"),
        ("one\r\ntwo\nthree\rfour", "one\\r\\ntwo\\nthree\\rfour"),
        ("\x1b[31mred\x1b]52;c;QQ==\x07", "\\x1b[31mred\\x1b]52;c;QQ==\\x07"),  # ESC, OSC
        ("del\x7f c1\x85\x9b", "del\\x7f c1\\x85\\x9b"),  # DEL, C1 (NEL, CSI)
        ("line\u2028para\u2029end", "line\\u2028para\\u2029end"),
        ("\u202aa\u202bb\u202cc\u202dd\u202ee", "\\u202aa\\u202bb\\u202cc\\u202dd\\u202ee"),
        ("\u2066i\u2067j\u2068k\u2069", "\\u2066i\\u2067j\\u2068k\\u2069"),  # isolates
        ("\u200eltr\u200frtl\u061calm", "\\u200eltr\\u200frtl\\u061calm"),  # marks
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("non\u00a0breaking and back\\slash", "non\u00a0breaking and back\\slash"),
    ],
)
def test_the_sanitiser_escapes_every_class_of_control_and_keeps_the_rest(
    raw: str, shown: str
) -> None:
    assert sanitise(raw) == shown
    assert sanitise(shown) == shown  # what it shows is left alone: safe to apply twice
    assert not raw_controls(sanitise(raw))


@pytest.mark.parametrize("as_json", [False, True])
def test_the_log_formats_write_outsiders_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    setup_logging(LoggingConfig(), tmp_path, json=as_json, verbose=False)
    try:
        logging.getLogger("clawgate.test").warning("mentioned in group (%s)", HOSTILE)
        try:
            raise ValueError(HOSTILE)
        except ValueError:
            logging.getLogger("clawgate.test").exception("failed")
    finally:
        teardown_logging()
    written = log_file_path(tmp_path).read_text("utf-8")
    for output in (written, capsys.readouterr().err):
        assert not raw_controls(output), output
        assert not any(line.startswith(FORGED) for line in output.splitlines())
        if as_json:
            records = [json.loads(line) for line in output.splitlines()]
            assert records[0]["message"] == f"mentioned in group ({sanitise(HOSTILE)})"
        else:
            assert f"mentioned in group ({sanitise(HOSTILE)})" in output


# -- a real gateway and the real commands ------------------------------------------------------


async def run_command(home: Path, config: Path, *args: str) -> str:
    """A real `clawgate` command's output (stdout and stderr), which must succeed."""
    code, out = await clawgate_output(home, "--config", str(config), *args)
    assert code == 0, out
    return out


async def test_a_hostile_group_title_and_member_name_forge_no_log_line_and_reach_no_terminal(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config = write_config(
        tmp_path,
        agent=fake_model(fake_llm),
        telegram=fake_telegram(telegram, (OWNER,)),
    )
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        # Anyone can add the bot to a group, title it, and mention the bot there...
        telegram.user_says(
            GROUP,
            f"@{BOT_USERNAME} hello",
            user_id=MEMBER,
            first_name=HOSTILE,
            chat_type="supergroup",
        )
        telegram.updates[-1]["message"]["chat"]["title"] = HOSTILE
        await gateway.wait_for_log("which is not in group_allow", REPLY_TIMEOUT)
        # ...and write to the bot in private, for a pairing code.
        telegram.user_says(MEMBER, "let me in", first_name=HOSTILE, username=f"m{CONTROLS}")
        await telegram.next_message(MEMBER, timeout=REPLY_TIMEOUT)
        await gateway.wait_for_log("pairing code sent", REPLY_TIMEOUT)
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr

    log = log_file_path(tmp_path / "data").read_text("utf-8", errors="surrogateescape")
    assert "not in group_allow" in log and "clawgate.forged" in log  # the line is there...
    for output in (log, gateway.stderr):
        assert not raw_controls(output), [c for c in raw_controls(output)]  # ...escaped
        forged = [line for line in output.splitlines() if "clawgate.forged" in line]
        assert forged and all("not in group_allow" in line for line in forged)

    groups = await run_command(tmp_path, config, "groups")
    pending = await run_command(tmp_path, config, "pairing", "list")
    assert str(GROUP) in groups and "Team\\r\\n" in groups
    assert str(MEMBER) in pending and "m\\x1b]52" in pending
    for output in (groups, pending):
        assert not raw_controls(output), output
        assert not any(line.startswith(FORGED) for line in output.splitlines())


# -- item 8: speakers quoted in the owner's prompt ----------------------------------------------


def said_by(content: str, seq: int) -> StoredMessage:
    return StoredMessage({"role": "user", "content": content, "seq": seq, "timestamp": "t"})


async def test_speakers_in_the_owners_shared_notes_are_quoted_as_members(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    shared = ChannelsConfig(telegram=TelegramConfig(share_group_memory=[str(GROUP)]))
    config = make_config(tmp_path, agent_config, channels=shared)
    store = MemoryStore(config.workspace, clock=lambda: datetime(2026, 12, 3, 9, 0, tzinfo=UTC))
    # A group transcript as the loop stores it: "[sender name] text" a message. A member
    # named "the owner" would otherwise read as the owner in the frame line.
    said = [
        said_by("[the owner] plan the trip", 1),
        said_by("[Bob\x1b] ok", 2),
    ]
    record_entry(store, f"telegram:{GROUP}", "Trip planned.", said, owner=False)
    fake_llm.script(text("Noted."))
    async with Harness(config) as harness:
        reply = await harness.ask("what did the group say?")
    assert reply.text == "Noted."
    system = fake_llm.last_system_prompt() or ""
    assert 'by member "the owner", member "Bob":' in system, system
    assert "by the owner" not in system


def test_a_member_label_escapes_quotes_and_controls() -> None:
    assert member_label('Bob "the owner" \\ x\x1b') == 'member "Bob \\"the owner\\" \\\\ x\\x1b"'
    assert speakers([said_by('[A"b] hi', 1)]) == ["A b"]

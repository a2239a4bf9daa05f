"""Memory merges respect the owner's later edits (#24 item 3): a dashboard edit made while a
consolidation waits for the model wins over the model's rewording of the same lines - a
fact the owner deleted never comes back reworded, and the owner's correction never sits
beside the model's rewording of the old fact. Through a real `clawgate gateway` process (the
fake model holds the consolidation; the edit goes through the dashboard's HTTP form), and
the merge rule itself on its own. Then the journal of what consolidations removed
(agent/memory/removed.py): written before MEMORY.md, read past a torn line."""

from __future__ import annotations

import asyncio
import html
import re
from pathlib import Path
from typing import Any

import pytest

from clawgate.agent.memory.merge import MemoryRewrite, merge_lines
from clawgate.agent.memory.removed import JOURNAL_NAME
from clawgate.agent.memory.store import MemoryStore
from clawgate.gateway.dashboard.auth import CSRF_FIELD
from clawgate.kernel.config import AgentConfig
from clawgate.kernel.storage import DiskWriter
from tests.dashboard_harness import CSRF_META, DashboardGateway, localhost_session
from tests.fakes.llm import FakeLLM, gate, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.harness import Harness, make_config, wait_until
from tests.memory_helpers import is_consolidation

OWNER = 1001
MODEL_TIMEOUT = 90.0  # the gateway's first model call imports litellm, on a loaded machine

BASE = (
    "# Memory\n\n"
    "- Passport: X1234567\n"
    "- Lives in Berlin\n"
    "- Likes green tea\n"
    "- Sister Bea lives in Porto\n"
    "- Cat named Miso\n"
    "- Works at Acme as a designer\n"
)
# The owner, in the dashboard, while the model thinks: the passport line deleted, the city
# corrected.
OWNER_EDIT = BASE.replace("- Passport: X1234567\n", "").replace(
    "- Lives in Berlin\n", "- Lives in Munich since October\n"
)
# The model, from BASE: both lines reworded (and listed as removed), one new fact.
MODEL_UPDATE = (
    BASE.replace("- Passport: X1234567\n", "- Passport number: X1234567\n").replace(
        "- Lives in Berlin\n", "- Lives in Berlin, Germany\n"
    )
    + "- Plans a trip to Rome in May\n"
)
MODEL_REMOVED = ["- Passport: X1234567", "- Lives in Berlin"]


def hidden(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found, page[:2000]
    return html.unescape(found.group(1))


async def dashboard_edit(gateway: DashboardGateway, new_text: str) -> None:
    """Open the edit form as a logged-in browser would, put `new_text` in, save."""
    async with localhost_session() as session:
        login = await session.get(await gateway.login_link(), allow_redirects=False)
        assert login.status == 200
        page = await (await session.get(gateway.url + "memory/edit")).text()
        csrf = CSRF_META.search(page)
        assert csrf
        fields = {
            CSRF_FIELD: csrf.group(1),
            "version": hidden(page, "version"),
            "base": hidden(page, "base"),
            "text": new_text,
        }
        saved = await session.post(gateway.url + "memory/edit", data=fields, allow_redirects=False)
        assert saved.status == 303, await saved.text()


async def test_a_dashboard_edit_during_a_consolidation_wins_over_the_models_rewording(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    release = asyncio.Event()

    def model(request: dict[str, Any]) -> Any:
        if is_consolidation(request):
            answer = tool_call(
                "save_memory",
                history_entry="Ann talked about her Rome trip in May.",
                memory_update=MODEL_UPDATE,
                removed=MODEL_REMOVED,
            )
            return gate(release, answer)
        return text("noted")

    fake_llm.handler = model
    agent = {"memory_window": 4}
    async with DashboardGateway(tmp_path, telegram, fake_llm, agent=agent) as gateway:
        memory = MemoryStore(gateway.workspace)
        memory.replace_memory(BASE)
        for said in ("I plan a trip to Rome", "in May", "with Bea"):
            telegram.user_says(OWNER, said)
            assert (await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT))["text"] == "noted"
        # The consolidation has read BASE and waits for the model.
        await wait_until(lambda: any(is_consolidation(r) for r in fake_llm.requests), 60)
        await dashboard_edit(gateway, OWNER_EDIT)
        assert memory.read_memory() == OWNER_EDIT
        release.set()
        await wait_until(lambda: "Rome" in memory.read_memory(), MODEL_TIMEOUT)
        final = memory.read_memory()

    assert "X1234567" not in final, final  # the deleted passport number stays deleted
    assert "Berlin" not in final, final  # the correction replaced the old fact
    assert final.count("Munich") == 1 and "- Plans a trip to Rome in May\n" in final
    for kept in ("Likes green tea", "Sister Bea lives in Porto", "Cat named Miso", "Acme"):
        assert kept in final
    # The owner's own deletions are not a consolidation's removals to offer back.
    assert memory.removals().pending() == []


async def test_a_file_tool_edit_during_a_consolidation_wins_over_the_models_rewording(
    tmp_path: Path, fake_llm: FakeLLM, agent_config: AgentConfig
) -> None:
    """The same through the model's own edit_file in an owner turn (an in-process gateway)."""
    release = asyncio.Event()
    forget = tool_call(
        "edit_file", path="memory/MEMORY.md", old_text="- Passport: X1234567\n", new_text=""
    )

    def model(request: dict[str, Any]) -> Any:
        if is_consolidation(request):
            answer = tool_call(
                "save_memory",
                history_entry="Ann talked about her Rome trip in May.",
                memory_update=MODEL_UPDATE,
                removed=MODEL_REMOVED,
            )
            return gate(release, answer)
        last = request["messages"][-1]
        if last["role"] == "user" and "forget my passport" in str(last["content"]):
            return forget
        return text("noted")

    fake_llm.handler = model
    agent_config.memory_window = 4
    agent_config.request_timeout = 60
    config = make_config(tmp_path, agent_config)
    memory = MemoryStore(config.workspace)
    memory.replace_memory(BASE)
    async with Harness(config) as harness:
        for said in ("I plan a trip to Rome", "in May"):
            await harness.channel.say(said, chat_id="1")
            assert (await harness.channel.next_reply("1", timeout=MODEL_TIMEOUT)).text == "noted"
        # The consolidation has read BASE and waits for the model; the owner's turn edits.
        await wait_until(lambda: any(is_consolidation(r) for r in fake_llm.requests), 60)
        await harness.channel.say("forget my passport number", chat_id="1")
        assert (await harness.channel.next_reply("1", timeout=MODEL_TIMEOUT)).text == "noted"
        assert "X1234567" not in memory.read_memory()
        release.set()
        assert await harness.runtime.consolidator.drain(30)
    final = memory.read_memory()
    assert "X1234567" not in final and "- Plans a trip to Rome in May\n" in final


# -- the rule, line by line -------------------------------------------------------------------


def test_a_rewording_of_a_line_the_owner_deleted_is_dropped() -> None:
    merged = merge_lines(BASE, MODEL_UPDATE, OWNER_EDIT)
    assert "X1234567" not in merged and "Berlin" not in merged
    assert "- Lives in Munich since October\n" in merged
    assert merged.endswith("- Plans a trip to Rome in May\n")


def test_a_line_the_model_moved_does_not_bring_back_what_the_owner_deleted() -> None:
    moved = BASE.replace("- Cat named Miso\n", "") + "- Cat named Miso\n"
    theirs = BASE.replace("- Cat named Miso\n", "")
    assert "Miso" not in merge_lines(BASE, moved, theirs)


def test_a_rewording_of_a_line_the_owner_kept_is_applied() -> None:
    ours = BASE.replace("- Likes green tea\n", "- Likes green tea, no sugar\n")
    theirs = BASE + "- Dentist on Friday\n"
    merged = merge_lines(BASE, ours, theirs)
    assert "- Likes green tea, no sugar\n" in merged and "- Likes green tea\n" not in merged
    assert "- Dentist on Friday\n" in merged


def test_a_new_fact_unlike_the_deleted_lines_is_kept() -> None:
    ours = BASE.replace("- Passport: X1234567\n", "") + "- Allergic to peanuts\n"
    merged = merge_lines(BASE, ours, OWNER_EDIT)
    assert "- Allergic to peanuts\n" in merged and "X1234567" not in merged


def test_a_number_the_owner_deleted_does_not_come_back_in_other_words() -> None:
    ours = BASE.replace("- Passport: X1234567\n", "- Travel document X1234567 (German, 2031)\n")
    assert "X1234567" not in merge_lines(BASE, ours, OWNER_EDIT)


# -- what a consolidation removed, on disk ------------------------------------------------------


class RefusesMemoryMd(DiskWriter):
    """A disk that takes appends but refuses to replace MEMORY.md (a crash right there)."""

    def _check(self, path: Path) -> None:
        if path.name == "MEMORY.md":
            raise OSError(28, "No space left on device")


def test_the_removed_lines_are_on_disk_before_memory_md_is_replaced(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    MemoryStore(workspace).replace_memory(BASE)
    store = MemoryStore(workspace, writer=RefusesMemoryMd())
    update = BASE.replace("- Cat named Miso\n", "")
    with pytest.raises(OSError):
        store.rewrite_memory(MemoryRewrite(BASE, update, "telegram:1001"))
    assert store.read_memory() == BASE
    [removal] = store.removals().pending()
    assert removal.lines == ("- Cat named Miso",) and removal.source == "telegram:1001"
    # Restoring lines the file still holds adds nothing (and marks the removal done).
    assert MemoryStore(workspace).restore_removal(removal) == BASE
    assert store.removals().pending() == []


def test_a_torn_last_journal_line_is_skipped(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "workspace")
    store.replace_memory(BASE)
    store.rewrite_memory(MemoryRewrite(BASE, BASE.replace("- Likes green tea\n", ""), "cli:x"))
    journal = store.dir / JOURNAL_NAME
    with journal.open("a", encoding="utf-8") as torn:
        torn.write('{"type": "restored", "id": "')
    assert [r.lines for r in store.removals().pending()] == [("- Likes green tea",)]
    assert journal.stat().st_mode & 0o777 == 0o600


def test_rebulleting_or_reordering_is_not_a_removal(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "workspace")
    store.replace_memory(BASE)
    lines = BASE.splitlines()
    reordered = "\n".join([*lines[:2], *reversed(lines[2:])]).replace("- ", "* ") + "\n"
    store.rewrite_memory(MemoryRewrite(BASE, reordered, "cli:x"))
    assert store.read_memory() == reordered
    assert store.removals().pending() == []

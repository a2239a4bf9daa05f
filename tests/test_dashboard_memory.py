"""The memory pages through aiohttp's test client over the real app: MEMORY.md edits through
the workspace's memory writer (an edit based on an old version is refused with a diff and
never overwrites), versions with diff and restore, HISTORY.md and daily logs by date, search
with the parts of each score, the audit, and path confinement."""

from __future__ import annotations

import asyncio
import re
import threading
from datetime import UTC, datetime

import pytest

from clawgate.agent.memory.merge import MemoryRewrite
from clawgate.gateway.dashboard.memory import version_of
from tests.dashboard_harness import DashboardClient, dashboard
from tests.fakes.llm import FakeLLM, text
from tests.harness import wait_until

__all__ = ["dashboard"]


def form_of(page: str) -> dict[str, str]:
    """The edit form's hidden fields and text, as the browser would post them back."""
    version = re.search(r'name="version" value="([0-9a-f]{64})"', page)
    assert version, page
    base = re.search(r'name="base" value="([^"]*)"', page, re.S)
    assert base is not None
    import html

    return {"version": version.group(1), "base": html.unescape(base.group(1))}


async def test_memory_md_is_shown_escaped(dashboard: DashboardClient) -> None:
    dashboard.services.memory.replace_memory("- Ann likes <script>alert(1)</script> tea\n")
    page = await dashboard.text("/memory")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page


async def test_an_edit_is_saved_through_the_writer_and_the_old_text_kept_as_a_version(
    dashboard: DashboardClient,
) -> None:
    memory = dashboard.services.memory
    memory.replace_memory("- Ann lives in Lisbon\n")
    fields = form_of(await dashboard.text("/memory/edit"))
    response = await dashboard.post_form(
        "/memory/edit", {**fields, "text": "- Ann lives in Porto\r\n"}
    )
    assert response.status == 303 and response.headers["Location"] == "/memory?saved=1"
    assert memory.read_memory() == "- Ann lives in Porto\n"
    kept = [path.read_text(encoding="utf-8") for path in memory.versions()]
    assert kept[-1] == "- Ann lives in Lisbon\n"
    assert "Saved." in await dashboard.text("/memory?saved=1")


async def test_an_edit_based_on_an_old_version_is_refused_with_a_diff_and_never_overwrites(
    dashboard: DashboardClient,
) -> None:
    memory = dashboard.services.memory
    memory.replace_memory("- Ann lives in Lisbon\n")
    fields = form_of(await dashboard.text("/memory/edit"))
    # Meanwhile a consolidation (or the model, or another tab) rewrites the file.
    memory.replace_memory("- Ann lives in Lisbon\n- Ann has a cat named Miso\n")
    versions_before = memory.versions()
    response = await dashboard.post_form(
        "/memory/edit", {**fields, "text": "- Ann lives in Porto\n"}
    )
    page = await response.text()
    assert response.status == 409
    assert "Not saved: MEMORY.md changed after you opened it" in page
    assert '<span class="add">+- Ann has a cat named Miso</span>' in page
    # The owner's text stays in the form, now based on the current version.
    assert "- Ann lives in Porto" in page
    assert form_of(page)["version"] == version_of(memory.read_memory())
    assert memory.read_memory() == "- Ann lives in Lisbon\n- Ann has a cat named Miso\n"
    assert memory.versions() == versions_before


async def test_an_edit_waits_for_the_memory_lock_and_sees_the_write_that_held_it(
    dashboard: DashboardClient,
) -> None:
    memory = dashboard.services.memory
    memory.replace_memory("- one\n")
    fields = form_of(await dashboard.text("/memory/edit"))
    holding, release = threading.Event(), threading.Event()

    def consolidation() -> None:
        with memory.lock.hold():
            holding.set()
            release.wait(20)
            memory.replace_memory("- one\n- two\n")

    writer = threading.Thread(target=consolidation)
    writer.start()
    try:
        await asyncio.to_thread(holding.wait, 20)
        post = asyncio.create_task(
            dashboard.post_form("/memory/edit", {**fields, "text": "- mine\n"})
        )
        # The edit is queued on the writer's lock (its read-modify-write waits its turn).
        queue = memory.lock._queue()
        await wait_until(queue.locked)
        release.set()
        response = await post
    finally:
        release.set()
        await asyncio.to_thread(writer.join, 20)
    assert response.status == 409
    assert memory.read_memory() == "- one\n- two\n"


async def test_versions_are_listed_with_a_diff_and_restored_in_one_click(
    dashboard: DashboardClient,
) -> None:
    memory = dashboard.services.memory
    memory.replace_memory("- first fact\n")
    memory.replace_memory("- first fact\n- second fact\n")
    memory.replace_memory("- third fact only\n")
    listing = await dashboard.text("/memory/versions")
    names = re.findall(r'href="/memory/versions/(MEMORY\.\d+\.md)"', listing)
    assert names == [path.name for path in reversed(memory.versions())]
    # The oldest is onboard's template; then "- first fact".
    oldest = names[1]
    page = await dashboard.text(f"/memory/versions/{oldest}")
    assert '<span class="del">-- first fact</span>' in page
    assert '<span class="add">+- third fact only</span>' in page
    response = await dashboard.post_form(f"/memory/versions/{oldest}/restore", form_of(page))
    assert response.status == 303
    assert memory.read_memory() == "- first fact\n"
    # The text it replaced is itself kept.
    assert memory.versions()[-1].read_text(encoding="utf-8") == "- third fact only\n"
    page = await dashboard.text(f"/memory/versions/{oldest}")
    refused = await dashboard.post_form(
        f"/memory/versions/{oldest}/restore", form_of(page), csrf=False
    )
    assert refused.status == 403


async def test_restoring_a_version_is_refused_when_memory_changed_since_the_page_opened(
    dashboard: DashboardClient,
) -> None:
    """#24 item 4: the restore is a compare-and-swap like an edit; a consolidation's facts
    added after the page was opened are never silently dropped."""
    memory = dashboard.services.memory
    memory.replace_memory("- Ann lives in Lisbon\n")
    memory.replace_memory("- Ann lives in Porto\n")
    name = memory.versions()[-1].name
    assert 'id="restore"' in await dashboard.text(f"/memory/versions/{name}")  # page opened
    # Meanwhile a consolidation adds a fact.
    memory.replace_memory("- Ann lives in Porto\n- Ann's passport expires in 2031\n")
    versions_before = memory.versions()
    # What the page's form carries: the version it showed (and its text).
    opened = {"version": version_of("- Ann lives in Porto\n"), "base": "- Ann lives in Porto\n"}
    response = await dashboard.post_form(f"/memory/versions/{name}/restore", opened)
    conflict = await response.text()
    assert response.status == 409
    assert "Not restored: MEMORY.md changed after you opened this page" in conflict
    assert '<span class="add">+- Ann&#39;s passport expires in 2031</span>' in conflict
    assert memory.read_memory() == "- Ann lives in Porto\n- Ann's passport expires in 2031\n"
    assert memory.versions() == versions_before
    # The page that came back is based on the current text: restoring from it now works.
    again = await dashboard.post_form(f"/memory/versions/{name}/restore", form_of(conflict))
    assert again.status == 303 and memory.read_memory() == "- Ann lives in Lisbon\n"
    # A restore posted without a version is refused too.
    memory.replace_memory("- Ann lives in Porto\n")
    bare = await dashboard.post_form(f"/memory/versions/{name}/restore")
    assert bare.status == 409 and memory.read_memory() == "- Ann lives in Porto\n"


@pytest.mark.parametrize("on_disk", ["\n", "\r\n"], ids=["lf-file", "crlf-file"])
async def test_a_conflict_shows_only_what_changed_meanwhile_when_the_base_comes_back_as_crlf(
    dashboard: DashboardClient, on_disk: str
) -> None:
    """#35 item 7: a browser posts the hidden base with CRLF line ends (whatever the file
    has: its HTML parser reads CR LF in the page as LF, its form posts every LF as CR LF);
    the conflict view must still diff that base, not the owner's own text, against MEMORY.md
    now."""
    memory = dashboard.services.memory
    memory.replace_memory(f"# Facts{on_disk}{on_disk}- Ann lives in Lisbon{on_disk}")
    fields = form_of(await dashboard.text("/memory/edit"))
    memory.replace_memory(
        on_disk.join(["# Facts", "", "- Ann lives in Lisbon", "- Ann has a cat, Miso", ""])
    )
    crlf = {
        "version": fields["version"],
        "base": fields["base"].replace("\r\n", "\n").replace("\n", "\r\n"),
        "text": "# Facts\r\n\r\n- Ann lives in Lisbon\r\n- Ann prefers window seats\r\n",
    }
    response = await dashboard.post_form("/memory/edit", crlf)
    page = await response.text()
    assert response.status == 409
    changes = page.split('class="diff"')[1].split("</pre>")[0]
    assert '<span class="add">+- Ann has a cat, Miso</span>' in changes
    assert 'class="del"' not in changes, changes  # the owner's line is not shown as removed
    assert "window seats" in page.split('id="memory-editor"')[1]  # still in the form


async def test_lines_a_consolidation_removed_are_listed_and_restored_in_one_click(
    dashboard: DashboardClient,
) -> None:
    """#24 "Also": each consolidation's removed lines on the memory page; restoring appends
    them back through the same compare-and-swap under the memory lock."""
    memory = dashboard.services.memory
    base = "".join(f"- fact {n}\n" for n in range(1, 7))
    memory.replace_memory(base)
    update = base.replace("- fact 2\n", "").replace("- fact 5\n", "- fact five, reworded\n")
    memory.rewrite_memory(MemoryRewrite(base, update, "telegram:1001"))
    page = await dashboard.text("/memory")
    listing = page.split('id="removals"')[1]
    assert "- fact 2\n- fact 5\n" in listing and "telegram:1001" in listing
    removal_id = memory.removals().pending()[0].id
    action = f"/memory/removed/{removal_id}/restore"
    assert f'action="{action}"' in listing
    # A stale page (a consolidation wrote since) restores nothing.
    memory.replace_memory(update + "- fact 7\n")
    stale = await dashboard.post_form(action, form_of(page))
    conflict = await stale.text()
    assert stale.status == 409 and "Not restored" in conflict
    assert '<span class="add">+- fact 7</span>' in conflict
    assert memory.read_memory() == update + "- fact 7\n"
    # From the page that came back it works, once.
    restored = await dashboard.post_form(action, form_of(conflict))
    assert restored.status == 303 and restored.headers["Location"] == "/memory?saved=lines"
    assert memory.read_memory() == update + "- fact 7\n- fact 2\n- fact 5\n"
    assert memory.versions()[-1].read_text(encoding="utf-8") == update + "- fact 7\n"
    after = await dashboard.text("/memory?saved=lines")
    assert 'id="removals"' not in after and "Lines restored" in after
    current = {"version": version_of(memory.read_memory())}
    again = await dashboard.post_form(action, current)  # a second tab's click
    assert again.status == 303 and memory.read_memory().count("- fact 2") == 1
    assert (await dashboard.post_form("/memory/removed/nope/restore", current)).status == 404
    # A removal whose lines the owner already put back by hand is not offered.
    now = memory.read_memory()
    memory.rewrite_memory(MemoryRewrite(now, now.replace("- fact 3\n", ""), "telegram:1001"))
    assert 'id="removals"' in await dashboard.text("/memory")
    memory.replace_memory(memory.read_memory() + "* Fact 3\n")
    assert 'id="removals"' not in await dashboard.text("/memory")


@pytest.mark.parametrize(
    "name",
    ["..%2FMEMORY.md", "..%2F..%2Fsessions", "MEMORY.md", ".lock", "%2Fetc%2Fpasswd", "nope.md"],
)
async def test_version_paths_stay_inside_the_versions_folder(
    dashboard: DashboardClient, name: str
) -> None:
    dashboard.services.memory.replace_memory("- a\n")
    dashboard.services.memory.replace_memory("- b\n")
    assert (await dashboard.get(f"/memory/versions/{name}")).status == 404
    restore = await dashboard.post_form(f"/memory/versions/{name}/restore")
    assert restore.status == 404
    assert dashboard.services.memory.read_memory() == "- b\n"


async def test_history_and_daily_logs_are_browsable_by_date(dashboard: DashboardClient) -> None:
    memory = dashboard.services.memory
    memory.append_history(
        "Ann planned the Lisbon trip.", "telegram:1", datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    )
    memory.append_history(
        "Ann booked <b>flights</b>.", "telegram:1", datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    )
    page = await dashboard.text("/memory/history")
    assert "Ann planned the Lisbon trip." in page and "Ann booked &lt;b&gt;flights" in page
    assert '<option value="2026-03-02">' in page
    one_day = await dashboard.text("/memory/history?date=2026-03-01")
    assert "Lisbon trip" in one_day and "flights" not in one_day
    await dashboard.text("/memory/history?date=../../x", status=404)
    days = await dashboard.text("/memory/daily")
    assert 'href="/memory/daily/2026-03-01"' in days and 'href="/memory/daily/2026-03-02"' in days
    day = await dashboard.text("/memory/daily/2026-03-02")
    assert "Ann booked &lt;b&gt;flights" in day
    await dashboard.text("/memory/daily/2026-03-05", status=404)


@pytest.mark.parametrize("day", ["..%2F..%2Fsessions", "2026-13-01", "2026-03-01.md", "..", "x"])
async def test_daily_log_paths_are_only_dates(dashboard: DashboardClient, day: str) -> None:
    assert (await dashboard.get(f"/memory/daily/{day}")).status == 404


async def test_search_shows_each_results_score_and_its_parts(dashboard: DashboardClient) -> None:
    dashboard.services.memory.replace_memory(
        "# People\n\n- Ann's sister Berta is a marine biologist in Porto\n\n"
        "# Food\n\n- Ann is allergic to peanuts\n"
    )
    page = await dashboard.text("/memory/search?q=Berta+marine+biologist")
    results = page.split('id="search-results"')[1]
    assert "MEMORY.md" in results and "marine biologist" in results
    assert re.search(r"score \d\.\d{3}", results)
    assert re.search(r"keyword \d\.\d\d · vector \d\.\d\d · date \d · recency \d\.\d\d", results)
    assert 'id="search-results"' not in await dashboard.text("/memory/search?q=")


async def test_search_json_output_is_unchanged_by_the_score_parts(
    dashboard: DashboardClient,
) -> None:
    dashboard.services.memory.replace_memory("- Ann is allergic to peanuts\n")
    hits = await dashboard.services.search.search("peanuts allergy")
    assert hits and hits[0].why is not None
    assert set(hits[0].as_json()) == {"path", "start_line", "end_line", "score", "snippet", "date"}


async def test_the_audit_accounts_for_a_conversation(
    dashboard: DashboardClient, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("Hello, Ann."))
    reply = await dashboard.harness.ask("hi")
    assert reply.text == "Hello, Ann."
    page = await dashboard.text("/memory/audit")
    assert "Everything accounted for." in page
    assert re.search(r"<th>Messages</th><td class=\"num\">2</td>", page)

"""The owner's files (SOUL.md, USER.md, AGENTS.md, TOOLS.md, HEARTBEAT.md, skills) through
aiohttp's test client over the real app: rendered, edited with a preview, saved under
MEMORY.md's rule (an edit based on an old version is refused with a diff, never
overwrites), the old text kept as a version, and names confined to those files."""

from __future__ import annotations

import html
import re

import pytest

from tests.dashboard_harness import DashboardClient, dashboard

__all__ = ["dashboard"]


def form_of(page: str) -> dict[str, str]:
    """The edit form's hidden fields, as the browser would post them back."""
    version = re.search(r'name="version" value="([0-9a-f]{64})"', page)
    base = re.search(r'name="base" value="([^"]*)"', page, re.S)
    assert version and base, page
    return {"version": version.group(1), "base": html.unescape(base.group(1))}


async def test_the_files_page_lists_the_five_files_and_the_skills(
    dashboard: DashboardClient,
) -> None:
    skill = dashboard.workspace / "skills" / "weekly" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: weekly\n---\nReview the week.\n", encoding="utf-8")
    page = await dashboard.text("/files")
    for name in ("SOUL.md", "USER.md", "AGENTS.md", "TOOLS.md", "HEARTBEAT.md"):
        assert f'href="/files/view?file={name}"' in page
    assert 'href="/files/view?file=skills/weekly/SKILL.md"' in page
    assert "<title>Files · clawgate</title>" in page


async def test_a_file_is_rendered_edited_with_a_preview_and_its_old_text_kept(
    dashboard: DashboardClient,
) -> None:
    soul = dashboard.workspace / "SOUL.md"
    soul.write_text("# Soul\n\nBe **kind**. <script>x</script>\n", encoding="utf-8")
    page = await dashboard.text("/files/view?file=SOUL.md")
    assert "<strong>kind</strong>" in page and "<script>x" not in page

    fields = form_of(await dashboard.text("/files/edit?file=SOUL.md"))
    preview = await dashboard.post_form(
        "/files/edit?file=SOUL.md",
        {**fields, "text": "# Soul\r\n\r\nBe *brief*.\r\n", "preview": "1"},
    )
    body = await preview.text()
    assert preview.status == 200 and '<div class="card markdown" id="preview"><h1>Soul</h1>' in body
    assert "<em>brief</em>" in body and "Be *brief*." in body  # the text stays in the editor
    assert "kind" in soul.read_text(encoding="utf-8")  # a preview writes nothing
    assert form_of(body)["version"] == fields["version"]

    saved = await dashboard.post_form(
        "/files/edit?file=SOUL.md", {**fields, "text": "# Soul\r\n\r\nBe *brief*.\r\n"}
    )
    assert saved.status == 303
    assert saved.headers["Location"] == "/files/view?file=SOUL.md&saved=1"
    assert soul.read_text(encoding="utf-8") == "# Soul\n\nBe *brief*.\n"
    versions = sorted((dashboard.workspace / ".versions").glob("SOUL.*.md"))
    assert [p.read_text(encoding="utf-8") for p in versions] == [
        "# Soul\n\nBe **kind**. <script>x</script>\n"
    ]
    page = await dashboard.text("/files/view?file=SOUL.md&saved=1")
    assert "Saved." in page and versions[0].name in page
    version = await dashboard.text(f"/files/version?file=SOUL.md&v={versions[0].name}")
    assert "+Be *brief*." in version and "-Be **kind**." in html.unescape(version)


async def test_an_edit_based_on_an_old_version_is_refused_with_a_diff(
    dashboard: DashboardClient,
) -> None:
    user = dashboard.workspace / "USER.md"
    user.write_text("- Ann\n", encoding="utf-8")
    fields = form_of(await dashboard.text("/files/edit?file=USER.md"))
    user.write_text("- Ann\n- lives in Porto\n", encoding="utf-8")  # the model, meanwhile
    refused = await dashboard.post_form(
        "/files/edit?file=USER.md", {**fields, "text": "- Ann, a sailor\n"}
    )
    body = await refused.text()
    assert refused.status == 409 and "Not saved: USER.md changed after you opened it" in body
    assert "+- lives in Porto" in body and "- Ann, a sailor" in body
    assert user.read_text(encoding="utf-8") == "- Ann\n- lives in Porto\n"
    # Saved again from the refusal's form, it is based on the current text: it lands.
    again = await dashboard.post_form(
        "/files/edit?file=USER.md", {**form_of(body), "text": "- Ann, a sailor in Porto\n"}
    )
    assert again.status == 303
    assert user.read_text(encoding="utf-8") == "- Ann, a sailor in Porto\n"


async def test_a_new_skill_is_started_and_saved_in_its_own_folder(
    dashboard: DashboardClient,
) -> None:
    started = await dashboard.post_form("/files/skill", {"name": "trip-planner"})
    assert started.status == 303
    assert started.headers["Location"] == "/files/edit?file=skills/trip-planner/SKILL.md"
    fields = form_of(await dashboard.text(started.headers["Location"]))
    text = "---\nname: trip-planner\ndescription: plan trips\n---\nAsk for dates first.\n"
    saved = await dashboard.post_form(started.headers["Location"], {**fields, "text": text})
    assert saved.status == 303
    skill = dashboard.workspace / "skills" / "trip-planner" / "SKILL.md"
    assert skill.read_text(encoding="utf-8") == text
    refused = await dashboard.post_form("/files/skill", {"name": "../etc"})
    assert refused.status == 400


@pytest.mark.parametrize(
    "name",
    ["MEMORY.md", "../config.toml", "skills/../../x/SKILL.md", "skills/a/b/SKILL.md", "", "x.md"],
)
async def test_only_the_owner_files_are_reachable(dashboard: DashboardClient, name: str) -> None:
    for path in ("/files/view", "/files/edit"):
        response = await dashboard.get(path, params={"file": name})
        assert response.status == 404, (path, name)
    response = await dashboard.post_form("/files/edit?" + f"file={name}", {"text": "x"})
    assert response.status == 404

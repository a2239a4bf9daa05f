"""The dashboard's serving, login and request checks, through aiohttp's test client over the
real app and services (tests/dashboard_harness.py)."""

from __future__ import annotations

from tests.dashboard_harness import DashboardClient, dashboard

__all__ = ["dashboard"]


async def test_a_logged_in_owner_sees_every_page_in_the_navigation(
    dashboard: DashboardClient,
) -> None:
    page = await dashboard.text("/memory")
    for label, href in [
        ("Chat", "/chat"),
        ("Memory", "/memory"),
        ("Sessions", "/sessions"),
        ("People", "/people"),
        ("Jobs", "/jobs"),
        ("Health", "/health"),
    ]:
        assert f'href="{href}"' in page and label in page
        await dashboard.text(href)

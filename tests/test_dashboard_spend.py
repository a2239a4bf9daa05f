"""The spend page over the in-process gateway: USD bars by agent and purpose when prices
are known, tokens (and "unknown") when not, and the month's top chats."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from clawgate.kernel.bus import Trust
from tests.dashboard_harness import dashboard_client
from tests.fakes.llm import text
from tests.harness import make_config
from tests.spend_helpers import PRICES, past_calls


async def test_the_spend_page_stacks_each_day_by_agent_and_purpose(
    tmp_path, fake_llm, agent_config
):
    agent = agent_config.model_copy(update={"prices": PRICES})
    config = make_config(tmp_path, agent)
    await past_calls(config.data_dir, 3)
    async with dashboard_client(config) as dashboard:
        page = await dashboard.text("/spend")
    series = set(re.findall(r'data-series="([^"]+)"', page))
    assert series == {"main · chat", "main · heartbeat", "main · consolidation"}
    assert len(re.findall(r"<rect x=", page)) == 3 * 3  # three days, three series each
    assert "per day, by agent and purpose (USD)" in page
    top = page.split('id="top-chats"')[1]
    if datetime.now(UTC).day > 3:  # all three days in this month's table
        # By cost: the owner's chat (chats and consolidations), the heartbeat, the group.
        assert top.index("telegram:1001") < top.index("heartbeat:main")
        assert top.index("heartbeat:main") < top.index("telegram:-100200")


async def test_unknown_prices_are_drawn_in_tokens_and_shown_unknown(
    tmp_path, fake_llm, agent_config
):
    config = make_config(tmp_path, agent_config)  # openai/fake-model has no price
    async with dashboard_client(config) as dashboard:
        fake_llm.script(text("Hi group."))
        await dashboard.harness.ask("hello", chat_id="-7", trust=Trust.GROUP)
        page = await dashboard.text("/spend")
    assert "(tokens)" in page and "set <code>agent.prices</code>" in page
    [bar] = re.findall(r'<rect x=[^>]*data-series="main · chat"[^>]*>', page)
    row = page.split('id="top-chats"')[1].split("</tr>")[1]
    assert "test:-7" in row and "unknown (" in row and "$" not in row
    assert bar

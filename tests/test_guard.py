import asyncio
import json
from datetime import UTC, datetime

from clawgate.agent.guard import SUMMARY_PREFIX, truncate_tool_results
from clawgate.agent.loop import TOO_LONG
from clawgate.agent.memory.tokens import estimate_messages, estimate_tokens, tail_within
from clawgate.agent.session import Compaction, Message, State, load_session
from clawgate.kernel.bus import Trust
from tests.fakes.llm import context_overflow, text, tool_call
from tests.harness import Harness, make_config
from tests.memory_helpers import is_consolidation, save


def is_flush(request) -> bool:
    last = request["messages"][-1]
    return last["role"] == "user" and "about to be compacted" in str(last["content"])


def is_summary(request) -> bool:
    return "Summarise the conversation" in request["messages"][0]["content"]


def _small_window(agent_config, window=4000):
    agent_config.context_window_tokens = window
    agent_config.max_tokens = 500
    agent_config.memory_window = 500
    return agent_config


async def _fill(harness, count, size=400, key="test:1"):
    session = await harness.runtime.sessions.get(key)
    harness.runtime.sessions.append(session, State(trust="owner"))
    for i in range(count):
        role = "user" if i % 2 == 0 else "assistant"
        harness.runtime.sessions.append(
            session, Message(role=role, content=f"old message {i} " + "lorem ipsum " * (size // 12))
        )
    return session


def test_estimate_and_truncate():
    big = {"role": "tool", "tool_call_id": "a", "content": "x" * 50_000}
    assert estimate_messages([big]) > 12_000
    cut = truncate_tool_results([big, {"role": "user", "content": "y" * 50_000}])
    assert len(cut[0]["content"]) < 2_200 and "characters cut" in cut[0]["content"]
    assert len(cut[1]["content"]) == 50_000  # only tool results are cut


async def test_soft_threshold_runs_one_silent_flush(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, _small_window(agent_config))
    day = datetime.now(UTC).date().isoformat()
    flushes = 0

    def handler(request):
        nonlocal flushes
        if is_flush(request):
            flushes += 1
            if request["messages"][-1]["role"] == "user":
                return tool_call("write_file", path=f"memory/{day}.md", content="- flushed fact\n")
        if request["messages"][-1]["role"] == "tool" and flushes and not is_flush(request):
            return text("NO_REPLY")
        return text("the answer")

    fake_llm.handler = handler
    async with Harness(config) as harness:
        await _fill(harness, 16, size=800)
        # Place the window so this request sits past the soft threshold, under the limit.
        used = int((await harness.ask("/context")).text.split("~")[1].split()[0].replace(",", ""))
        guard = harness.runtime.loop.guard
        guard.limit, guard.soft_limit = used + 400, used - 200
        reply = await harness.ask("what now?")
        assert reply.text == "the answer"
        assert (await harness.ask("and then?")).text == "the answer"
    assert flushes == 1
    assert (config.workspace / "memory" / f"{day}.md").read_text() == "- flushed fact\n"
    stored = load_session(harness.runtime.sessions.path_for("test:1"), "test:1")
    assert all("NO_REPLY" not in str(m.content) for m in stored.messages)
    assert all("about to be compacted" not in str(m.content) for m in stored.messages)
    ledger = [
        json.loads(line)["purpose"]
        for path in (config.data_dir / "usage").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert sorted(ledger) == ["chat", "chat", "flush", "flush"]  # the flush's two calls


async def test_oversized_tool_result_is_cut_in_what_is_sent(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, _small_window(agent_config, window=5000))
    (config.workspace / "big.txt").write_text("B" * 40_000)
    fake_llm.script(tool_call("read_file", path="big.txt"))
    fake_llm.handler = lambda request: text("NO_REPLY") if is_flush(request) else text("read it")
    async with Harness(config) as harness:
        assert (await harness.ask("read big.txt")).text == "read it"
    sent = fake_llm.requests[-1]["messages"][-1]["content"]
    assert "characters cut to fit the context" in sent and len(sent) < 3_000
    stored = load_session(harness.runtime.sessions.path_for("test:1"), "test:1")
    assert len(stored.messages[-2].content) > 10_000  # the stored result is only capped


async def test_overflow_compacts_view_survives_restart_raw_lines_consolidated(
    tmp_path, fake_llm, agent_config
):
    config = make_config(tmp_path, _small_window(agent_config, window=20_000))
    fake_llm.script(context_overflow(), context_overflow())
    fake_llm.handler = lambda request: (
        text("SUMMARY: Ann discussed old topics.") if is_summary(request) else text("fits now")
    )
    async with Harness(config) as harness:
        await _fill(harness, 40, size=300)
        assert (await harness.ask("continue")).text == "fits now"
    final = fake_llm.requests[-1]["messages"]
    assert final[1]["content"].startswith(SUMMARY_PREFIX)
    assert "old message 0 " not in str(final)
    session = load_session(harness.runtime.sessions.path_for("test:1"), "test:1")
    assert len(list(session.records_of(Compaction))) == 1
    assert len(session.messages) == 42  # the raw lines stay

    async with Harness(config) as restarted:
        fake_llm.handler = lambda request: text("after restart")
        await restarted.ask("still there?")
        assert fake_llm.requests[-1]["messages"][1]["content"].startswith(SUMMARY_PREFIX)
        fake_llm.script(save("Everything, raw."))
        session = await restarted.runtime.sessions.get("test:1")
        outcome = await restarted.runtime.consolidator.consolidate(session, archive_all=True)
        assert outcome.ok and outcome.from_seq == 1
    consolidation = next(r for r in reversed(fake_llm.requests) if is_consolidation(r))
    assert "old message 0 " in consolidation["messages"][1]["content"]


async def test_overflow_that_compaction_cannot_fix_fails_clearly(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, _small_window(agent_config, window=20_000))
    fake_llm.handler = lambda request: (
        text("SUMMARY") if is_summary(request) else context_overflow()
    )
    async with Harness(config) as harness:
        await _fill(harness, 10)
        reply = await harness.ask("hello")
    assert reply.is_error and reply.text == TOO_LONG


async def test_compact_and_context_commands(tmp_path, fake_llm, agent_config):
    config = make_config(tmp_path, _small_window(agent_config, window=20_000))
    fake_llm.handler = lambda request: text("SUMMARY of the start")
    async with Harness(config) as harness:
        assert (await harness.ask("/compact")).text == "Nothing to compact yet."
        await _fill(harness, 60, size=400)
        before = (await harness.ask("/context")).text
        assert "history: 60 messages" in before and "of 19,500 tokens" in before
        owner_tools = harness.runtime.tools.schemas(Trust.OWNER, config.tools)
        assert "system: AGENTS.md" in before and f"tools: {len(owner_tools)}" in before
        assert (await harness.ask("/compact")).text.startswith("Compacted ")
        after = (await harness.ask("/context")).text
        assert int(after.split("~")[1].split()[0].replace(",", "")) < int(
            before.split("~")[1].split()[0].replace(",", "")
        )
        await asyncio.sleep(0)


# -- Chinese, Japanese and Korean text ------------------------------------------------------

# Two sentences of ordinary Chinese, 30 characters: about one token per character.
CHINESE = "我们明天早上九点在公司门口见面，然后一起去机场接客户。"


def _is_cjk(char: str) -> bool:
    return "\u4e00" <= char <= "\u9fff" or "\u3000" <= char <= "\u30ff" or char == "\uff0c"


def provider_tokens(request: dict) -> int:
    """How the fake provider counts a request: one token per CJK character and about four
    characters a token for everything else in the JSON it received - as BPE tokenizers do."""
    body = json.dumps([request["messages"], request.get("tools") or []], ensure_ascii=False)
    cjk = sum(1 for char in body if _is_cjk(char))
    return cjk + (len(body) - cjk) // 4


def characters_over_four(messages: list) -> int:
    """The estimate the guard used before it knew about CJK text."""
    return sum(len(json.dumps(m, ensure_ascii=False)) + 16 for m in messages) // 4 + 1


class WindowedModel:
    """A fake model with a real context window: a request whose prompt plus max_tokens does
    not fit is refused with the provider's context-length error, as OpenAI does."""

    def __init__(self, window: int, answer: str) -> None:
        self.window = window
        self.answer = answer
        self.largest = 0
        self.overflows = 0

    def __call__(self, request: dict):
        needed = provider_tokens(request) + request.get("max_tokens", 0)
        self.largest = max(self.largest, needed)
        if needed > self.window:
            self.overflows += 1
            return context_overflow(self.window, needed)
        if is_flush(request):
            return text("NO_REPLY")
        if is_summary(request):
            return text("摘要：客户接机的安排。")
        return text(self.answer)


def test_cjk_text_counts_about_a_token_a_character():
    assert estimate_tokens(CHINESE * 10) >= 270
    assert estimate_tokens("日本語のテキスト" * 10) >= 80 and estimate_tokens("한국어 텍스트") >= 6
    assert estimate_tokens("plain English text, forty characters...") == 10
    tail = tail_within("x" * 100 + CHINESE * 10, 50)
    assert (CHINESE * 10).endswith(tail) and 45 <= estimate_tokens(tail) <= 50
    assert tail_within("abcdefgh" * 10, 5) == ("abcdefgh" * 10)[-20:]


async def test_chinese_conversation_is_compacted_before_the_window_overflows(
    tmp_path, fake_llm, agent_config
):
    window = 6000
    config = make_config(tmp_path, _small_window(agent_config, window=window))
    model = WindowedModel(window, answer=CHINESE * 12)
    fake_llm.handler = model
    async with Harness(config) as harness:
        for turn in range(14):
            reply = await harness.ask(f"第{turn}个问题：" + CHINESE * 12)
            assert reply.text == CHINESE * 12, reply.text
        session = await harness.runtime.sessions.get("test:1")
        raw = [{"role": m.role, "content": m.content} for m in session.messages]
    assert model.overflows == 0, f"the fake model saw {model.largest} of {window} tokens"
    assert model.largest > 0.9 * window  # the conversation did come close to the window
    assert any(is_flush(r) for r in fake_llm.requests)
    assert len(list(session.records_of(Compaction))) >= 1
    # What the guard prevented: by characters/4 the raw history looks far from the limit,
    # while the provider counts it well past its window.
    assert characters_over_four(raw) < 0.6 * (window - config.agent.max_tokens)
    assert provider_tokens({"messages": raw}) > window


async def test_one_chinese_message_too_large_is_refused_without_a_call(
    tmp_path, fake_llm, agent_config
):
    window = 6000
    config = make_config(tmp_path, _small_window(agent_config, window=window))
    model = WindowedModel(window, answer="好")
    fake_llm.handler = model
    message = CHINESE * 200  # 6,000 characters: 1,500 "tokens" by characters/4
    async with Harness(config) as harness:
        reply = await harness.ask(message, trust=Trust.GROUP)
    assert reply.is_error and reply.text == TOO_LONG
    assert model.overflows == 0 and not [r for r in fake_llm.requests if not is_summary(r)]
    assert characters_over_four([{"role": "user", "content": message}]) < window // 2

import asyncio
import dataclasses
import json

import pytest

from clawgate.agent.commands import EMPTY_MESSAGE
from clawgate.agent.loop import CANCELLED_RESULT, EMPTY_REPLY
from clawgate.agent.runtime import AgentRuntime
from clawgate.agent.session import load_session
from clawgate.channels.manager import ChannelStates
from clawgate.gateway.daemon.gateway import Gateway
from clawgate.gateway.ops.status_file import read_status
from clawgate.kernel.bus import InboundMessage, MessageBus, Trust
from tests.fakes.llm import call, error, gate, raw_tool_call, text, tool_call, tool_calls
from tests.harness import Harness, RecordingChannel, make_config, wait_until
from tests.memory_helpers import save


@pytest.fixture(params=["direct", "litellm"])
def model_path(request):
    """Every test here runs through both model paths (see tests/conftest.py)."""
    return str(request.param)


def _session_lines(harness, key="test:1"):
    path = harness.runtime.sessions.path_for(key)
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_plain_reply_is_persisted_and_delivered(harness, fake_llm):
    fake_llm.script(text("Hello, Ann."))
    reply = await harness.ask("hi")
    assert reply.text == "Hello, Ann." and not reply.is_error
    lines = _session_lines(harness)
    assert lines[0] == {**lines[0], "type": "session", "key": "test:1"}
    messages = [line for line in lines if "role" in line]
    assert [(m["role"], m["content"], m["seq"]) for m in messages] == [
        ("user", "hi", 1),
        ("assistant", "Hello, Ann.", 2),
    ]
    await harness.gateway.default.dispatcher.wait_idle(5)
    await asyncio.wait_for(harness.bus.outbound.join(), 5)
    deliveries = [line for line in _session_lines(harness) if line.get("type") == "delivery"]
    assert deliveries and deliveries[0]["seq"] == 2 and deliveries[0]["status"] == "sent"
    system = fake_llm.last_system_prompt()
    assert "AGENTS.md" in system and "test:1" in system


async def test_tool_call_writes_file_then_answers(harness, fake_llm):
    fake_llm.script(tool_call("write_file", path="todo.md", content="- milk"), text("Saved."))
    reply = await harness.ask("note: milk")
    assert reply.text == "Saved."
    assert (harness.workspace / "todo.md").read_text() == "- milk"
    sent = fake_llm.requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert sent[-1]["role"] == "tool" and "todo.md" in sent[-1]["content"]
    roles = [
        m.role for m in load_session(harness.runtime.sessions.path_for("test:1"), "test:1").messages
    ]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_several_calls_bad_arguments_and_unknown_tool_become_readable_errors(
    harness, fake_llm
):
    (harness.workspace / "a.txt").write_text("alpha")
    fake_llm.script(
        tool_calls(call("read_file", path="a.txt"), call("no_such_tool", x=1)),
        raw_tool_call("read_file", '{"path": "a.txt"'),
        text("Done."),
    )
    assert (await harness.ask("go")).text == "Done."
    second = fake_llm.requests[1]["messages"]
    results = [m["content"] for m in second if m["role"] == "tool"]
    assert results[0] == "alpha"
    assert results[1].startswith("Error: unknown tool 'no_such_tool'")
    third = fake_llm.requests[2]["messages"]
    assert "not valid JSON" in [m for m in third if m["role"] == "tool"][-1]["content"]


async def test_tool_iterations_are_bounded(tmp_path, fake_llm, agent_config):
    agent_config.max_tool_iterations = 3
    fake_llm.handler = lambda request: tool_call("list_dir", path=".")
    async with Harness(make_config(tmp_path, agent_config)) as harness:
        reply = await harness.ask("loop forever")
    assert "3 tool steps" in reply.text
    assert len(fake_llm.requests) == 3


async def test_model_failure_apologises_and_persists_no_fake_reply(
    tmp_path, fake_llm, agent_config
):
    agent_config.max_retries = 0
    fake_llm.script(error(500, "boom"))
    async with Harness(make_config(tmp_path, agent_config)) as harness:
        reply = await harness.ask("are you there?")
        assert reply.is_error and "couldn't reach the model" in reply.text
        fake_llm.script(text("Yes."))
        assert (await harness.ask("again")).text == "Yes."
        messages = harness.runtime.sessions.path_for("test:1")
    stored = [m for m in load_session(messages, "test:1").messages]
    assert [(m.role, m.content) for m in stored] == [
        ("user", "are you there?"),
        ("user", "again"),
        ("assistant", "Yes."),
    ]
    assert "boom" not in json.dumps(fake_llm.requests[-1]["messages"])


async def test_empty_reply_is_not_stored_as_the_models(harness, fake_llm):
    fake_llm.script(text(""))
    reply = await harness.ask("hello?")
    assert reply.text == EMPTY_REPLY and reply.is_error
    roles = [line.get("role") for line in _session_lines(harness) if "role" in line]
    assert roles == ["user"]


async def test_stop_cancels_running_turn_and_keeps_pairs(harness, fake_llm):
    fake_llm.script(tool_call("exec", command="sleep 30"))
    await harness.channel.say("run something slow")
    session = await harness.runtime.sessions.get("test:1")
    await wait_until(lambda: any(m.tool_calls for m in session.messages))
    await harness.channel.say("/stop")
    assert (await harness.channel.next_reply()).text == "Stopped."
    assert await harness.gateway.default.dispatcher.wait_idle(5)
    messages = [line for line in _session_lines(harness) if "role" in line]
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "exec"
    assert messages[-1]["role"] == "tool" and messages[-1]["content"] == CANCELLED_RESULT
    fake_llm.script(text("ok"))
    assert (await harness.ask("next")).text == "ok"


async def test_messages_of_one_session_are_answered_in_order(harness, fake_llm):
    release = asyncio.Event()
    fake_llm.script(gate(release, text("first")))
    fake_llm.handler = lambda request: text(
        "other chat" if request["messages"][-1]["content"] == "hey" else "second"
    )
    await harness.channel.say("one")
    await harness.channel.say("two")
    await fake_llm.wait_for_requests(1)
    # Another session is not held up by the first one's slow turn.
    assert (await harness.ask("hey", chat_id="2")).text == "other chat"
    release.set()
    assert (await harness.channel.next_reply()).text == "first"
    assert (await harness.channel.next_reply()).text == "second"
    second_request = fake_llm.requests[-1]["messages"]
    assert [m["content"] for m in second_request if m["role"] != "system"][-1] == "two"


async def test_model_status_help_and_new(harness, fake_llm):
    assert (await harness.ask("/model")).text == "Model: openai/fake-model"
    fake_llm.script(text("p"))  # the one-token check that the endpoint serves the name
    assert "set to openai/other" in (await harness.ask("/model openai/other")).text
    assert fake_llm.requests[-1]["max_tokens"] == 1
    fake_llm.script(text("from other"))
    await harness.ask("hi")
    assert fake_llm.requests[-1]["model"] == "other"
    status = (await harness.ask("/status")).text
    assert "Session: test:1" in status and "Trust: owner" in status and "Messages: 2" in status
    assert "/new" in (await harness.ask("/help")).text
    fake_llm.script(tool_call("save_memory", history_entry="Talked about models."))
    assert (await harness.ask("/new")).text == "New session started."
    archived = list((harness.workspace / "sessions" / "archive").glob("test_1.*.jsonl"))
    assert len(archived) == 1 and "from other" in archived[0].read_text()
    assert await harness.runtime.consolidator.drain(10)
    fake_llm.script(text("fresh"))
    await harness.ask("again")
    roles = [m["role"] for m in fake_llm.last_messages()]
    assert roles == ["system", "user"]
    # The /model check, hi, the archive's consolidation, again.
    assert len(fake_llm.requests) == 4


async def test_model_name_is_checked_before_the_switch(harness, fake_llm):
    fake_llm.script(error(404, "The model `no-such-model` does not exist"))
    reply = (await harness.ask("/model openai/no-such-model")).text
    assert reply.startswith("Model not changed:") and "no-such-model" in reply
    assert "\n" not in reply
    assert (await harness.ask("/model")).text == "Model: openai/fake-model"
    assert [r["model"] for r in fake_llm.requests] == ["no-such-model"]


async def test_shared_chats_cannot_switch_the_model_reset_or_compact(harness, fake_llm):
    refusals = {
        "/model openai/expensive": "Only the owner can change the model here.",
        "/new": "Only the owner can start a new session here.",
        "/compact": "Only the owner can compact this session here.",
    }
    for trust in (Trust.GROUP, Trust.ALLOWED):
        for command, refusal in refusals.items():
            assert (await harness.ask(command, chat_id=trust.value, trust=trust)).text == refusal
        # Looking is harmless: the model's name is shown to anyone.
        shown = await harness.ask("/model", chat_id=trust.value, trust=trust)
        assert shown.text == "Model: openai/fake-model"
    assert fake_llm.requests == []
    assert not list((harness.workspace / "sessions" / "archive").glob("*.jsonl"))


async def test_private_memory_only_in_owner_sessions(harness, fake_llm):
    (harness.workspace / "memory" / "MEMORY.md").write_text("Owner's secret: the cat is Miso\n")
    (harness.workspace / "sessions" / "cli_default.jsonl").write_text('{"type":"session"}\n')
    for trust in (Trust.ALLOWED, Trust.GROUP):
        chat = trust.value
        fake_llm.script(
            tool_calls(
                call("read_file", path="memory/MEMORY.md"),
                call("read_file", path="../memory/MEMORY.md"),
                call("read_file", path=str(harness.workspace / "sessions" / "cli_default.jsonl")),
                call("exec", command="cat memory/MEMORY.md"),
            ),
            text("no"),
        )
        await harness.ask("read the owner's memory", chat_id=chat, trust=trust)
        system = fake_llm.requests[-2]["messages"][0]["content"]
        assert "Miso" not in system
        results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert len(results) == 4 and all(r.startswith("Error:") for r in results)
        assert not any("Miso" in r for r in results)
    fake_llm.script(tool_call("read_file", path="memory/MEMORY.md"), text("yes"))
    await harness.ask("what is in memory?")
    assert "Miso" in fake_llm.requests[-2]["messages"][0]["content"]
    assert "Miso" in fake_llm.requests[-1]["messages"][-1]["content"]


async def test_group_messages_carry_the_speaker(harness, fake_llm):
    fake_llm.script(text("hi Bob"))
    await harness.ask("hello bot", chat_id="-100", trust=Trust.GROUP, sender="Bob")
    assert fake_llm.last_messages()[-1] == {"role": "user", "content": "[Bob] hello bot"}


async def test_api_key_never_reaches_the_model(harness, fake_llm):
    fake_llm.script(tool_call("exec", command="env; echo $CLAWGATE_AGENT__API_KEY"), text("ok"))
    await harness.ask("show env")
    assert "sk-test-secret" not in json.dumps(fake_llm.requests)
    assert "sk-test-secret" not in harness.runtime.sessions.path_for("test:1").read_text()


async def test_shutdown_finishes_in_flight_turn(tmp_path, fake_llm, agent_config):
    release = asyncio.Event()
    fake_llm.script(gate(release, text("finished")))
    harness = Harness(make_config(tmp_path, agent_config))
    await harness.gateway.start()
    await harness.channel.say("slow one")
    await fake_llm.wait_for_requests(1)
    stopping = asyncio.create_task(harness.gateway.stop(grace=5))
    await asyncio.sleep(0.1)
    release.set()
    await stopping
    assert (await harness.channel.next_reply(timeout=1)).text == "finished"
    roles = [
        m.role for m in load_session(harness.runtime.sessions.path_for("test:1"), "test:1").messages
    ]
    assert roles == ["user", "assistant"]


async def test_daemon_wiring_reports_channels_and_writes_status(tmp_path, fake_llm, agent_config):
    """As serve() builds it: the channel states exist before the runtime that reports them."""
    config = make_config(tmp_path, agent_config)
    bus = MessageBus()
    channel = RecordingChannel(bus)
    states = ChannelStates()
    runtime = AgentRuntime.build(
        config, outbox=bus.publish_outbound, channel_status=states.snapshot
    )
    gateway = Gateway([(runtime, bus)], [channel], bus, channel_states=states, daemon=True)
    await gateway.start()
    try:
        await channel.say("/status")
        assert "Channel test: running" in (await channel.next_reply()).text
        await wait_until(lambda: read_status(config.data_dir) is not None)
        report = read_status(config.data_dir)
        assert report is not None and report["channels"]["test"]["state"] == "running"
        await wait_until(lambda: runtime.llm.ready)  # loaded in the background, not on demand
    finally:
        await gateway.stop(grace=2)
    assert read_status(config.data_dir) is None  # removed on a clean stop


async def test_empty_or_blank_message_gets_a_hint_without_a_model_call(harness, fake_llm):
    for blank in ("", "   \n\t "):
        reply = await harness.ask(blank)
        assert reply.text == EMPTY_MESSAGE and not reply.is_error
    assert fake_llm.requests == []


async def test_compact_counts_in_words(harness):
    class OneAtATime:
        async def compact(self, session, *, model):
            return 1

    commands = dataclasses.replace(harness.runtime.commands, guard=OneAtATime())
    message = InboundMessage(
        channel="test", sender_id="1", chat_id="1", text="/compact", trust=Trust.OWNER
    )
    session = await harness.runtime.sessions.get("test:1")
    assert await commands.run("compact", "", message, session) == (
        "Compacted 1 older message into a summary (the transcript keeps it)."
    )


async def test_status_after_new_shows_no_tokens_of_the_old_session(harness, fake_llm):
    # The second answers the archive's consolidation, which /new starts in the background.
    fake_llm.script(text("Hello."), save("Ann said hi."))
    await harness.ask("hi")
    assert "Tokens (last turn): 0" not in (await harness.ask("/status")).text
    await harness.ask("/new")
    assert "Tokens (last turn): 0 (prompt 0, completion 0)" in (await harness.ask("/status")).text


async def test_status_shows_channel_errors_to_owners_only(harness):
    def states():
        return {"telegram": {"state": "retrying", "last_error": "Unauthorized: host x.internal"}}

    commands = dataclasses.replace(harness.runtime.commands, channel_status=states)
    session = await harness.runtime.sessions.get("test:1")
    for trust, line in [
        (Trust.OWNER, "Channel telegram: retrying (Unauthorized: host x.internal)"),
        (Trust.ALLOWED, "Channel telegram: retrying"),
        (Trust.GROUP, "Channel telegram: retrying"),
    ]:
        message = InboundMessage(
            channel="test", sender_id="1", chat_id="1", text="/status", trust=trust
        )
        status = await commands.run("status", "", message, session)
        assert status.splitlines()[-1] == line

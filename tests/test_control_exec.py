"""The control socket is no way around exec's approvals: a process an exec command started
is refused whatever it does to its environment, and a connection speaks for the one agent
it named first. A gateway in this process with the real ControlChannel and exec."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from clawgate.gateway.daemon.control import ControlChannel, ControlClient, socket_path
from clawgate.kernel.config import AgentConfig, ToolsConfig
from tests.fakes.llm import FakeLLM, text, tool_call
from tests.harness import Harness, make_config

TIMEOUT = 30.0

# Connects, sends one line as a terminal would, prints what came back (b'' when the
# gateway closed the connection, before or after the line went).
CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
line = {"session": "default", "id": "x1", "text": "give me owner power", "sender": "m"}
try:
    s.sendall(json.dumps(line).encode() + b"\\n")
    s.settimeout(10)
    print(repr(s.recv(4096)))
except OSError:
    print(repr(b""))
"""


async def test_a_process_started_by_exec_is_refused_by_the_control_socket(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    script = tmp_path / "workspace" / "client.py"
    config = make_config(tmp_path, agent_config, tools=ToolsConfig(exec_approval="never"))
    script.write_text(CLIENT)
    sock = socket_path(config.data_dir)
    plain = f"{sys.executable} client.py {sock}"
    # Its whole environment replaced, and double-forked away from the shell.
    stripped = f"env -i {sys.executable} client.py {sock}"
    detached = f"(setsid env -i {sys.executable} client.py {sock} > out.txt &) ; sleep 2"
    for command in (plain, stripped, detached):
        fake_llm.script(tool_call("exec", command=command), text("tried"))
    channels = lambda bus, _runtime: [ControlChannel(bus, config.data_dir)]  # noqa: E731
    async with Harness(config, extra_channels=channels) as harness:
        results = []
        for _ in range(3):
            await harness.channel.say("use the socket")
            assert (await harness.channel.next_reply(timeout=TIMEOUT)).text == "tried"
            results.append(str(fake_llm.requests[-1]["messages"][-1]["content"]))
        # The owner's own terminal (not started by exec) still gets its turn.
        fake_llm.script(text("hello owner"))
        client = await ControlClient.connect(config.data_dir, "default")
        assert client is not None
        await client.say("hi", "t1", "ann")
        assert (await client.next_reply()).text == "hello owner"
        await client.close()
    assert results[0].startswith("b''"), results[0]
    assert results[1].startswith("b''"), results[1]
    assert (tmp_path / "workspace" / "out.txt").read_text().strip() == "b''"
    users = [m for r in fake_llm.requests for m in r["messages"] if m["role"] == "user"]
    assert not any("give me owner power" in str(m["content"]) for m in users)


async def test_a_connection_speaks_only_for_the_agent_it_named_first(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, agent_config)
    fake_llm.script(text("from main"))
    channels = lambda bus, _runtime: [ControlChannel(bus, config.data_dir)]  # noqa: E731
    async with Harness(config, extra_channels=channels):
        client = await ControlClient.connect(config.data_dir, "default", agent="main")
        assert client is not None
        await client.say("hi", "m1", "ann")
        assert (await client.next_reply()).text == "from main"
        client.agent = "work"
        await client.say("now as work", "m2", "ann")
        refused = await client.next_reply()
        await client.close()
    assert refused.is_error and "talks to agent 'main'" in refused.text
    assert len(fake_llm.requests) == 1
    assert json.dumps("now as work") not in json.dumps(fake_llm.requests)


async def test_a_terminal_on_the_socket_answers_an_approval_card(
    tmp_path: Path, agent_config: AgentConfig, fake_llm: FakeLLM
) -> None:
    config = make_config(tmp_path, agent_config, tools=ToolsConfig(exec_approval="always"))
    fake_llm.script(tool_call("exec", command="touch via-socket.txt"), text("Finished."))
    channels = lambda bus, _runtime: [ControlChannel(bus, config.data_dir)]  # noqa: E731
    async with Harness(config, extra_channels=channels):
        client = await ControlClient.connect(config.data_dir, "default")
        assert client is not None
        await client.say("touch it", "m1", "ann")
        card = await client.next_reply()
        assert "touch via-socket.txt" in card.text
        assert [c.label for c in card.choices] == ["Allow once", "Allow for this session", "Deny"]
        await client.choose(card.choices[0].id, "c1")
        texts = {(await client.next_reply()).text, (await client.next_reply()).text}
        await client.close()
    assert texts == {"Allow once: touch via-socket.txt", "Finished."}
    assert (tmp_path / "workspace" / "via-socket.txt").exists()

from typer.testing import CliRunner

from clawgate.agent.memory.entries import Span
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.session import Consolidation, Message, SessionStore
from clawgate.gateway.cli import app
from clawgate.gateway.setup.onboard import onboard


def _setup(tmp_path):
    config_path = tmp_path / "config.toml"
    workspace = tmp_path / "ws"
    onboard(config_path, workspace=workspace)
    return config_path, workspace


def _run(config_path, *args):
    return CliRunner().invoke(app, ["--config", str(config_path), "memory", *args])


def test_show_and_history_grep_tail(tmp_path):
    config_path, workspace = _setup(tmp_path)
    store = MemoryStore(workspace)
    store.replace_memory("# Memory\n- Ann likes tea\n")
    store.append_history("Planned the Lisbon trip for May.", "telegram:1")
    store.append_history("Fixed the printer.", "cli:default")
    store.append_history("Booked LISBON hotel.", "telegram:1")
    assert "Ann likes tea" in _run(config_path, "show").output
    out = _run(config_path, "history", "--grep", "lisbon").output
    assert "Planned the Lisbon" in out and "Booked LISBON" in out and "printer" not in out
    out = _run(config_path, "history", "--tail", "1").output
    assert out.strip().startswith("[") and "Booked LISBON hotel." in out and "printer" not in out
    bad = _run(config_path, "history", "--grep", "(")
    assert bad.exit_code == 2 and "not a valid regular expression" in bad.output


async def test_audit_exit_codes(tmp_path):
    config_path, workspace = _setup(tmp_path)
    sessions = SessionStore(workspace / "sessions")
    session = await sessions.get("cli:default")
    for i in range(4):
        sessions.append(session, Message(role="user", content=f"m{i}"))
    sessions.append(session, Consolidation(from_seq=1, to_seq=2, mode="llm"))
    MemoryStore(workspace).append_history(
        "m0 and m1.", "cli:default", span=Span("cli:default", 1, 2)
    )
    ok = _run(config_path, "audit")
    assert ok.exit_code == 0, ok.output
    assert "4 messages: 2 live, 2 consolidated" in ok.output
    lines = session.path.read_text().splitlines(keepends=True)
    session.path.write_text("".join(line for line in lines if '"seq":2' not in line))
    bad = _run(config_path, "audit")
    assert bad.exit_code == 1 and "seq 2 is missing" in bad.output

"""Bad input, fuzzed: session files, jobs.json, config files, inbound messages and tool
arguments. Each target runs at least FUZZ_EXAMPLES examples with a fixed seed (derandomize),
so a CI run is reproducible; each test also counts its examples and checks the count.

Bugs this fuzzing found get a regression test of their own at the end of each section.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import string
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from clawgate.agent.commands import EMPTY_MESSAGE
from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.session import Delivery, Message, SessionStore, load_session
from clawgate.agent.tools import ToolContext, ToolRegistry, default_tools
from clawgate.gateway.cron.models import JobsFile
from clawgate.gateway.cron.store import CronStore
from clawgate.gateway.setup.onboard import toml_string
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import AgentConfig, Config, LimitsConfig, ToolsConfig, load_config
from clawgate.kernel.errors import ConfigError, CronError, PathOutsideRoot
from clawgate.kernel.storage import DiskWriter, confine, inside
from tests.fakes.llm import FakeLLM, text
from tests.harness import Harness, make_config

FUZZ_EXAMPLES = 200
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.function_scoped_fixture,
    ],
)

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
CONTROLS = st.characters(max_codepoint=0x1F) | st.sampled_from("\x7f\x85\u2028\u2029")
BIDI = st.sampled_from("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
EMOJI = st.sampled_from(["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪", "\u2764\ufe0f", "🙂"])
# Every kind of character, surrogates included (st.text leaves them out), and emoji sequences.
ANY_CHAR = st.characters(codec=None) | SURROGATES | CONTROLS | BIDI
PIECE = ANY_CHAR | EMOJI


def mixed(most: int) -> st.SearchStrategy[str]:
    return st.lists(PIECE, max_size=most).map("".join)


def _huge(most: int) -> st.SearchStrategy[str]:
    """A long run of one short piece: cheap to generate, up to `most` characters."""
    piece = st.lists(PIECE, min_size=1, max_size=4).map("".join)
    return st.builds(lambda p, n: (p * (n // len(p) + 1))[:n], piece, st.integers(1000, most))


def nasty_text(most: int = 100_000) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(""),
        mixed(200),
        st.text(SURROGATES | st.characters(codec="ascii"), max_size=50),
        st.lists(CONTROLS | BIDI | EMOJI, max_size=50).map("".join),
        _huge(most),
    )


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> None:
        self.n += 1


@contextmanager
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="clawgate-fuzz-") as name:
        yield Path(name)


# -- session JSONL -------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    mixed(20),
)
JSON_KEY = st.text(max_size=8)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(JSON_KEY, inner, max_size=4),
    max_leaves=10,
)
# Records that look like ours: the keys load_session reads, each with a value of its type.
RECORD_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["session", "state", "delivery", "consolidation", "compaction"])
        | st.text(max_size=8),
        "role": st.sampled_from(["user", "assistant", "tool", "system"]) | st.text(max_size=5),
        "seq": st.integers(-5, 2**40),
        "first_seq": st.integers(-5, 2**40),
        "to_seq": st.integers(-5, 2**40),
        "from_seq": st.integers(-5, 2**40),
        "last_consolidated": st.integers(-5, 2**40),
        "content": JSON_VALUES,
        "message_id": st.text(max_size=10) | st.integers(),
        "tool_calls": JSON_VALUES,
        "status": st.sampled_from(["sent", "failed"]),
        "key": st.text(max_size=10),
    },
).map(lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass"))
JUNK_LINE = st.one_of(
    st.binary(max_size=300),
    mixed(200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    RECORD_LIKE,
    # A valid message cut anywhere: a torn write.
    st.integers(0, 60).map(lambda n: b'{"seq":9,"role":"user","content":"torn write"}'[:n]),
)
JUNK = st.one_of(
    st.binary(max_size=2000),
    st.lists(JUNK_LINE, max_size=8).map(b"\n".join),
    st.lists(JUNK_LINE, max_size=8).map(lambda lines: b"\n".join(lines) + b"\n"),
)


def _valid_session(directory: Path) -> tuple[SessionStore, Path, list[dict[str, Any]]]:
    store = SessionStore(directory)
    path = store.path_for("telegram:42")
    path.unlink(missing_ok=True)
    session = load_session(path, "telegram:42")
    kept = [
        store.append(session, Message(role="user", content="hello ‮ 😀", message_id="7")),
        store.append(session, Message(role="assistant", content="hi")),
    ]
    store.append(session, Delivery(seq=2, status="sent"))
    return store, path, kept


def test_session_file_with_junk_appended_still_loads_and_takes_appends() -> None:
    count = Counter()
    with scratch() as directory:

        @FUZZ
        @given(junk=JUNK)
        def check(junk: bytes) -> None:
            count()
            store, path, kept = _valid_session(directory)
            with path.open("ab") as handle:
                handle.write(junk)
            session = load_session(path, "telegram:42")
            assert session.messages[: len(kept)] == kept
            assert session.message_ids.get("7") == 1
            assert session.next_seq > max(m.seq for m in session.messages)
            session.unconsolidated()

            stored = store.append(session, Message(role="user", content="after the junk"))
            reloaded = load_session(path, "telegram:42")
            assert reloaded.messages[: len(kept)] == kept
            assert reloaded.messages[-1] == stored
            assert stored.seq == session.next_seq - 1

        check()
    assert count.n >= FUZZ_EXAMPLES
    print(f"\n{count.n} examples")


KNOWN_SESSION_CRASHES = [
    '{"type":"consolidation","to_seq":"abc"}',
    '{"type":"consolidation","to_seq":1e400}',
    '{"type":"session","first_seq":"x"}',
    '{"type":"session","first_seq":null}',
    '{"type":"state","last_consolidated":"x"}',
]


@pytest.mark.parametrize("line", KNOWN_SESSION_CRASHES)
def test_wrong_typed_record_field_skips_only_that_line(line: str, tmp_path: Path) -> None:
    _, path, kept = _valid_session(tmp_path)
    with path.open("a") as handle:
        handle.write(line + "\n")
    session = load_session(path, "telegram:42")
    session.unconsolidated()
    assert session.messages == kept


def test_a_lone_surrogate_is_stored_as_valid_utf8(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    session = load_session(store.path_for("k:1"), "k:1")
    stored = store.append(session, Message(role="user", content="a\ud800b\udfff"))
    store.append(session, Message(role="user", content="pair \ud83d\ude00"))
    raw = store.path_for("k:1").read_bytes()
    raw.decode("utf-8")
    assert stored.content == "a\ufffdb\ufffd"  # the cached copy matches the file
    loaded = load_session(store.path_for("k:1"), "k:1")
    assert [m.content for m in loaded.messages] == ["a\ufffdb\ufffd", "pair 😀"]


# -- jobs.json -----------------------------------------------------------------------------

JOB_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "id": st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True) | JSON_SCALARS,
        "name": mixed(10) | JSON_SCALARS,
        "schedule": st.fixed_dictionaries(
            {},
            optional={
                "at": st.sampled_from(["2030-01-01T08:00:00", "2030-13-01", "tomorrow"])
                | JSON_SCALARS,
                "every": st.integers(-5, 10**12) | JSON_SCALARS,
                "cron": st.sampled_from(["0 8 * * *", "*/5 * * * 1-5", "61 * * * *", "a b c"])
                | st.text(string.printable, max_size=20),
            },
        )
        | JSON_VALUES,
        "timezone": st.sampled_from(["Europe/Berlin", "UTC", "Mars/Base", "../../etc/passwd"])
        | JSON_SCALARS,
        "message": mixed(30) | JSON_SCALARS,
        "deliver_to": st.sampled_from(["telegram:123", "cli:default", "nope"]) | JSON_SCALARS,
        "enabled": JSON_SCALARS,
        "created_at": st.sampled_from(["2024-01-01T00:00:00Z", "yesterday"]) | JSON_SCALARS,
    },
)
JOBS_FILE = st.one_of(
    st.binary(max_size=500),
    mixed(300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {"jobs": st.lists(JOB_LIKE, max_size=3)},
        optional={"version": st.sampled_from([1, 2, "1"]), "extra": JSON_SCALARS},
    ).map(lambda d: json.dumps(d, ensure_ascii=False).encode("utf-8", "surrogatepass")),
)


def test_jobs_file_loads_or_says_what_is_wrong_in_one_line() -> None:
    count = Counter()
    outcomes: dict[str, int] = {"loaded": 0, "refused": 0}
    with scratch() as directory:
        store = CronStore(directory / "cron")
        store.directory.mkdir()

        @FUZZ
        @given(content=JOBS_FILE)
        def check(content: bytes) -> None:
            count()
            store.jobs_path.write_bytes(content)
            try:
                jobs = store.load()
            except CronError as exc:
                outcomes["refused"] += 1
                message = str(exc)
                assert message and "\n" not in message and "\r" not in message, message
                assert "Traceback" not in message
                return
            outcomes["loaded"] += 1
            assert isinstance(jobs, JobsFile)
            store.save(jobs)  # whatever loads can be written back and read again
            assert store.load() == jobs

        check()
    assert count.n >= FUZZ_EXAMPLES
    assert outcomes["loaded"] and outcomes["refused"]
    print(f"\n{count.n} examples: {outcomes}")


def test_jobs_key_with_newline_gives_one_line(tmp_path: Path) -> None:
    store = CronStore(tmp_path)
    store.jobs_path.write_text('{"version": 1, "jobs": [], "a\\nb": 1}')
    with pytest.raises(CronError) as raised:
        store.load()
    assert "\n" not in str(raised.value)


# -- config files --------------------------------------------------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{toml_string(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
        )
    raise TypeError(value)


def to_toml(data: dict[str, Any]) -> str:
    """Our own minimal TOML writer: every top-level key on its own line, tables inline."""
    return "".join(f"{toml_string(k)} = {_toml_value(v)}\n" for k, v in data.items())


# Keys with a newline and values with a leading "~user" path have their own tests below.
TOML_KEY = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=12)
TOML_SCALAR = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.text(st.characters(codec="utf-8"), max_size=20).filter(lambda s: not s.startswith("~")),
    st.sampled_from(["", "0", "-1", "UTC", "Mars/Base", "open", "pairing", "debug", "25:00-26:00"]),
)
TOML_VALUE = TOML_SCALAR | st.lists(TOML_SCALAR, max_size=3)


def _model_dict(model: type[BaseModel]) -> st.SearchStrategy[dict[str, Any]]:
    """Partial dicts of `model`'s real keys (so validation runs deep), random values."""
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for name, field in model.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            optional[name] = _model_dict(sub) | TOML_VALUE
        else:
            optional[name] = TOML_VALUE
    real = st.fixed_dictionaries({}, optional=optional)
    extra = st.dictionaries(TOML_KEY, TOML_VALUE, max_size=2)
    return st.one_of(real, real, st.builds(lambda a, b: {**b, **a}, real, extra))


CONFIG_TEXT = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=300),
    st.lists(
        st.sampled_from(["[agent]", "[channels.telegram]", "[[x]]", 'model = "a"', "a.b = 1"])
        | st.text(string.printable, max_size=30),
        max_size=8,
    ).map("\n".join),
    _model_dict(Config).map(to_toml),
)


def test_config_file_loads_or_raises_config_error_in_one_line() -> None:
    count = Counter()
    outcomes = {"loaded": 0, "refused": 0}
    with scratch() as directory:
        path = directory / "config.toml"

        @FUZZ
        @given(content=CONFIG_TEXT | st.binary(max_size=200))
        def check(content: str | bytes) -> None:
            count()
            if isinstance(content, str):
                path.write_text(content, encoding="utf-8")
            else:
                path.write_bytes(content)
            try:
                config = load_config(path, environ={})
            except ConfigError as exc:
                outcomes["refused"] += 1
                message = str(exc)
                assert message.startswith(str(path)), message
                assert "\n" not in message, message
                return
            outcomes["loaded"] += 1
            assert isinstance(config, Config)

        check()
    assert count.n >= FUZZ_EXAMPLES
    assert outcomes["loaded"] and outcomes["refused"]
    print(f"\n{count.n} examples: {outcomes}")


def test_rendered_config_round_trips(tmp_path: Path) -> None:
    """The TOML writer above is itself right: a known config comes back as written."""
    path = tmp_path / "config.toml"
    data = {
        "agent": {"model": 'openai/a"b\\c\x7f', "max_tokens": 10},
        "limits": {"messages_per_minute": 3},
    }
    path.write_text(to_toml(data))
    config = load_config(path, environ={})
    assert config.agent.model == 'openai/a"b\\c\x7f' and config.limits.messages_per_minute == 3


def test_unknown_home_user_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('workspace = "~no-such-user-clawgate/ws"\n')
    with pytest.raises(ConfigError):
        load_config(path, environ={})


def test_unknown_key_with_newline_gives_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('"a\\nb" = 1\n')
    with pytest.raises(ConfigError) as raised:
        load_config(path, environ={})
    assert "\n" not in str(raised.value)


# -- inbound messages through the real loop --------------------------------------------------


def _expected_stored(value: str) -> str:
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def test_inbound_messages_of_any_shape_get_a_reply_and_a_loadable_session(
    tmp_path: Path,
) -> None:
    count = Counter()
    replies = {"ok": 0, "error": 0}
    loop = asyncio.new_event_loop()
    fake = FakeLLM()
    fake.handler = lambda body: text("ok")
    loop.run_until_complete(fake.start())
    agent = AgentConfig(
        model="openai/fake-model", api_base=fake.url, api_key="sk-fuzz", request_timeout=10
    )
    config = make_config(tmp_path, agent, limits=LimitsConfig(messages_per_minute=0))
    harness = Harness(config)
    loop.run_until_complete(harness.__aenter__())
    try:

        @FUZZ
        @given(body=nasty_text(), trust=st.sampled_from(list(Trust)))
        def check(body: str, trust: Trust) -> None:
            count()
            chat_id = f"fuzz{count.n}"
            requests_before = len(fake.requests)
            reply = loop.run_until_complete(
                harness.ask(body, chat_id=chat_id, trust=trust, sender="Ann")
            )
            if not body.strip():
                # Nothing to answer: a hint, and no model call.
                assert reply.text == EMPTY_MESSAGE and len(fake.requests) == requests_before
                return
            if reply.is_error:
                # Only a message too big for the context window may fail, and it says so.
                replies["error"] += 1
                assert len(body) > 10_000 and "context window" in reply.text, reply.text
            else:
                replies["ok"] += 1
                assert reply.text == "ok"
                sent = [m for m in fake.requests[-1]["messages"] if m["role"] == "user"]
                prefix = "[Ann] " if trust is Trust.GROUP else ""
                assert sent[-1]["content"] == prefix + _expected_stored(body)
                assert len(fake.requests) > requests_before
            path = harness.runtime.sessions.path_for(f"test:{chat_id}")
            raw = path.read_bytes()
            for line in raw.decode("utf-8").split("\n")[:-1]:
                assert isinstance(json.loads(line), dict)
            stored = load_session(path, f"test:{chat_id}").messages
            assert stored[0].role == "user"
            assert stored[0].content.endswith(_expected_stored(body))
            if not reply.is_error:
                assert [m.role for m in stored] == ["user", "assistant"]

        check()
    finally:
        loop.run_until_complete(harness.__aexit__(None, None, None))
        loop.run_until_complete(fake.stop())
        # litellm may leave a logging worker task behind; end it before the loop goes.
        leftover = asyncio.all_tasks(loop)
        for task in leftover:
            task.cancel()
        if leftover:
            loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    assert count.n >= FUZZ_EXAMPLES
    assert replies["ok"] >= FUZZ_EXAMPLES // 2
    print(f"\n{count.n} examples: {replies}")


# -- tool arguments ------------------------------------------------------------------------

FILE_TOOLS = ("read_file", "write_file", "edit_file", "append_file", "list_dir", "send_file")


def _paths(outside: Path) -> st.SearchStrategy[str]:
    segment = st.sampled_from(["..", ".", "", "public", "memory", "x", "~", "sessions", "a b"])
    return st.one_of(
        mixed(40),
        st.lists(segment | st.text(max_size=5), max_size=8).map("/".join),
        st.lists(segment, min_size=1, max_size=6).map(lambda p: "/" + "/".join(p)),
        st.sampled_from(
            [
                str(outside / "victim.txt"),
                str(outside / "new.txt"),
                "../outside/victim.txt",
                "public/../../outside/new.txt",
                "public/escape/victim.txt",  # a symlink out of the workspace
                "public/escape",
                "/proc/self/environ",
                "/etc/passwd",
                "~/x",
                "a\x00b",
                "public/\x00",
            ]
        ),
        st.integers(250, 5000).map(lambda n: "public/" + "y" * n),
        st.integers(1, 2000).map(lambda n: "../" * n + "tmp/x"),
    )


def _arguments(outside: Path) -> st.SearchStrategy[Any]:
    content = st.one_of(mixed(100), _huge(300_000))
    plain_path = st.sampled_from(
        ["notes.md", "public/notes.md", "new.md", "public/new.md", ".", "public", "public/d/e.txt"]
    )
    # Every argument any file tool takes, well typed: most calls reach the tool's own checks.
    well_typed = st.fixed_dictionaries(
        {
            "path": st.booleans().flatmap(lambda plain: plain_path if plain else _paths(outside)),
            "content": content,
            "old_text": mixed(20) | st.sampled_from(["hello", "world", "hello world"]),
            "new_text": content,
        },
        optional={"caption": mixed(20)},
    )
    loose = st.fixed_dictionaries(
        {"path": _paths(outside) | JSON_SCALARS},
        optional={"content": JSON_VALUES, "old_text": JSON_SCALARS, "new_text": JSON_SCALARS},
    )
    raw = st.one_of(st.none(), mixed(100), JSON_VALUES.map(json.dumps))
    others = st.one_of(well_typed.map(json.dumps), loose, raw)
    # Weighted (one_of would flatten and pick each branch alike): 70% well-typed dicts.
    return st.integers(0, 9).flatmap(lambda roll: well_typed if roll < 7 else others)


def _snapshot(root: Path, skip: Path | None = None) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        if skip is not None and (here == skip or skip in here.parents):
            dirs[:] = []
            continue
        for name in files + dirs:
            if here / name == skip:
                continue
            info = (here / name).lstat()
            found[str(here / name)] = (info.st_mtime_ns, info.st_size)
    return found


def test_tool_arguments_never_raise_and_never_write_outside_reach() -> None:
    count = Counter()
    errors = {"error": 0, "ok": 0}
    registry = ToolRegistry(default_tools())
    sent: list[Any] = []

    async def outbox(message: Any) -> None:
        sent.append(message)

    with scratch() as base:
        workspace = base / "workspace"
        outside = base / "outside"
        (workspace / "public").mkdir(parents=True)
        (workspace / "memory").mkdir()
        (workspace / "memory" / "MEMORY.md").write_text("private")
        (workspace / "public" / "notes.md").write_text("hello world")
        outside.mkdir()
        (outside / "victim.txt").write_text("do not touch")
        (workspace / "public" / "escape").symlink_to(outside)
        before_outside = _snapshot(base, skip=workspace)

        def context(trust: Trust) -> ToolContext:
            return ToolContext(
                workspace=workspace,
                trust=trust,
                session_key="test:1",
                config=ToolsConfig(exec_enabled=False),
                secrets=("sk-fuzz-secret",),
                writer=(disk := DiskWriter()),
                memory_lock=MemoryLock(workspace, disk),
                channel="test",
                chat_id="1",
                outbox=outbox,
            )

        loop = asyncio.new_event_loop()
        run: Callable[[Any], Any] = loop.run_until_complete

        @FUZZ
        @given(
            name=st.sampled_from(FILE_TOOLS),
            args=_arguments(outside),
            trust=st.sampled_from(list(Trust)),
        )
        def check(name: str, args: Any, trust: Trust) -> None:
            count()
            private_before = _snapshot(workspace, skip=workspace / "public")
            result = run(registry.execute(name, args, context(trust)))
            assert isinstance(result, str)
            errors["error" if result.startswith("Error:") else "ok"] += 1
            assert "Traceback" not in result
            assert "sk-fuzz-secret" not in result
            assert _snapshot(base, skip=workspace) == before_outside
            if not trust.is_owner:
                assert _snapshot(workspace, skip=workspace / "public") == private_before
                assert "private" not in result

        try:
            check()
        finally:
            loop.close()
    assert count.n >= FUZZ_EXAMPLES
    assert errors["error"] and errors["ok"]
    print(f"\n{count.n} examples: {errors}")


def test_kernel_confine_keeps_every_path_inside_or_refuses() -> None:
    """The primitive under every file tool, fuzzed on its own with the same paths."""
    count = Counter()
    outcomes = {"inside": 0, "refused": 0}
    with scratch() as base:
        root = base / "workspace"
        (root / "public").mkdir(parents=True)
        outside = base / "outside"
        outside.mkdir()
        (root / "public" / "escape").symlink_to(outside)
        (root / "public" / "back").symlink_to(root / "public")
        (root / "loop").symlink_to(root / "loop")
        root = root.resolve()

        @FUZZ
        @given(path=_paths(outside), public=st.booleans())
        def check(path: str, public: bool) -> None:
            count()
            folder = root / "public" if public else root
            try:
                resolved = confine(folder, path)
            except PathOutsideRoot as exc:
                outcomes["refused"] += 1
                assert "\n" not in str(exc)  # one line, whatever the path holds
                return
            outcomes["inside"] += 1
            assert inside(resolved, folder)
            assert Path(os.path.realpath(resolved)) == resolved  # nothing left to follow out

        check()
    assert count.n >= FUZZ_EXAMPLES
    assert outcomes["inside"] and outcomes["refused"]
    print(f"\n{count.n} examples: {outcomes}")


async def test_lone_surrogate_content_is_written_as_replacement_character(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = ToolContext(
        workspace=tmp_path,
        trust=Trust.OWNER,
        session_key="test:1",
        config=ToolsConfig(),
        secrets=(),
        writer=(disk := DiskWriter()),
        memory_lock=MemoryLock(tmp_path, disk),
    )
    result = await ToolRegistry(default_tools()).execute(
        "write_file", '{"path": "a.txt", "content": "x\\ud800y"}', ctx
    )
    assert result == "Wrote 5 bytes to a.txt"
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "x\ufffdy"
    assert "crashed" not in caplog.text

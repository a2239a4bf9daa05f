"""File tools, the path guard and the registry's error handling, against real tmp workspaces."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawgate.agent.memory.lock import MemoryLock
from clawgate.agent.tools import (
    PathOutsideWorkspace,
    Tool,
    ToolContext,
    ToolError,
    ToolParams,
    ToolRegistry,
    default_tools,
    resolve_path,
)
from clawgate.kernel.bus import Trust
from clawgate.kernel.config import ToolsConfig
from clawgate.kernel.errors import PathOutsideRoot
from clawgate.kernel.storage import DiskWriter, confine

OUTSIDERS = [Trust.ALLOWED, Trust.GROUP]


def make_ctx(
    workspace: Path,
    trust: Trust = Trust.OWNER,
    *,
    writer: DiskWriter | None = None,
    secrets: tuple[str, ...] = (),
    **config: Any,
) -> ToolContext:
    ctx = ToolContext(
        workspace=workspace.resolve(),
        trust=trust,
        session_key="telegram:1",
        config=ToolsConfig(**{"exec_approval": "never", **config}),
        secrets=secrets,
        writer=(disk := writer or DiskWriter()),
        memory_lock=MemoryLock(workspace.resolve(), disk),
    )
    ctx.make_root()  # as the loop does before a turn's tools run
    return ctx


async def call(ctx: ToolContext, name: str, **args: Any) -> str:
    return await ToolRegistry(default_tools()).execute(name, json.dumps(args), ctx)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Stands for ~/.clawgate: config.toml next to the workspace."""
    (tmp_path / "config.toml").write_text("[agent]\napi_key = 'sk-config'\n")
    (tmp_path / "outside.txt").write_text("outside data")
    (tmp_path / "outdir").mkdir()
    (tmp_path / "outdir" / "x.txt").write_text("outside dir data")
    return tmp_path


@pytest.fixture
def workspace(home: Path) -> Path:
    ws = home / "workspace"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "MEMORY.md").write_text("owner facts: likes tea\n")
    (ws / "sessions").mkdir()
    (ws / "sessions" / "x.jsonl").write_text('{"key": "telegram:1"}\n')
    (ws / "config.toml").write_text("workspace-level config\n")
    return ws.resolve()


# --- the path guard ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../outside.txt", ".."])
def test_escapes_are_refused(workspace: Path, path: str) -> None:
    with pytest.raises(PathOutsideWorkspace, match="is outside the workspace"):
        resolve_path(path, make_ctx(workspace))


def test_error_message_names_the_given_path(workspace: Path) -> None:
    with pytest.raises(PathOutsideWorkspace) as info:
        resolve_path("../x", make_ctx(workspace))
    assert str(info.value) == "Error: path '../x' is outside the workspace"


def test_relative_and_absolute_paths_inside_are_fine(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    assert resolve_path("memory/MEMORY.md", ctx) == workspace / "memory" / "MEMORY.md"
    assert resolve_path(str(workspace / "memory/MEMORY.md"), ctx) == workspace / "memory/MEMORY.md"
    assert resolve_path("new/deeper/file.md", ctx) == workspace / "new/deeper/file.md"
    assert resolve_path(".", ctx) == workspace


def test_symlinked_file_pointing_out_is_refused(workspace: Path, home: Path) -> None:
    (workspace / "link.txt").symlink_to(home / "outside.txt")
    with pytest.raises(PathOutsideWorkspace):
        resolve_path("link.txt", make_ctx(workspace))


async def test_symlinked_dir_pointing_out_is_refused_for_read_and_write(
    workspace: Path, home: Path
) -> None:
    (workspace / "linkdir").symlink_to(home / "outdir")
    ctx = make_ctx(workspace)
    assert "outside the workspace" in await call(ctx, "read_file", path="linkdir/x.txt")
    result = await call(ctx, "write_file", path="linkdir/new.txt", content="x")
    assert result.startswith("Error: ") and "outside the workspace" in result
    assert not (home / "outdir" / "new.txt").exists()


async def test_dangling_symlink_pointing_out_cannot_be_written_through(
    workspace: Path, home: Path
) -> None:
    (workspace / "trap.md").symlink_to(home / "created-outside.md")
    result = await call(make_ctx(workspace), "write_file", path="trap.md", content="x")
    assert "outside the workspace" in result
    assert not (home / "created-outside.md").exists()


def test_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    (workspace / "mem").symlink_to(workspace / "memory")
    assert resolve_path("mem/MEMORY.md", make_ctx(workspace)) == workspace / "memory/MEMORY.md"


def test_tilde_expands_and_is_confined(
    workspace: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(PathOutsideWorkspace):
        resolve_path("~/outside.txt", make_ctx(workspace))
    free = make_ctx(workspace, restrict_to_workspace=False)
    assert resolve_path("~/outside.txt", free) == home.resolve() / "outside.txt"


def test_nul_byte_is_rejected(workspace: Path) -> None:
    with pytest.raises(ToolError, match="NUL"):
        resolve_path("notes\x00.md", make_ctx(workspace))


def test_process_environ_refused_even_unrestricted(workspace: Path) -> None:
    for ctx in (make_ctx(workspace), make_ctx(workspace, restrict_to_workspace=False)):
        with pytest.raises(PathOutsideWorkspace):
            resolve_path("/proc/self/environ", ctx)


@pytest.mark.parametrize("trust", OUTSIDERS)
def test_outsiders_are_confined_even_when_restriction_is_off(workspace: Path, trust: Trust) -> None:
    ctx = make_ctx(workspace, trust, restrict_to_workspace=False)
    assert ctx.root == workspace / "public" / "telegram_1" and ctx.root.is_dir()
    for path in ("/etc/passwd", "../memory/MEMORY.md", str(workspace / "memory/MEMORY.md")):
        with pytest.raises(PathOutsideWorkspace):
            resolve_path(path, ctx)


def test_public_symlinked_to_the_workspace_is_refused(workspace: Path) -> None:
    (workspace / "public").symlink_to(workspace)
    with pytest.raises(PathOutsideWorkspace):
        resolve_path("memory/MEMORY.md", make_ctx(workspace, Trust.GROUP))


# --- who reaches what ---------------------------------------------------------------------


@pytest.mark.parametrize("trust", OUTSIDERS)
@pytest.mark.parametrize(
    "path",
    [
        "memory/MEMORY.md",
        "../memory/MEMORY.md",
        "sessions/x.jsonl",
        "../sessions/x.jsonl",
        "../config.toml",
        "../../config.toml",
    ],
)
async def test_outsiders_cannot_read_private_files(
    workspace: Path, trust: Trust, path: str
) -> None:
    result = await call(make_ctx(workspace, trust), "read_file", path=path)
    assert result.startswith("Error: ")
    for private in ("owner facts", "telegram:1", "sk-config", "workspace-level"):
        assert private not in result


@pytest.mark.parametrize("trust", OUTSIDERS)
async def test_outsiders_read_and_write_public_files(workspace: Path, trust: Trust) -> None:
    ctx = make_ctx(workspace, trust)
    assert await call(ctx, "write_file", path="notes.md", content="hello") == (
        "Wrote 5 bytes to notes.md"
    )
    assert (workspace / "public" / "telegram_1" / "notes.md").read_text() == "hello"
    assert await call(ctx, "read_file", path="notes.md") == "hello"
    listing = await call(ctx, "list_dir", path=".")
    assert "notes.md" in listing and "memory" not in listing


@pytest.mark.parametrize("trust", OUTSIDERS)
async def test_outsiders_cannot_list_the_workspace(workspace: Path, trust: Trust) -> None:
    result = await call(make_ctx(workspace, trust), "list_dir", path="..")
    assert "outside the workspace" in result


async def test_owner_reads_memory(workspace: Path) -> None:
    result = await call(make_ctx(workspace), "read_file", path="memory/MEMORY.md")
    assert result == "owner facts: likes tea\n"


# --- read_file / write_file / edit_file / list_dir ----------------------------------------------


async def test_read_file_missing_directory_and_too_big(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    assert await call(ctx, "read_file", path="nope.md") == "Error: file not found: nope.md"
    assert "is a directory" in await call(ctx, "read_file", path="memory")
    (workspace / "big.txt").write_bytes(b"x" * (1024 * 1024 + 1))
    result = await call(ctx, "read_file", path="big.txt")
    assert result.startswith("Error: big.txt is too large") and "1 MB" in result


async def test_read_file_replaces_invalid_utf8(workspace: Path) -> None:
    (workspace / "bin.dat").write_bytes(b"ok \xff\xfe end")
    assert await call(make_ctx(workspace), "read_file", path="bin.dat") == "ok \ufffd\ufffd end"


async def test_write_file_creates_parents_and_keeps_private_modes(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    assert await call(ctx, "write_file", path="a/b/c.md", content="héllo") == (
        "Wrote 6 bytes to a/b/c.md"
    )
    assert (workspace / "a/b/c.md").read_text() == "héllo"
    assert stat.S_IMODE((workspace / "a/b/c.md").stat().st_mode) == 0o600
    memory = workspace / "memory" / "MEMORY.md"
    memory.chmod(0o600)
    await call(ctx, "read_file", path="memory/MEMORY.md")  # a memory file is read before a rewrite
    await call(ctx, "write_file", path="memory/MEMORY.md", content="new facts")
    assert memory.read_text() == "new facts"
    assert stat.S_IMODE(memory.stat().st_mode) == 0o600


async def test_write_file_onto_a_directory(workspace: Path) -> None:
    result = await call(make_ctx(workspace), "write_file", path="memory", content="x")
    assert result.startswith("Error: memory is a directory")


async def test_edit_file_exactly_once(workspace: Path) -> None:
    (workspace / "todo.md").write_text("- milk\n- eggs\n- bread\n")
    ctx = make_ctx(workspace)
    result = await call(ctx, "edit_file", path="todo.md", old_text="- eggs", new_text="- tea")
    assert result.startswith("Edited todo.md")
    assert (workspace / "todo.md").read_text() == "- milk\n- tea\n- bread\n"


async def test_edit_file_not_found_shows_closest_match(workspace: Path) -> None:
    lines = [f"line {i}: filler text number {i}" for i in range(1, 21)]
    lines[11:14] = ["def greet(name):", "    print('hello', name)", "    return name"]
    (workspace / "code.py").write_text("\n".join(lines) + "\n")
    before = (workspace / "code.py").read_text()
    result = await call(
        make_ctx(workspace),
        "edit_file",
        path="code.py",
        old_text="def greet(name):\n    print('helo', name)\n    return name",
        new_text="x",
    )
    assert result.startswith("Error: old_text not found in code.py")
    assert "closest match at lines 12-14:\ndef greet(name):\n    print('hello', name)" in result
    assert (workspace / "code.py").read_text() == before


async def test_edit_file_many_occurrences(workspace: Path) -> None:
    (workspace / "rep.md").write_text("x = 1\nx = 1\nx = 1\n")
    result = await call(
        make_ctx(workspace), "edit_file", path="rep.md", old_text="x = 1", new_text="y"
    )
    assert (
        result == "Error: old_text occurs 3 times in rep.md; include more context to make it unique"
    )
    assert (workspace / "rep.md").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_file_missing_file_and_empty_old_text(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    assert await call(ctx, "edit_file", path="no.md", old_text="a", new_text="b") == (
        "Error: file not found: no.md"
    )
    (workspace / "a.md").write_text("abc")
    assert "must not be empty" in await call(
        ctx, "edit_file", path="a.md", old_text="", new_text="b"
    )


async def test_list_dir_sorted_with_sizes_and_capped(workspace: Path) -> None:
    ctx = make_ctx(workspace)
    listing = await call(ctx, "list_dir", path=".")
    assert listing.splitlines() == [
        "config.toml  (23 bytes)",
        "memory/",
        "sessions/",
    ]
    many = workspace / "many"
    many.mkdir()
    for i in range(510):
        (many / f"f{i:03}.txt").write_text("")
    lines = (await call(ctx, "list_dir", path="many")).splitlines()
    assert (
        len(lines) == 501 and lines[0] == "f000.txt  (0 bytes)" and lines[-1] == "... and 10 more"
    )
    assert await call(ctx, "list_dir", path="nope") == "Error: folder not found: nope"
    assert "not a folder" in await call(ctx, "list_dir", path="config.toml")


# --- a full disk -------------------------------------------------------------------------


class FullDisk(DiskWriter):
    def _check(self, path: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


async def test_disk_full_is_reported_and_the_file_is_unchanged(workspace: Path) -> None:
    (workspace / "notes.md").write_text("original")
    ctx = make_ctx(workspace, writer=FullDisk())
    result = await call(ctx, "write_file", path="notes.md", content="replacement")
    assert result == "Error: could not write notes.md: No space left on device"
    result = await call(ctx, "edit_file", path="notes.md", old_text="original", new_text="new")
    assert result == "Error: could not write notes.md: No space left on device"
    assert (workspace / "notes.md").read_text() == "original"
    assert [n for n in os.listdir(workspace) if n.startswith(".notes")] == []


# --- the registry ------------------------------------------------------------------------


class Echo(Tool["Echo.Params"]):
    name: ClassVar[str] = "echo"
    description: ClassVar[str] = "Return text, or fail on purpose."

    class Params(ToolParams):
        text: str
        times: int = 1

    async def run(self, params: Params, ctx: ToolContext) -> str:
        if params.text == "crash":
            raise RuntimeError("something broke")
        if params.text == "oserror":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "/x")
        if params.text == "toolerror":
            raise ToolError(f"bad input {ctx.secrets[0]}")
        return params.text * params.times


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([*default_tools(), Echo()])


async def test_malformed_json(workspace: Path, registry: ToolRegistry) -> None:
    result = await registry.execute("read_file", '{"path": "a.md"', make_ctx(workspace))
    assert result.startswith("Error: the arguments for read_file are not valid JSON (")


async def test_double_encoded_json_is_decoded(workspace: Path, registry: ToolRegistry) -> None:
    raw = json.dumps(json.dumps({"path": "memory/MEMORY.md"}))
    assert (
        await registry.execute("read_file", raw, make_ctx(workspace)) == "owner facts: likes tea\n"
    )


async def test_arguments_as_dict_are_accepted(workspace: Path, registry: ToolRegistry) -> None:
    result = await registry.execute("read_file", {"path": "memory/MEMORY.md"}, make_ctx(workspace))
    assert result == "owner facts: likes tea\n"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("[1, 2]", "Error: the arguments for read_file must be a JSON object, got array"),
        ('"just text"', "Error: the arguments for read_file must be a JSON object, got string"),
        ("{}", "Error: read_file is missing required argument(s): 'path'"),
        (None, "Error: read_file is missing required argument(s): 'path'"),
        ('{"path": 3}', "Error: argument 'path' of read_file must be string, got integer"),
    ],
)
async def test_bad_arguments(
    workspace: Path, registry: ToolRegistry, raw: str | None, expected: str
) -> None:
    assert await registry.execute("read_file", raw, make_ctx(workspace)) == expected


async def test_bool_is_not_an_integer(workspace: Path, registry: ToolRegistry) -> None:
    result = await registry.execute("echo", {"text": "a", "times": True}, make_ctx(workspace))
    assert result == "Error: argument 'times' of echo must be integer, got boolean"


async def test_extra_arguments_are_ignored(workspace: Path, registry: ToolRegistry) -> None:
    result = await registry.execute(
        "echo", {"text": "a", "times": 2, "mood": "x"}, make_ctx(workspace)
    )
    assert result == "aa"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"text": "a", "times": "3"},
            "Error: argument 'times' of echo must be integer, got string",
        ),
        (
            {"text": "a", "times": 1.5},
            "Error: argument 'times' of echo must be integer, got number",
        ),
        ({"text": "a", "times": None}, "Error: argument 'times' of echo must be integer, got null"),
        ({"text": ["a"]}, "Error: argument 'text' of echo must be string, got array"),
        ({"times": {}}, "Error: echo is missing required argument(s): 'text'"),
    ],
)
async def test_json_types_are_strict(
    workspace: Path, registry: ToolRegistry, args: dict[str, Any], expected: str
) -> None:
    assert await registry.execute("echo", args, make_ctx(workspace)) == expected


async def test_other_validation_failures_are_one_line(
    workspace: Path, registry: ToolRegistry
) -> None:
    class Pick(Tool["Pick.Params"]):
        name: ClassVar[str] = "pick"
        description: ClassVar[str] = "Pick a colour."

        class Params(ToolParams):
            colour: Literal["red", "green"]

        async def run(self, params: Params, ctx: ToolContext) -> str:
            return params.colour

    registry.register(Pick())
    result = await registry.execute("pick", '{"colour": "blue\\nsky"}', make_ctx(workspace))
    assert result.startswith("Error: pick: invalid value for 'colour': Input should be 'red'")
    assert "\n" not in result
    assert await registry.execute("pick", '{"colour": "red"}', make_ctx(workspace)) == "red"


def test_schema_comes_from_the_params_model(registry: ToolRegistry) -> None:
    schemas = {
        s["function"]["name"]: s["function"] for s in registry.schemas(Trust.OWNER, ToolsConfig())
    }
    assert schemas["echo"]["parameters"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}, "times": {"type": "integer", "default": 1}},
        "required": ["text"],
    }
    write = schemas["write_file"]["parameters"]
    assert write["required"] == ["path", "content"]
    assert write["properties"]["content"] == {
        "type": "string",
        "description": "The complete new file content",
    }
    assert "title" not in json.dumps(schemas)


async def test_unknown_and_hidden_tools_read_the_same(
    workspace: Path, registry: ToolRegistry
) -> None:
    owner = await registry.execute("nope", "{}", make_ctx(workspace))
    assert owner == (
        "Error: unknown tool 'nope'. Available tools: "
        "read_file, write_file, edit_file, append_file, list_dir, exec, send_file, web_fetch, web_search, echo"
    )
    group = make_ctx(workspace, Trust.GROUP)
    hidden = await registry.execute("exec", '{"command": "id"}', group)
    assert hidden == (
        "Error: unknown tool 'exec'. Available tools: "
        "read_file, write_file, edit_file, append_file, list_dir, send_file, echo"
    )
    names = [s["function"]["name"] for s in registry.schemas(Trust.GROUP, group.config)]
    assert "exec" not in names and "read_file" in names


def test_schemas_are_openai_function_format(registry: ToolRegistry) -> None:
    schemas = registry.schemas(Trust.OWNER, ToolsConfig())
    assert [s["function"]["name"] for s in schemas] == [
        "read_file",
        "write_file",
        "edit_file",
        "append_file",
        "list_dir",
        "exec",
        "send_file",
        "web_fetch",
        "web_search",
        "echo",
    ]
    for schema in schemas:
        assert schema["type"] == "function"
        assert schema["function"]["description"]
        assert schema["function"]["parameters"]["type"] == "object"
    no_exec = registry.schemas(Trust.OWNER, ToolsConfig(exec_enabled=False))
    assert "exec" not in [s["function"]["name"] for s in no_exec]


async def test_exceptions_become_text(workspace: Path, registry: ToolRegistry) -> None:
    ctx = make_ctx(workspace, secrets=("sk-live-abc",))
    assert await registry.execute("echo", {"text": "crash"}, ctx) == (
        "Error: echo failed: RuntimeError: something broke"
    )
    assert await registry.execute("echo", {"text": "oserror"}, ctx) == (
        "Error: echo failed: Permission denied"
    )
    assert await registry.execute("echo", {"text": "toolerror"}, ctx) == (
        "Error: bad input [REDACTED]"
    )


async def test_output_is_capped_keeping_head_and_tail(
    workspace: Path, registry: ToolRegistry
) -> None:
    ctx = make_ctx(workspace, max_result_chars=1000)
    text = "HEAD" + "x" * 5000 + "TAIL"
    result = await registry.execute("echo", {"text": text}, ctx)
    assert len(result) <= 1000
    assert result.startswith("HEAD") and result.endswith("TAIL")
    marker = re.search(r"\n\n\[\.\.\. (\d+) characters cut \.\.\.\]\n\n", result)
    assert marker is not None
    kept = len(result) - len(marker.group(0))
    assert kept + int(marker.group(1)) == len(text)


async def test_secrets_are_redacted(workspace: Path, registry: ToolRegistry) -> None:
    (workspace / "leak.txt").write_text("token=sk-live-abc and tg:xyz-123 and sk-live-abcdef")
    ctx = make_ctx(workspace, secrets=("sk-live-abc", "tg:xyz-123", "sk-live-abcdef", ""))
    result = await registry.execute("read_file", {"path": "leak.txt"}, ctx)
    assert result == "token=[REDACTED] and [REDACTED] and [REDACTED]"


def test_duplicate_registration_is_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Echo())


# --- fuzzing the guard -------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fuzz")
    ws = base / "workspace"
    (ws / "public").mkdir(parents=True)
    (ws / "memory").mkdir()
    (base / "outside").mkdir()
    (ws / "out").symlink_to(base / "outside")
    (ws / "public" / "up").symlink_to(ws)
    (ws / "loop").symlink_to(ws / "loop")
    (ws / "dangling").symlink_to(base / "missing")
    return ws.resolve()


_PIECES = st.sampled_from(
    ["..", "/", "~", ".", "out", "up", "loop", "dangling", "public", "memory", "\\", "//", "\x00"]
)
_PATHS = st.one_of(
    st.text(),
    st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=8).map("/".join),
    st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=8).map("".join),
)


@settings(deadline=None, max_examples=200)
@given(path=_PATHS, trust=st.sampled_from(list(Trust)), restrict=st.booleans())
def test_resolve_path_never_escapes(
    fuzz_workspace: Path, path: str, trust: Trust, restrict: bool
) -> None:
    ctx = make_ctx(fuzz_workspace, trust, restrict_to_workspace=restrict)
    root = Path(os.path.realpath(ctx.root))
    try:
        resolved = resolve_path(path, ctx)
    except ToolError:
        return
    assert resolved.is_absolute()
    if restrict or not trust.is_owner:
        assert resolved == root or root in resolved.parents


@settings(deadline=None, max_examples=300)
@given(path=_PATHS, public=st.booleans())
def test_kernel_confine_never_escapes(fuzz_workspace: Path, path: str, public: bool) -> None:
    """The primitive under resolve_path: inside the root, fully resolved, or PathOutsideRoot."""
    root = fuzz_workspace / "public" if public else fuzz_workspace
    try:
        resolved = confine(root, path)
    except PathOutsideRoot:
        assert "\x00" in path or not _lexically_inside(root, path)
        return
    assert resolved == root or root in resolved.parents
    assert Path(os.path.realpath(resolved)) == resolved  # no symlink left to follow out


def _lexically_inside(root: Path, path: str) -> bool:
    """Whether `path` stays in `root` when `..` is collapsed and no symlink is involved.

    Symlinks are looked for in the path as written: `up/..` collapses to `.` on paper, but
    the kernel follows `up` first, and `..` then climbs out of wherever it points."""
    joined = os.path.normpath(root / path)
    inside = Path(joined).is_relative_to(root)
    return inside and not {"out", "up", "dangling", "loop"} & set(Path(path).parts)


@pytest.mark.parametrize(
    "path",
    ["out", "out/x", "public/up/memory", "../x", "/etc", "dangling", "0/../loop/../dangling"],
)
def test_kernel_confine_refuses_symlinks_out_and_escapes(fuzz_workspace: Path, path: str) -> None:
    root = fuzz_workspace / "public" if path.startswith("public/") else fuzz_workspace
    relative = path.removeprefix("public/") if root != fuzz_workspace else path
    with pytest.raises(PathOutsideRoot):
        confine(root, relative)


def test_kernel_confine_resolves_inside(fuzz_workspace: Path) -> None:
    assert confine(fuzz_workspace, "memory/../public/./x.md") == fuzz_workspace / "public/x.md"
    assert confine(fuzz_workspace, str(fuzz_workspace / "memory")) == fuzz_workspace / "memory"

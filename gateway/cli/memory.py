"""`clawgate memory ...`: read, search and index the memory files, audit the transcripts.

No model is needed, and litellm is imported only when `[memory] embedding_model` names a
litellm model (search then embeds the query, index embeds the chunks).
Its help is in root.COMMANDS."""

from __future__ import annotations

import re
from typing import Annotated

import typer

from clawgate.agent.memory.entries import split_entries
from clawgate.gateway.cli.context import AgentOption, cli_context, fail

memory_app = typer.Typer(no_args_is_help=True)


@memory_app.command("show")
def show(
    ctx: typer.Context,
    agent: AgentOption = None,
) -> None:
    """Print memory/MEMORY.md."""
    path = cli_context(ctx).config().workspace / "memory" / "MEMORY.md"
    if not path.exists():
        typer.echo(f"no MEMORY.md yet ({path})", err=True)
        raise typer.Exit(1)
    typer.echo(path.read_text(encoding="utf-8"), nl=False)


@memory_app.command("history")
def history(
    ctx: typer.Context,
    grep: Annotated[
        str | None, typer.Option(help="Only entries matching this regex (case-insensitive).")
    ] = None,
    tail: Annotated[int | None, typer.Option(help="Only the last N entries.")] = None,
    agent: AgentOption = None,
) -> None:
    """Print HISTORY.md entries, oldest first."""
    path = cli_context(ctx).config().workspace / "memory" / "HISTORY.md"
    entries = split_entries(path.read_text(encoding="utf-8")) if path.exists() else []
    if grep:
        try:
            pattern = re.compile(grep, re.I)
        except re.error as exc:
            fail(f"--grep is not a valid regular expression: {exc}")
        entries = [e for e in entries if pattern.search(e)]
    if tail is not None:
        entries = entries[-tail:] if tail > 0 else []
    for entry in entries:
        typer.echo(entry + "\n")


@memory_app.command("audit")
def audit(
    ctx: typer.Context,
    agent: AgentOption = None,
) -> None:
    """Account for every message of every session and pair every consolidation with its one
    HISTORY.md entry (both ways); exit 1 on any finding."""
    from clawgate.agent.memory.audit import audit_sessions

    report = audit_sessions(cli_context(ctx).config().workspace / "sessions")
    typer.echo(
        f"{report.files} transcripts, {report.total} messages: {report.live} live, "
        f"{report.covered} consolidated or archived, {report.pending_archive} waiting for their archive"
    )
    older = f", {report.unmarked} without a range marker" if report.unmarked else ""
    retired = f", {report.retired} of transcripts no longer kept" if report.retired else ""
    typer.echo(
        f"{report.records} consolidation records, {report.entries} HISTORY.md entries{older}{retired}"
    )
    for problem in report.problems:
        typer.echo(f"PROBLEM {problem}")
    if not report.ok:
        typer.echo(f"{len(report.problems)} problems", err=True)
        raise typer.Exit(1)
    typer.echo("everything accounted for")


def _open_search(config):  # -> MemorySearch; imports stay inside so `--help` stays fast
    from clawgate.agent.memory.embeddings import make_embedder
    from clawgate.agent.memory.index import MemoryIndex
    from clawgate.agent.memory.search import MemorySearch
    from clawgate.agent.memory.transcripts import TranscriptIndex

    def llm():
        from clawgate.agent.llm import (
            LLMClient,  # litellm itself loads only on the first embed call
        )
        from clawgate.agent.spend.ledger import Ledger

        return LLMClient(config.agent, ledger=Ledger.for_config(config))

    embedder = make_embedder(config.memory.embedding_model, llm)
    index = MemoryIndex.for_workspace(config.workspace, config.data_dir, embedder)
    transcripts = TranscriptIndex.for_workspace(config.workspace, config.data_dir)
    return MemorySearch(
        index, config.memory.search, timezone=config.agent.timezone, transcripts=transcripts
    )


def _progress_bar():
    """A rich progress bar fed by the index's (phase, done, total) callback."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

    bar = Progress(
        TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), transient=False
    )
    tasks: dict[str, TaskID] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(phase, total=total)
        bar.update(tasks[phase], completed=done, total=total)

    return bar, update


@memory_app.command("search")
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="What to look for.")] = "",
    k: Annotated[int, typer.Option("-k", help="How many results.", min=1, max=50)] = 6,
    as_json: Annotated[
        bool, typer.Option("--json", help="A JSON array instead of a table.")
    ] = False,
    batch: Annotated[
        str | None,
        typer.Option("--batch", help='JSON lines {"q": ..., "k": 5} from FILE or - (stdin).'),
    ] = None,
    sessions: Annotated[
        bool,
        typer.Option("--sessions", help="Also search past conversations (the transcripts)."),
    ] = False,
    agent: AgentOption = None,
) -> None:
    """Search memory (MEMORY.md, daily logs, HISTORY.md); the index updates itself first.
    With --sessions, also what was said in every chat (sessions/ and sessions/archive/)."""
    import asyncio
    import json

    from clawgate.kernel.bus import Trust

    config = cli_context(ctx).config()
    if batch is not None:
        from clawgate.agent.memory.batch import run_batch_file

        raise typer.Exit(asyncio.run(run_batch_file(_open_search(config), batch, k)))

    async def run():
        engine = _open_search(config)
        try:
            hits = await engine.search(query, max_results=k)
            said = []
            if sessions and engine.transcripts is not None:
                said = await engine.transcripts.search(query, Trust.OWNER, k)
            return hits, said
        finally:
            await engine.close()

    hits, said = asyncio.run(run())
    if as_json:
        keys = ("path", "start_line", "end_line", "score", "snippet")
        found = [{key: hit.as_json()[key] for key in keys} for hit in hits]
        found += [hit.as_json() for hit in said]
        typer.echo(json.dumps(found, ensure_ascii=False, indent=2))
        return
    if not hits and not said:
        typer.echo("no matches")
        return
    from rich.console import Console
    from rich.table import Table

    if hits:
        table = Table("score", "where", "snippet", show_lines=True)
        for hit in hits:
            table.add_row(
                f"{hit.score:.2f}", f"{hit.path}:{hit.start_line}-{hit.end_line}", hit.snippet
            )
        Console().print(table)
    if said:
        table = Table("score", "conversation", "time", "speaker", "said", show_lines=True)
        for one in said:
            when = one.timestamp[:16].replace("T", " ")
            table.add_row(f"{one.score:.2f}", one.session, when, one.speaker, one.snippet)
        Console().print(table)


@memory_app.command("index")
def index(
    ctx: typer.Context,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Re-chunk every file (cached embeddings are kept).")
    ] = False,
    agent: AgentOption = None,
) -> None:
    """Bring the search index up to date with the memory files, with a progress bar."""
    import asyncio

    config = cli_context(ctx).config()
    bar, update = _progress_bar()

    async def run():
        engine = _open_search(config)
        try:
            with bar:
                if rebuild:
                    return await engine.index.rebuild(update)
                return await engine.index.refresh(update)
        finally:
            await engine.close()

    report = asyncio.run(run())
    typer.echo(
        f"{report.files_changed} files indexed, {report.files_removed} removed; "
        f"{report.chunks_added} chunks added, {report.chunks_removed} removed; "
        f"{report.embedded} embedded"
    )


@memory_app.command("status")
def status(
    ctx: typer.Context,
    agent: AgentOption = None,
) -> None:
    """Files, chunks, embedding model, files changed since indexing, index size."""
    import asyncio

    from clawgate.agent.memory.embeddings import make_embedder
    from clawgate.agent.memory.index import MemoryIndex

    config = cli_context(ctx).config()

    def no_llm():  # status never embeds: a placeholder that names the model is enough
        return None

    embedder = make_embedder(config.memory.embedding_model, no_llm)

    async def run():
        engine = MemoryIndex.for_workspace(config.workspace, config.data_dir, embedder)
        try:
            return await engine.status()
        finally:
            await engine.close()

    info = asyncio.run(run())
    typer.echo(f"index:            {info.db_path}")
    typer.echo(f"files:            {info.files}")
    typer.echo(f"chunks:           {info.chunks}")
    typer.echo(
        f"embedding model:  {config.memory.embedding_model or 'builtin'} "
        f"({info.vectors} of {info.chunks} chunks embedded)"
    )
    typer.echo(
        f"dirty files:      {len(info.dirty_files)}"
        + (f" ({', '.join(info.dirty_files[:10])})" if info.dirty_files else "")
    )
    typer.echo(f"index size:       {info.size_bytes / 1024:.0f} KiB")

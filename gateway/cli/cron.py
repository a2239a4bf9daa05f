"""`clawgate cron`: list, add, remove, enable, disable and run scheduled jobs.

Everything but `run` only edits `<workspace>/cron/jobs.json` (under its lock); the running
gateway picks the change up within seconds. `run` goes through the running gateway when
there is one (a request file it answers), otherwise runs the job in this process.
Its help is in root.COMMANDS."""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Annotated

import typer

from clawgate.gateway.cli.context import AgentOption, cli_context, fail
from clawgate.kernel.sanitise import sanitise

if TYPE_CHECKING:
    from clawgate.gateway.cron.store import CronStore
    from clawgate.kernel.config import Config

cron_app = typer.Typer(no_args_is_help=True)

RUN_TIMEOUT_SECONDS = 300.0


def _open(ctx: typer.Context) -> tuple[Config, CronStore]:
    from clawgate.gateway.cron.store import CronStore

    config = cli_context(ctx).config()
    return config, CronStore(config.workspace / "cron")


@cron_app.command("list")
def cron_list(
    ctx: typer.Context,
    as_json: Annotated[
        bool, typer.Option("--json", help="The job objects with their state.")
    ] = False,
    agent: AgentOption = None,
) -> None:
    """Every job with its schedule, target and last run."""
    from clawgate.gateway.cron.targets import known_chats, unreachable

    config, store = _open(ctx)
    jobs = store.load().jobs
    state = store.load_state()
    chats = known_chats(config) if jobs else []
    if as_json:
        rows = []
        for job in jobs:
            row = job.model_dump(mode="json")
            run = state.jobs.get(job.id)
            row["state"] = run.model_dump(mode="json") if run else None
            row["unreachable"] = unreachable(config, job.deliver_to, chats)
            rows.append(row)
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not jobs:
        typer.echo(f"no scheduled jobs ({store.jobs_path})")
        return
    for job in jobs:
        run = state.jobs.get(job.id)
        tz = job.timezone or config.agent.timezone
        parts = [
            job.id,
            job.name,
            job.schedule.describe(),
            tz,
            f"-> {job.deliver_to}",
            "enabled" if job.enabled else "disabled",
        ]
        if job.condition:
            parts.append(f"only if {job.condition!r} exits 0")
        if run and run.next_run and job.enabled:
            parts.append(
                f"next {run.next_run.astimezone(job.tz(config.agent.timezone)):%Y-%m-%d %H:%M}"
            )
        if run and run.last_status:
            parts.append(f"last {run.last_status}")
            if run.consecutive_errors:
                parts.append(f"{run.consecutive_errors} errors in a row")
        why = unreachable(config, job.deliver_to, chats)
        if why is not None:
            parts.append(f"UNREACHABLE ({why})")
        # A job's name may be a shared chat's words (cron from groups): shown sanitised.
        typer.echo("\t".join(sanitise(part) for part in parts))


@cron_app.command("add")
def cron_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="A short name.")],
    message: Annotated[
        str, typer.Option("--message", help="What the assistant should do when it runs.")
    ],
    at: Annotated[
        str | None, typer.Option("--at", help="Once, at this ISO date-time (naive: --tz).")
    ] = None,
    every: Annotated[int | None, typer.Option("--every", help="Every N seconds.")] = None,
    cron: Annotated[
        str | None, typer.Option("--cron", help="Five-field cron expression, e.g. '0 8 * * 1-5'.")
    ] = None,
    tz: Annotated[
        str | None, typer.Option("--tz", help="Time zone (default: agent.timezone).")
    ] = None,
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Chat to deliver to, as CHANNEL:CHAT_ID (default: heartbeat.deliver_to, else "
            "the owner's private chat when exactly one is known).",
        ),
    ] = None,
    condition: Annotated[
        str | None,
        typer.Option(
            "--condition",
            help="A shell command run (under the exec rules) before each run; the job runs "
            "only when it exits 0.",
        ),
    ] = None,
    agent: AgentOption = None,
) -> None:
    """Add a job; prints its id (and, on stderr, where it delivers and any reason it cannot)."""
    from clawgate.gateway.cron.store import create_job
    from clawgate.gateway.cron.targets import known_chats, unreachable
    from clawgate.kernel.errors import CronError, one_line

    config, store = _open(ctx)
    try:
        job = create_job(
            store,
            config,
            name=name,
            message=message,
            at=at,
            every=every,
            cron=cron,
            tz=tz,
            to=to,
            condition=condition,
        )
    except CronError as exc:
        fail(str(exc), code=2)
    except OSError as exc:
        fail(f"could not write {store.jobs_path}: {one_line(exc)}", code=1)
    typer.echo(job.id)
    why = unreachable(config, job.deliver_to, known_chats(config))
    warning = f"; warning: it reaches no one now: {why}" if why else ""
    typer.echo(f"delivers to {job.deliver_to}{warning}", err=True)


@cron_app.command("remove")
def cron_remove(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    agent: AgentOption = None,
) -> None:
    """Delete a job."""
    from clawgate.gateway.cron.store import remove_job
    from clawgate.kernel.errors import CronError

    _, store = _open(ctx)
    try:
        job = remove_job(store, job_id)
    except CronError as exc:
        fail(str(exc), code=1)
    typer.echo(f"removed {job.id} ({job.name})")


def _set_enabled(ctx: typer.Context, job_id: str, enabled: bool) -> None:
    from clawgate.gateway.cron.store import set_enabled
    from clawgate.kernel.errors import CronError

    _, store = _open(ctx)
    try:
        job = set_enabled(store, job_id, enabled)
    except CronError as exc:
        fail(str(exc), code=1)
    typer.echo(f"{job.id} ({job.name}) {'enabled' if enabled else 'disabled'}")


@cron_app.command("enable")
def cron_enable(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    agent: AgentOption = None,
) -> None:
    """Switch a job on (its error count starts afresh)."""
    _set_enabled(ctx, job_id, True)


@cron_app.command("disable")
def cron_disable(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    agent: AgentOption = None,
) -> None:
    """Switch a job off without deleting it."""
    _set_enabled(ctx, job_id, False)


@cron_app.command("run")
def cron_run(
    ctx: typer.Context,
    job_id: Annotated[str, typer.Argument(metavar="ID")],
    timeout: Annotated[
        float, typer.Option(help="Seconds to wait for the running gateway's result.")
    ] = RUN_TIMEOUT_SECONDS,
    agent: AgentOption = None,
) -> None:
    """Run a job once, now: through the running gateway if there is one, else here."""
    from clawgate.gateway.daemon.lock import CRON_RUN, GATEWAY, AlreadyRunning, InstanceLock

    config, store = _open(ctx)
    store.load().get(job_id)
    # The gateway's lock, whichever agent: one gateway serves every agent's jobs.
    lock = InstanceLock(cli_context(ctx).file_config().data_dir, role=CRON_RUN)
    try:
        lock.acquire()
    except AlreadyRunning:
        if lock.holder().role != GATEWAY:  # only a gateway serves run requests
            fail(f"{lock.holder().describe()} has the workspace open: quit it first", code=1)
        _run_through_gateway(store, job_id, timeout)
        return
    try:
        if not config.agent.model:
            fail("no model configured: set [agent] model or CLAWGATE_AGENT__MODEL", code=2)
        code = asyncio.run(_run_here(config, job_id))
    finally:
        lock.release()
    raise typer.Exit(code)


def _run_through_gateway(store: CronStore, job_id: str, timeout: float) -> None:
    from clawgate.gateway.cron.requests import request_run

    result_path = request_run(store, job_id)
    typer.echo(f"asked the running gateway to run {job_id}", err=True)
    deadline = time.monotonic() + timeout
    while not result_path.exists():
        if time.monotonic() > deadline:
            fail(
                f"no result after {timeout:g} s; the job may still be running (see `clawgate cron list`)",
                code=1,
            )
        time.sleep(0.1)
    result = json.loads(result_path.read_text(encoding="utf-8"))
    result_path.unlink(missing_ok=True)
    if not result.get("ok"):
        fail(f"job {job_id} failed: {result.get('error')}", code=1)
    typer.echo(result.get("text", ""))


async def _run_here(config: Config, job_id: str) -> int:
    """No gateway is running: start the configured channels briefly so the reply can be
    delivered, run the job, flush, stop."""
    from clawgate.agent.runtime import AgentRuntime
    from clawgate.agent.tools.shell import forbid_environ_reads
    from clawgate.gateway.app import build_channels
    from clawgate.gateway.cron.scheduler import CronScheduler
    from clawgate.gateway.daemon.gateway import Gateway
    from clawgate.kernel.bus import MessageBus

    forbid_environ_reads()  # the job's exec calls must not read our environment or memory
    bus = MessageBus()
    channels = build_channels(config, bus)
    runtime = AgentRuntime.build(config, outbox=bus.publish_outbound)
    gateway = Gateway([(runtime, bus)], channels, bus)
    runner = CronScheduler(runtime, bus, gateway.default.dispatcher)
    await gateway.start()
    try:
        await runner.load()
        job = runner.jobs[job_id]
        result = await runner.run_job(job_id, manual=True)
    finally:
        await gateway.stop(grace=5)
    if not result.ok:
        typer.echo(f"clawgate: job {job_id} failed: {result.error}", err=True)
        return 1
    channel = job.deliver_to.split(":", 1)[0]
    if channel not in gateway.manager.channels:
        typer.echo(
            f"(not sent: no {channel!r} channel is enabled; the reply is saved in session "
            f"{job.deliver_to})",
            err=True,
        )
    typer.echo(result.text)
    return 0

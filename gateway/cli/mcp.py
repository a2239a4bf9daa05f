"""`clawgate mcp list`: the configured MCP servers, their state and their tools.

With the gateway running, what it reports in its status file (its supervisors' view: state,
starts, last error). Without it, each enabled server is started once here, asked for its
tools and stopped. Its help is in root.COMMANDS."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from clawgate.gateway.cli.context import cli_context

mcp_app = typer.Typer(no_args_is_help=True)


@mcp_app.command("list")
def mcp_list(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per server.")] = False,
) -> None:
    """Each server: transport, state, tools offered (after its allowlist), last error."""
    import asyncio
    import json
    from dataclasses import asdict

    from clawgate.agent.tools.mcp_hub import probe
    from clawgate.gateway.cli.pairing import print_table
    from clawgate.gateway.ops.status_file import read_status
    from clawgate.kernel.secrets import Redactor

    config = cli_context(ctx).file_config()
    if not config.mcp.servers:
        typer.echo("no MCP servers configured: add [[mcp.servers]] entries to the config")
        return
    redact = Redactor(config.secrets())
    report = read_status(config.data_dir)
    if report is not None and report["running"] and "mcp" in report:
        servers: list[dict[str, Any]] = list(report["mcp"])
        source = "as the running gateway reports them"
    else:

        async def look() -> list[dict[str, Any]]:
            found = await asyncio.gather(*(probe(s) for s in config.mcp.servers))
            return [asdict(status) for status in found]

        servers = asyncio.run(look())
        source = "the gateway is not running: each server was started once to list its tools"
    for server in servers:
        server["error"] = redact(str(server.get("error") or ""))
    if as_json:
        for server in servers:
            typer.echo(json.dumps(server))
        return
    rows = [
        (
            str(s["name"]) + (" (shared)" if s.get("shared") else ""),
            str(s["transport"]),
            str(s["state"]),
            ", ".join(s.get("tools") or []) or "-",
            s["error"] or "-",
        )
        for s in servers
    ]
    print_table(("server", "transport", "state", "tools", "last error"), rows)
    typer.echo(f"({source}; tools are offered as <server>__<tool>)")

"""The test suite: the real code against fakes of every outside service, on loopback.

`tests/fakes/`: `server.py` `LoopbackServer` is the base of the fakes, an aiohttp app
on a free loopback port inside the test's event loop. `llm.py` is an OpenAI-compatible
server scripted with `text`, `tool_call`, `tool_calls`, `raw_tool_call`, `error`,
`context_overflow`, `hang`, `delay`, `gate`, `pause`, `cut`, `garbage`, or given a handler;
the model client talks to it for real (chat, embeddings, transcriptions). `telegram.py` and
`discord.py` serve the Bot API and Discord's REST + gateway, enforcing the platforms' rules;
`web.py` is a web site on 127.0.0.2 for web_fetch, `search.py` the four search providers,
`mcp_server.py` a real MCP server (the SDK's) over streamable HTTP, `mcp_stdio.py` the same
server's messages over stdio without the SDK's import (a parity test holds them equal);
`anthropic.py` and `gemini.py` serve those providers' own APIs (Messages, generateContent).

Shared test code lives in helper modules, never in test modules (`.ci/check` refuses a test
module imported by another file): `harness.py` (the in-process gateway with a recording
channel), `process.py` (the `clawgate` console script as a child process, forked from one
that imported it already: `forked.py`, `zygote.py`; xdist's workers are forked from the
same one through `fork_python.py`, and a child whose model goes through litellm from its
twin that imported litellm too),
`telegram_world.py` and `discord_world.py` (a gateway on each fake platform),
`scheduler_harness.py` (the harness with the scheduler on), `web_helpers.py` (a tool context
at a trust, one call through the registry), `small_disk.py` (a small tmpfs
over one folder: a real full disk), `memory_helpers.py` (scripted
consolidation calls), `llm_conversation.py` (one conversation of every turn kind, sent
through both model paths), `pty_terminal.py` (`clawgate` on a pseudo-terminal: hidden input,
Ctrl-C/Ctrl-D, the spinner), `dashboard_harness.py` (the dashboard over aiohttp's test
client, in a real gateway process, and in headless Chromium), `bytecode.py` (the suite's
bytecode, compiled once before the workers start), and `conftest.py` for the shared fixtures. `fixtures/` holds small OpenClaw and nanobot homes, written by hand from
their file formats, for the importers (`test_importers.py`).
`test_first_day.py` is the end-to-end acceptance test of a newcomer's first day, and
`test_agents.py` runs three agents (two Telegram bots, a bound Discord channel, a shared
memory) in one real gateway process.
"""

"""Names vulture cannot see used: each is called by a framework or a test by its name, never
in our code. Keep this short; anything else vulture reports is dead and goes.

Typer commands and callbacks and pydantic validators need no entry: pyproject.toml's
[tool.vulture] ignores their decorators."""

from clawgate.agent.llm import LLMClient
from clawgate.agent.memory.store import MemoryStore
from clawgate.agent.tools.shell import _Collector
from clawgate.channels.discord.client import EventClient
from clawgate.gateway.cli.agents import agents
from clawgate.gateway.cli.chat import agent
from clawgate.gateway.cli.dashboard import dashboard
from clawgate.gateway.cli.moving import export, restore
from clawgate.gateway.cli.onboard import onboard
from clawgate.gateway.cli.ops import doctor
from clawgate.gateway.cli.root import ClawgateGroup
from clawgate.gateway.cli.serve import gateway
from clawgate.gateway.cli.status import housekeeping, status
from clawgate.gateway.dashboard.web_channel import WebChannel

# asyncio.SubprocessProtocol's callbacks.
_Collector.pipe_data_received
_Collector.process_exited
_Collector.connection_lost

# discord.py's event handlers, found by name on the client.
EventClient.on_connect
EventClient.on_ready
EventClient.on_message
EventClient.on_interaction

# click's hook for the command list in --help.
ClawgateGroup.format_commands

# Typer commands registered by module and attribute name in root.COMMANDS.
(onboard, agent, gateway, agents, status, housekeeping, dashboard, doctor, restore, export)

# Probes the tests read: whether litellm was loaded, a conversation's open event streams,
# a daily-log append without a consolidation.
LLMClient.litellm_loaded
WebChannel.watching
MemoryStore.append_daily

"""Tools the model can call: files in the workspace, the web and, for the owner, a shell."""

from typing import Any

from clawgate.agent.tools.base import Tool, ToolContext, ToolParams
from clawgate.agent.tools.files import AppendFile, EditFile, ListDir, ReadFile, WriteFile
from clawgate.agent.tools.paths import resolve_path
from clawgate.agent.tools.registry import ToolRegistry
from clawgate.agent.tools.send_file import SendFile
from clawgate.agent.tools.shell import ExecTool
from clawgate.agent.tools.web_fetch import WebFetch
from clawgate.agent.tools.web_search import WebSearch
from clawgate.kernel.errors import PathOutsideWorkspace, ToolError


def default_tools() -> list[Tool[Any]]:
    """One instance of every built-in tool, in the order the model sees them."""
    return [
        ReadFile(),
        WriteFile(),
        EditFile(),
        AppendFile(),
        ListDir(),
        ExecTool(),
        SendFile(),
        WebFetch(),
        WebSearch(),
    ]


__all__ = [
    "AppendFile",
    "EditFile",
    "ExecTool",
    "ListDir",
    "PathOutsideWorkspace",
    "ReadFile",
    "SendFile",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolParams",
    "ToolRegistry",
    "WebFetch",
    "WebSearch",
    "WriteFile",
    "default_tools",
    "resolve_path",
]

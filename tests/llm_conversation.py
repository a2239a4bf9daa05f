"""One conversation with every kind of turn (system, joined user turns, an image, tool
calls and their results), and two tools: what the native model paths' tests send through
litellm and direct to compare the requests."""

from __future__ import annotations

from typing import Any

PIXEL = "data:image/png;base64,iVBORw0KGgo="
CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "[Summary of the earlier part]\nAnn likes tea."},
    {"role": "user", "content": [{"type": "text", "text": "what is this?"}]},
    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PIXEL}}]},
    {"role": "assistant", "content": "A pixel. Let me look at your files."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "list_dir", "arguments": '{"path": "."}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "now", "arguments": '{"zone": "UTC"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
    {"role": "tool", "tool_call_id": "call_2", "content": "09:00"},
    {"role": "assistant", "content": "Two files, at nine."},
    {"role": "user", "content": "thanks, and the weather?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": "List a folder.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "now",
            "description": "The time.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

"""The model's side of a consolidation: the save_memory tool and its prompt, and reading
and checking the answer before anything is written.

A MEMORY.md rewrite may drop a line only when the model lists it in `removed`, and never
more than a third of the lines in one consolidation, whatever the file's size; a placeholder
("No new facts to add.") keeps MEMORY.md as it is; an error-looking answer is refused.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from typing import Any

from clawgate.agent.llm import LLMResponse
from clawgate.agent.text import without_surrogates
from clawgate.kernel.errors import ConsolidationRefused

log = logging.getLogger(__name__)

SAVE_MEMORY_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "save_memory",
        "description": "Save the consolidated memory of the conversation excerpt.",
        "parameters": {
            "type": "object",
            "properties": {
                "history_entry": {
                    "type": "string",
                    "description": "A paragraph summarising what happened and was decided, with "
                    "names, dates and numbers, so a later grep finds it.",
                },
                "memory_update": {
                    "type": "string",
                    "description": "The complete new MEMORY.md: the current one with durable new "
                    "facts merged in. Omit it if nothing new is worth keeping.",
                },
                "removed": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Every line of the current MEMORY.md that memory_update "
                    "no longer contains (no longer true, or reworded), copied exactly. At most "
                    "a third of its lines per call.",
                },
            },
            "required": ["history_entry"],
        },
    },
}

OWNER_INSTRUCTIONS = (
    "You maintain the long-term memory of a personal assistant. Read the current MEMORY.md "
    "and the conversation excerpt, then call save_memory once: history_entry summarises the "
    "excerpt; memory_update is the full MEMORY.md with durable facts (preferences, people, "
    "projects, decisions) merged in. Keep every existing line that is still true. A line you "
    "drop or reword must be listed, exactly as it was, in removed; never remove more than a "
    "third of the lines. Omit memory_update when nothing new is worth keeping."
)
SHARED_INSTRUCTIONS = (
    "You keep the event log of a shared chat. Read the conversation excerpt, then call "
    "save_memory once with history_entry: a paragraph summarising what happened and was "
    "decided, with names, dates and numbers. Do not return memory_update."
)

MAX_ENTRY_CHARS = 8_000
# The store stamps each entry itself; a model that imitates HISTORY.md's format starts its
# summary with a stamp (and maybe the session key) of its own: "[2026-05-01 09:30] (cli:x) ".
_STAMP = re.compile(
    r"^\s*[\[(]?\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?"
    r"(?:\s*(?:UTC|Z|[+-]\d{2}:?\d{2}))?[\])]?(?:\s*\([^()\s]+\))?\s*[-\u2013\u2014:]?\s*"
)
_ERRORISH = re.compile(
    r"^\s*(error|exception|traceback|i'?m sorry|sorry,|i cannot|i can't|as an ai)\b", re.I
)
# "No new facts to add.", "(unchanged)", "N/A": the model saying it changes nothing, in the
# field that would otherwise become the whole of MEMORY.md.
_PLACEHOLDER = re.compile(
    r"^\W*(?:(?:no (?:new |further |additional )?(?:durable )?(?:facts?|changes?|updates?"
    r"|information)|nothing (?:new|to (?:add|update|change|save)))\b[^\n]{0,60}"
    r"|(?:memory )?unchanged|same as before|n/?a|none)\W*$",
    re.I,
)
_LIST_MARKER = re.compile(r"^(?:[-*+]|\d+[.)])\s+")


def _json_object_in(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and "history_entry" in value:
            return value
    return None


def extract_arguments(response: LLMResponse) -> dict[str, Any]:
    """save_memory's arguments from a tool call, or from a JSON object in plain text."""
    raw: Any = None
    for call in response.tool_calls:
        if call.name == "save_memory":
            raw = call.arguments
            break
    if raw is None and response.tool_calls:
        raw = response.tool_calls[0].arguments
    if raw is None:
        found = _json_object_in(response.content or "")
        if found is None:
            raise ConsolidationRefused("the answer had no save_memory call and no JSON object")
        return found
    value: Any = raw
    for _ in range(2):  # a JSON string that itself holds JSON (double-encoded)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                found = _json_object_in(value)
                if found is None:
                    raise ConsolidationRefused("save_memory arguments are not JSON") from None
                value = found
    if not isinstance(value, dict):
        raise ConsolidationRefused("save_memory arguments are not an object")
    return value


def _as_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _fact_lines(text: str) -> list[str]:
    """MEMORY.md's lines as facts: blank lines and comments skipped, list markers, spacing
    and letter case ignored, so re-bulleting a fact is not removing it."""
    facts = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("<!--"):
            facts.append(" ".join(_LIST_MARKER.sub("", line).split()).casefold())
    return facts


def _repaired(dropped: Counter[str], added: Counter[str]) -> Counter[str]:
    """The dropped lines the update only repaired: a MEMORY.md that was not valid UTF-8 is
    shown with U+FFFD, and a model that writes the character it stood for keeps the fact."""
    repaired: Counter[str] = Counter()
    for line in [line for line in dropped if "\ufffd" in line]:
        pattern = re.compile(".{1,4}".join(re.escape(part) for part in line.split("\ufffd")))
        for candidate in added:
            if added[candidate] and pattern.fullmatch(candidate):
                added[candidate] -= 1
                repaired[line] += 1
                break
    return repaired


def _check_removals(current: str, update: str, removed: list[str]) -> None:
    before, after = Counter(_fact_lines(current)), Counter(_fact_lines(update))
    dropped = before - after
    dropped -= _repaired(dropped, after - before)
    unlisted = dropped - Counter(f for line in removed for f in _fact_lines(line))
    if unlisted:
        first = next(iter(unlisted))
        raise ConsolidationRefused(
            f"memory_update would drop {unlisted.total()} line(s) of MEMORY.md not listed in "
            f"removed, e.g. {first[:80]!r}"
        )
    if 3 * dropped.total() > before.total():
        raise ConsolidationRefused(
            f"memory_update would drop {dropped.total()} of {before.total()} lines of MEMORY.md "
            "(at most a third per consolidation)"
        )


def validate(
    arguments: dict[str, Any], current_memory: str, *, owner: bool
) -> tuple[str, str | None]:
    """(history_entry, new MEMORY.md or None to keep it), lone surrogates replaced. Raises
    ConsolidationRefused."""
    arguments = without_surrogates(arguments)
    entry = _STAMP.sub("", (_as_text(arguments.get("history_entry")) or "").strip(), count=1)
    if not entry:
        raise ConsolidationRefused("empty history_entry")
    if _ERRORISH.match(entry):
        raise ConsolidationRefused(f"history_entry looks like an error: {entry[:80]!r}")
    if len(entry) > MAX_ENTRY_CHARS:
        raise ConsolidationRefused(f"history_entry too long ({len(entry)} characters)")
    if not owner:
        return entry, None
    update = _as_text(arguments.get("memory_update"))
    if update is None or not update.strip() or update.strip() == current_memory.strip():
        return entry, None
    if _PLACEHOLDER.match(update.strip()):
        log.info("memory_update is a placeholder (%r); MEMORY.md kept", update.strip()[:80])
        return entry, None
    if len(_fact_lines(update)) <= 3 and _ERRORISH.match(update):
        raise ConsolidationRefused(f"memory_update looks like an error: {update.strip()[:80]!r}")
    limit = max(4 * len(current_memory), 20_000)
    if len(update) > limit:
        raise ConsolidationRefused(f"memory_update too long ({len(update)} characters)")
    removed = (_as_text(arguments.get("removed")) or "").splitlines()
    _check_removals(current_memory, update, removed)
    return entry, update

"""What a model's tokens cost in USD: `agent.prices` first, then litellm's offline cost map.

The cost map is the JSON file litellm ships and loads as `litellm.model_cost` when
LITELLM_LOCAL_MODEL_COST_MAP is set (never fetched over the network). When litellm is
already imported its `model_cost` is used (it includes what a user registered); otherwise
the file is read in a thread without importing litellm, once per model name, and only that
model's entries are kept: a gateway on the direct path must not pay litellm's seconds, nor
the whole map's megabytes, to price a call.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import mmap
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgate.kernel.config_sections import ModelPrice

log = logging.getLogger(__name__)

COST_MAP_FILE = "model_prices_and_context_window_backup.json"
TOP_LEVEL_KEY = b"\n    "
MILLION = 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per token."""

    input: float
    output: float
    cached: float

    def cost(self, input_tokens: int, output_tokens: int, cached_tokens: int) -> float:
        fresh = max(input_tokens - cached_tokens, 0)
        return fresh * self.input + cached_tokens * self.cached + output_tokens * self.output


def _from_override(price: ModelPrice) -> Price:
    cached = price.input_per_mtok if price.cached_per_mtok is None else price.cached_per_mtok
    return Price(price.input_per_mtok / MILLION, price.output_per_mtok / MILLION, cached / MILLION)


def _from_entry(entry: Any) -> Price | None:
    if not isinstance(entry, dict):
        return None
    given, out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(given, int | float) or not isinstance(out, int | float):
        return None
    cached = entry.get("cache_read_input_token_cost")
    return Price(float(given), float(out), float(cached) if cached is not None else float(given))


def cost_entries(names: Iterable[str]) -> dict[str, Any]:
    """litellm's cost-map entries for `names` (None for a name it lacks): from its live dict
    when litellm is loaded, else from its bundled file; all None when litellm is not
    installed.

    The file is mapped, not read: only the entries asked for are parsed and kept. Parsed
    whole it is ~6 MB of a gateway's memory that it never reads, and even a read of its
    3.5 MB into one buffer costs more: freeing a block that large raises glibc's threshold
    for mapping large blocks, so the embedder's buffers loaded after it would stay in the
    heap for good."""
    wanted = list(dict.fromkeys(names))
    loaded = sys.modules.get("litellm")
    if loaded is not None and isinstance(getattr(loaded, "model_cost", None), dict):
        return {name: loaded.model_cost.get(name) for name in wanted}
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return dict.fromkeys(wanted)
    path = Path(next(iter(spec.submodule_search_locations))) / COST_MAP_FILE
    try:
        with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return entries_in(data, wanted)
    except (OSError, ValueError) as exc:  # ValueError: an empty file cannot be mapped
        log.warning("cannot read litellm's cost map %s: %s", path, exc)
        return dict.fromkeys(wanted)


def entries_in(data: bytes | mmap.mmap, names: list[str]) -> dict[str, Any]:
    """The entries for `names` in the cost map's bytes, as a parse of the whole file has
    them."""
    if bytes(data[: len(TOP_LEVEL_KEY) + 2]) == b"{" + TOP_LEVEL_KEY + b'"':
        return {name: _entry_in(data, name) for name in names}
    try:  # a file of another layout is parsed whole
        whole = json.loads(bytes(data))
    except ValueError:
        whole = None
    return {name: whole.get(name) if isinstance(whole, dict) else None for name in names}


def _entry_in(data: bytes | mmap.mmap, name: str) -> Any:
    """`name`'s value, parsed alone. litellm writes the file with four spaces of indent, so a
    top-level key is the one that starts a line after exactly four spaces (deeper keys have
    eight) and its value ends where the next one starts; the last one wins, as in a parse of
    the whole file."""
    key = TOP_LEVEL_KEY + json.dumps(name).encode() + b": "
    at = data.rfind(key)
    if at < 0:
        return None
    start = at + len(key)
    end = data.find(TOP_LEVEL_KEY + b'"', start)
    try:
        value, _ = json.JSONDecoder().raw_decode(
            bytes(data[start : end if end >= 0 else None]).decode()
        )
    except ValueError:
        return None
    return value


class PriceBook:
    """Prices of model names as configured (`openai/gpt-4o-mini`)."""

    def __init__(self, overrides: Mapping[str, ModelPrice]) -> None:
        self._overrides = {name: _from_override(p) for name, p in overrides.items()}
        self._entries: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    async def load(self, *models: str) -> None:
        """Read the cost map's entries for `models` once (in a thread: the file is
        megabytes)."""
        async with self._lock:
            missing = self._missing(models)
            if missing:
                self._entries.update(await asyncio.to_thread(cost_entries, missing))

    def load_now(self, *models: str) -> None:
        """`load` for a command that runs no event loop (`clawgate doctor`)."""
        missing = self._missing(models)
        if missing:
            self._entries.update(cost_entries(missing))

    def _missing(self, models: Iterable[str]) -> list[str]:
        names = (name for m in models if m not in self._overrides for name in _lookup_names(m))
        return [name for name in dict.fromkeys(names) if name not in self._entries]

    def price(self, model: str) -> Price | None:
        """The override, else the cost map's entry for the name or, without its provider
        prefix, for the same provider's model; None when neither knows a price or the
        entries were not loaded."""
        if model in self._overrides:
            return self._overrides[model]
        found = _from_entry(self._entries.get(model))
        if found is not None:
            return found
        provider, _, bare = model.partition("/")
        entry = self._entries.get(bare) if bare else None
        if isinstance(entry, dict) and str(entry.get("litellm_provider", "")).startswith(provider):
            return _from_entry(entry)
        return None


def _lookup_names(model: str) -> list[str]:
    bare = model.partition("/")[2]
    return [model, bare] if bare else [model]

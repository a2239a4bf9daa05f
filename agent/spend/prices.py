"""What a model's tokens cost in USD: `agent.prices` first, then litellm's offline cost map.

The cost map is the JSON file litellm ships and loads as `litellm.model_cost` when
LITELLM_LOCAL_MODEL_COST_MAP is set (never fetched over the network). When litellm is
already imported its `model_cost` is used (it includes what a user registered); otherwise
the file is read once, in a thread, without importing litellm: a gateway on the direct path
must not pay litellm's seconds and memory to price a call.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clawgate.kernel.config_sections import ModelPrice

log = logging.getLogger(__name__)

COST_MAP_FILE = "model_prices_and_context_window_backup.json"
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


def read_cost_map() -> Mapping[str, Any]:
    """litellm's cost map: its live dict when litellm is loaded, else its bundled file;
    empty when litellm is not installed."""
    loaded = sys.modules.get("litellm")
    if loaded is not None and isinstance(getattr(loaded, "model_cost", None), dict):
        return loaded.model_cost
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    return _bundled(Path(next(iter(spec.submodule_search_locations))) / COST_MAP_FILE)


@functools.cache
def _bundled(path: Path) -> Mapping[str, Any]:
    """The installed package's file, parsed once per process: it is megabytes that never
    change while the process runs, and every agent of a gateway reads the same one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("cannot read litellm's cost map %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


class PriceBook:
    """Prices of model names as configured (`openai/gpt-4o-mini`)."""

    def __init__(
        self, overrides: Mapping[str, ModelPrice], cost_map: Mapping[str, Any] | None = None
    ) -> None:
        """`cost_map`: given (doctor reads it itself), or read by `load`."""
        self._overrides = {name: _from_override(p) for name, p in overrides.items()}
        self._map = cost_map
        self._lock = asyncio.Lock()

    async def load(self) -> None:
        """Read the cost map once (a thread: the file is megabytes)."""
        async with self._lock:
            if self._map is None:
                self._map = await asyncio.to_thread(read_cost_map)

    def price(self, model: str) -> Price | None:
        """The override, else the cost map's entry for the name or, without its provider
        prefix, for the same provider's model; None when neither knows a price."""
        if model in self._overrides:
            return self._overrides[model]
        cost_map = self._map or {}
        found = _from_entry(cost_map.get(model))
        if found is not None:
            return found
        provider, _, bare = model.partition("/")
        entry = cost_map.get(bare) if bare else None
        if isinstance(entry, dict) and str(entry.get("litellm_provider", "")).startswith(provider):
            return _from_entry(entry)
        return None

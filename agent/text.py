"""Text that can always be written: lone UTF-16 surrogates (which a platform's or a model's
JSON can carry as "\\ud800") are no characters and cannot be UTF-8."""

from __future__ import annotations

from typing import Any


def without_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings replaced by U+FFFD (pairs joined)."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {k: without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_surrogates(v) for v in value]
    return value

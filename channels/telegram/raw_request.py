"""The getUpdates request that keeps the raw body of its last response: a batch
python-telegram-bot cannot parse is then read update by update (see the adapter)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from telegram.request import HTTPXRequest


class RawKeeping:
    """Marker base: the poll request that keeps the body of its last response."""

    last_payload: bytes | None = None

    def last_result(self) -> Any:
        """The `result` of the last response, as JSON, or None."""
        try:
            body = json.loads(self.last_payload or b"null")
        except ValueError:
            return None
        return body.get("result") if isinstance(body, dict) else None


def raw_keeping_request(**options: Any) -> HTTPXRequest:
    """An HTTPXRequest for getUpdates that keeps the raw body of its last response, so a
    batch PTB fails to parse can still be read update by update."""
    from telegram.request import HTTPXRequest

    class RawKeepingRequest(RawKeeping, HTTPXRequest):
        async def do_request(self, *args: Any, **kwargs: Any) -> tuple[int, bytes]:
            status, payload = await super().do_request(*args, **kwargs)
            self.last_payload = payload
            return status, payload

    return RawKeepingRequest(**options)

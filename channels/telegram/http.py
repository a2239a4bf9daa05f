"""The Bot API requests of every Telegram client clawgate makes (the channel's two, the
onboarding check's, the welcome message's), trusting the process's one CA store
(kernel/net.py `tls_context`): httpx would load the bundle again for each client, ~20 ms of
CPU apiece."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clawgate.kernel.net import tls_context

if TYPE_CHECKING:
    from telegram.request import HTTPXRequest


def trusting() -> dict[str, Any]:
    """HTTPXRequest's `httpx_kwargs` for the shared trust store."""
    return {"verify": tls_context()}


def bot_request(**options: Any) -> HTTPXRequest:
    """An HTTPXRequest with `options`, trusting the shared store."""
    from telegram.request import HTTPXRequest

    return HTTPXRequest(httpx_kwargs=trusting(), **options)

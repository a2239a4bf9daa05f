"""The message a person gets once the owner approves their pairing code.

They wrote before they were let in, and that message got the pairing code instead of an
answer: it is never answered later, so they must send it again. The command that approved
them (`clawgate pairing approve`) tells them so straight through the platform's API with
the bot's token, the way the pairing code reached them: Telegram's sendMessage to their
private chat (whose id is their user id); on Discord the DM channel with them
(POST /users/@me/channels), then a message there. A failure is reported, never fatal: the
approval stands.
"""

from __future__ import annotations

from clawgate.channels.pairing import Approval
from clawgate.kernel.config import Config
from clawgate.kernel.errors import one_line
from clawgate.kernel.secrets import Redactor

TIMEOUT_SECONDS = 20.0


def welcome_text(approval: Approval) -> str:
    if approval.owner:
        return "You are now the owner of this assistant. Send your message again."
    return "You can chat with this assistant now. Send your message again."


async def tell_approved(
    config: Config, approval: Approval, timeout: float = TIMEOUT_SECONDS
) -> str:
    """Send `welcome_text` to the person approved: "sent", "" when this config has no bot
    on their platform (nothing to send with), else why it failed (one line, scrubbed of
    every configured secret)."""
    settings = getattr(config.channels, approval.channel, None)
    token = settings.token if settings is not None else None
    if settings is None or not settings.enabled or not (token and token.get_secret_value()):
        return ""
    send = _telegram if approval.channel == "telegram" else _discord
    try:
        await send(config, approval.user_id, welcome_text(approval), timeout)
    except Exception as exc:  # any failure is only reported: the approval stands
        return Redactor(config.secrets())(one_line(exc))
    return "sent"


async def _telegram(config: Config, user_id: str, text: str, timeout: float) -> None:
    import clawgate.channels.telegram.library  # noqa: F401  (before `telegram`)
    from clawgate.channels.telegram.http import bot_request

    # isort: split
    from telegram import Bot

    settings = config.channels.telegram
    assert settings.token is not None
    request = bot_request(connect_timeout=timeout, read_timeout=timeout, proxy=settings.proxy)
    bot = Bot(
        settings.token.get_secret_value(),
        base_url=settings.base_url,
        base_file_url=settings.base_file_url,
        request=request,
    )
    async with bot:
        await bot.send_message(chat_id=int(user_id), text=text)


async def _discord(config: Config, user_id: str, text: str, timeout: float) -> None:
    import aiohttp

    settings = config.channels.discord
    assert settings.token is not None
    api = settings.api_base.rstrip("/")
    headers = {"Authorization": f"Bot {settings.token.get_secret_value()}"}
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=timeout), headers=headers, raise_for_status=True
    ) as session:
        dm = f"{api}/users/@me/channels"
        async with session.post(dm, json={"recipient_id": user_id}, proxy=settings.proxy) as made:
            channel = await made.json()
        post = f"{api}/channels/{channel['id']}/messages"
        async with session.post(post, json={"content": text}, proxy=settings.proxy):
            pass

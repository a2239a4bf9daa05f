"""Media end to end through Telegram: images reach a vision model as image content, voice
becomes a transcript, group downloads land where group sessions may read them, and the
model sends files back with send_file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clawgate.agent.llm.litellm_path import import_litellm
from clawgate.agent.session import load_session
from clawgate.kernel.config import AgentConfig, Config
from tests.fakes.llm import FakeLLM, error, text, tool_call
from tests.fakes.telegram import FakeTelegram
from tests.telegram_world import GROUP, MENTION, OWNER, TelegramGateway, telegram_gateway_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


@pytest.fixture
def config(tmp_path: Path, agent_config: AgentConfig, telegram: FakeTelegram) -> Config:
    return telegram_gateway_config(tmp_path, agent_config, telegram)


def _image_parts(request: dict) -> list[dict]:
    user = [m for m in request["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    return [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


async def test_photo_reaches_the_model_as_image_and_is_not_stored_inline(
    config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("A cat."))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "what is this?", photo=b"\xff\xd8JPEG-cat")
        assert (await telegram.next_message(OWNER))["text"] == "A cat."
    parts = _image_parts(fake_llm.requests[-1])
    assert len(parts) == 1 and parts[0]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    stored = (config.workspace / "sessions" / f"telegram_{OWNER}.jsonl").read_text()
    assert "base64" not in stored and "[photo: media/telegram/" in stored


async def test_model_without_vision_is_retried_without_the_image(
    config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config.agent.max_retries = 0
    fake_llm.script(error(400, "This model does not support image input"), text("I see a note."))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "look", photo=b"\xff\xd8JPEG")
        assert (await telegram.next_message(OWNER))["text"] == "I see a note."
    assert _image_parts(fake_llm.requests[0]) and not _image_parts(fake_llm.requests[1])


async def test_voice_is_transcribed_when_a_model_is_configured(
    config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    config.agent.transcription_model = "openai/whisper-1"
    import_litellm()  # speech to text goes through litellm: its import is no attempt's
    fake_llm.script(text("Got it."))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "", voice=b"OggS" + b"\x00" * 96)
        await telegram.next_message(OWNER)
    assert fake_llm.transcription_requests == [{"model": "whisper-1", "bytes": 100}]
    user = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"][-1]
    assert "transcript of 100 bytes of audio" in json.dumps(user["content"])


async def test_group_download_is_readable_by_the_group_but_owner_media_is_not(
    config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    fake_llm.script(text("owner pic noted"))
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "private", photo=b"\xff\xd8OWNER-ONLY")
        await telegram.next_message(OWNER)
        owner_note = [m for m in fake_llm.requests[-1]["messages"] if m["role"] == "user"][-1]
        owner_path = json.dumps(owner_note["content"]).split("[photo: ")[1].split("]")[0]
        fake_llm.script(
            tool_call("read_file", path=owner_path),
            text("checked"),
        )
        telegram.user_says(
            GROUP,
            f"{MENTION} read it",
            user_id=2002,
            username="bob",
            chat_type="group",
            photo=b"\xff\xd8GROUP-PIC",
        )
        await telegram.next_message(GROUP)
    group_user = [m for m in fake_llm.requests[-2]["messages"] if m["role"] == "user"][-1]
    note = json.dumps(group_user["content"])
    assert "[photo: media/u" in note  # as the group's file tools name it: its own area
    saved = list((config.workspace / "public" / f"telegram_{GROUP}" / "media").rglob("*.jpg"))
    assert len(saved) == 1 and saved[0].read_bytes() == b"\xff\xd8GROUP-PIC"
    refused = fake_llm.requests[-1]["messages"][-1]["content"]
    assert refused.startswith("Error:") and "OWNER-ONLY" not in refused


async def test_send_file_delivers_a_photo_before_the_reply(
    config, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    (config.workspace / "chart.png").write_bytes(b"\x89PNG chart")
    fake_llm.script(
        tool_call("send_file", path="chart.png", caption="Your chart"),
        text("Sent it."),
    )
    async with TelegramGateway(config):
        telegram.user_says(OWNER, "send me the chart")
        caption = await telegram.next_message(OWNER)
        photo = await telegram.next_message(OWNER)
        reply = await telegram.next_message(OWNER)
    assert caption["text"] == "Your chart"
    assert photo.get("kind") == "photo" and photo["data"] == b"\x89PNG chart"
    assert reply["text"] == "Sent it."
    session = load_session(config.workspace / "sessions" / f"telegram_{OWNER}.jsonl", "x")
    assert "Sent chart.png" in session.messages[-2].content

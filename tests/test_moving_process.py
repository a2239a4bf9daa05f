"""A backup taken while a real gateway answers and consolidates, restored into a fresh HOME
and started there: every message Telegram had confirmed before the backup began is in the
restored transcripts, the memory audit is clean, and the bot answers. Two gateway starts,
each paying litellm's import."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path
from typing import Any

from tests.fakes.llm import FakeLLM, text
from tests.fakes.telegram import FakeTelegram
from tests.harness import wait_until
from tests.memory_helpers import is_consolidation, save
from tests.process import ClawgateProcess, fake_model, fake_telegram, run_clawgate, write_config

OWNER = 1001
READY = "channel telegram ready"
START_TIMEOUT = 30.0
MODEL_TIMEOUT = 60.0
# The 20 s shutdown grace (a backlog over the rate limit can use it all), and room under load.
EXIT_TIMEOUT = 40.0


def last_user_text(request: dict[str, Any]) -> str:
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[-1]["content"])


def user_texts(workspace: Path) -> list[str]:
    found = []
    for path in sorted((workspace / "sessions").rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            if data.get("role") == "user":
                found.append(data["content"])
    return found


async def test_backup_of_a_running_gateway_restores_and_answers(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    def model(body: dict[str, Any]) -> Any:
        if is_consolidation(body):
            return save(entry=f"Ann talked about {last_user_text(body)[:40]}.")
        return text(f"re: {last_user_text(body)}")

    fake_llm.handler = model
    old_home, new_home = tmp_path / "old", tmp_path / "new"
    old_home.mkdir()
    new_home.mkdir()
    config = write_config(
        old_home,
        agent={**fake_model(fake_llm, request_timeout=60), "memory_window": 4},
        telegram=fake_telegram(telegram, (OWNER,)),
    )
    sent: dict[int, str] = {}  # update id -> text
    archive = tmp_path / "backup.tar.gz"

    async def talk() -> None:
        for n in range(1000):
            said = f"message {n}"
            sent[telegram.user_says(OWNER, said)] = said
            await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT)

    async with ClawgateProcess(old_home, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        talking = asyncio.create_task(talk())
        # Some turns done and a consolidation written before the backup starts.
        history = old_home / "workspace" / "memory" / "HISTORY.md"
        await wait_until(lambda: history.exists() and len(sent) >= 8, timeout=MODEL_TIMEOUT)
        confirmed = [said for update, said in sent.items() if update < telegram.confirmed_offset]
        code, stderr = await run_clawgate(
            old_home, "--config", str(config), "backup", "-o", str(archive), timeout=60
        )
        assert code == 0, stderr
        talking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await talking
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr
    assert len(sent) > len(confirmed)  # the gateway kept taking messages during the backup

    code, stderr = await run_clawgate(new_home, "backup", "verify", str(archive))
    assert code == 0, stderr
    code, stderr = await run_clawgate(new_home, "restore", str(archive))
    assert code == 0, stderr
    home = new_home / ".clawgate"
    workspace = home / "workspaces" / "main"  # the old workspace sat outside its data_dir
    assert "Ann talked about" in (workspace / "memory" / "HISTORY.md").read_text()

    # No --config: the restored config is the new HOME's default.
    async with ClawgateProcess(new_home, "gateway") as restored:
        await restored.wait_for_log(READY, START_TIMEOUT)
        # Confirmed but still in the journal at backup time: answered now, from the restore.
        await wait_until(lambda: set(confirmed) <= set(user_texts(workspace)), timeout=60)
        telegram.user_says(OWNER, "are you there?")
        while (await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT))["text"] != (
            "re: are you there?"
        ):
            pass
        restored.send_signal(signal.SIGTERM)
        assert await restored.wait(EXIT_TIMEOUT) == 0, restored.stderr
    assert "Traceback" not in gateway.stderr + restored.stderr

    code, stderr = await run_clawgate(new_home, "memory", "audit")
    assert code == 0, stderr

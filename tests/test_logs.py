"""gateway/ops/logs.py: JSON lines, the rotated private file, secrets redacted everywhere."""

from __future__ import annotations

import json
import logging
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from clawgate.gateway.ops.logs import log_file_path, setup_logging, teardown_logging
from clawgate.kernel.config import LoggingConfig
from clawgate.kernel.secrets import REDACTED, Redactor
from tests.fakes.llm import FakeLLM
from tests.fakes.telegram import TOKEN, FakeTelegram
from tests.process import ClawgateProcess, fake_model, write_config

log = logging.getLogger("clawgate.test")


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    yield
    teardown_logging()
    root.setLevel(level)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_json_lines_parse_on_stderr_and_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_logging(LoggingConfig(), tmp_path, json=True, verbose=False)
    log.info("channel %s ready", "telegram")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("turn failed")

    stderr_lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    file_lines = [
        json.loads(line) for line in log_file_path(tmp_path).read_text("utf-8").splitlines()
    ]
    for lines in (stderr_lines, file_lines):
        ready, failed = lines
        assert set(ready) == {"time", "level", "logger", "message"}
        assert (ready["level"], ready["logger"], ready["message"]) == (
            "INFO",
            "clawgate.test",
            "channel telegram ready",
        )
        assert ready["time"].endswith("Z") and "T" in ready["time"]
        assert failed["level"] == "ERROR"
        assert "ValueError: boom" in failed["exc"]


def test_human_lines_by_default_and_debug_only_when_verbose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_logging(LoggingConfig(), tmp_path, json=False, verbose=False)
    log.debug("hidden")
    log.info("shown")
    logging.getLogger("httpx").info("library chatter")
    err = capsys.readouterr().err
    assert "INFO    clawgate.test: shown" in err
    assert "hidden" not in err and "library chatter" not in err

    setup_logging(LoggingConfig(), tmp_path, json=False, verbose=True)
    log.debug("now visible")
    assert "DEBUG   clawgate.test: now visible" in capsys.readouterr().err
    # A second setup replaced the first: one stderr handler, one file handler.
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_clawgate_handler", False)]
    assert len(ours) == 2


def test_the_file_rotates_at_max_bytes_and_stays_private(tmp_path: Path) -> None:
    config = LoggingConfig(max_bytes=10_000, backups=2)
    setup_logging(config, tmp_path, json=False, verbose=False)
    for number in range(400):  # about 40 KB
        log.info("line %04d %s", number, "x" * 60)

    path = log_file_path(tmp_path)
    files = sorted(path.parent.iterdir())
    assert [f.name for f in files] == ["clawgate.log", "clawgate.log.1", "clawgate.log.2"]
    assert all(f.stat().st_size <= 10_000 for f in files)
    assert all(mode(f) == 0o600 for f in files)
    assert mode(path.parent) == 0o700
    assert "line 0399" in path.read_text("utf-8")  # the newest line is in the live file


def test_without_backups_the_file_starts_over(tmp_path: Path) -> None:
    setup_logging(LoggingConfig(max_bytes=10_000, backups=0), tmp_path, json=False, verbose=False)
    for number in range(400):
        log.info("line %04d %s", number, "x" * 60)
    path = log_file_path(tmp_path)
    assert [f.name for f in path.parent.iterdir()] == ["clawgate.log"]
    assert path.stat().st_size <= 10_000


def test_file_logging_can_be_switched_off(tmp_path: Path) -> None:
    setup_logging(LoggingConfig(file=False), tmp_path, json=False, verbose=False)
    log.info("stderr only")
    assert not (tmp_path / "logs").exists()


def test_the_redactor_walks_records_and_keeps_what_it_did_not_change() -> None:
    redact = Redactor(["sk-test-secret"])
    clean = {"role": "user", "content": ["fine", {"text": "also fine"}], "seq": 3}
    assert redact.data(clean) is clean  # the session store tells "changed" by identity
    record = {"type": "turn_error", "error": "key SK-TEST-SECRET refused", "n": [1, "x"]}
    redacted = redact.data(record)
    assert redacted == {"type": "turn_error", "error": f"key {REDACTED} refused", "n": [1, "x"]}
    assert record["error"] == "key SK-TEST-SECRET refused"  # the input is left as it was
    nested = redact.data(("ok", ["bot 7412345678:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9"]))
    assert nested == ("ok", [f"bot {REDACTED}"])


@pytest.mark.parametrize("as_json", [False, True])
def test_a_token_is_redacted_on_stderr_and_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    secret = "sk-live-0123456789abcdef"
    setup_logging(
        LoggingConfig(), tmp_path, json=as_json, verbose=False, secrets=[TOKEN, secret, "none"]
    )
    log.info("GET https://api.telegram.org/bot%s/getMe", TOKEN)  # in the arguments
    log.warning(f"provider said: bad key {secret}")  # in the message itself
    logging.getLogger("telegram.ext").error("library line with %s", TOKEN)
    try:
        raise RuntimeError(f"request to /bot{TOKEN}/getUpdates failed")
    except RuntimeError:
        log.exception("poll failed")
    log.info("placeholder keys such as none stay readable")

    stderr = capsys.readouterr().err
    written = log_file_path(tmp_path).read_text("utf-8")
    for text in (stderr, written):
        assert TOKEN not in text and secret not in text
        assert text.count(REDACTED) == 4
        assert "placeholder keys such as none stay readable" in text


async def test_the_gateway_logs_json_to_stderr_and_a_private_file(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    async with FakeTelegram() as telegram:
        config = write_config(
            tmp_path,
            agent=fake_model(fake_llm),
            telegram={
                "enabled": True,
                "token": TOKEN,
                "base_url": telegram.base_url,
                "base_file_url": telegram.base_file_url,
                "poll_timeout": 1,
            },
        )
        async with ClawgateProcess(
            tmp_path, "--config", str(config), "gateway", "--log-json"
        ) as gateway:
            line = await gateway.wait_for_log("channel telegram ready", 30)
            gateway.send_signal(signal.SIGTERM)
            code = await gateway.wait(25)

    assert code == 0, gateway.stderr
    assert json.loads(line)["message"].startswith("channel telegram ready")
    logs = tmp_path / "data" / "logs"
    written = (logs / "clawgate.log").read_text("utf-8")
    assert [json.loads(x)["message"] for x in written.splitlines()][-1] == "stopped"
    assert mode(logs / "clawgate.log") == 0o600 and mode(logs) == 0o700
    assert TOKEN not in gateway.stderr and TOKEN not in written
    assert "sk-test-secret" not in gateway.stderr and "sk-test-secret" not in written

"""Issue 33 item 7: the one redactor removes a configured secret in the forms a provider, a
proxy or a library may echo it: percent-encoded, JSON-escaped, base64.

Unit tests for each form, then a real `clawgate gateway` whose model (FakeLLM on loopback)
answers an error that echoes the API key encoded: the owner's reply, the session file and
the log never hold the key in any form.
"""

from __future__ import annotations

import base64
import json
import re
import signal
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clawgate.kernel import secrets as secrets_module
from clawgate.kernel.secrets import REDACTED, Redactor
from tests.fakes.llm import FakeLLM, error
from tests.fakes.telegram import FakeTelegram
from tests.process import ClawgateProcess, fake_model, fake_telegram, write_config

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

# Not shaped like any known token: only the configured value can catch it.
SECRET = "Zq8/Wx+Tp=Lm4:Rv9@Yb~ü"
SPACED = "Qa7 Hj3/Nk5 Pt8"
OWNER = 1001
READY = "channel telegram ready"
START_TIMEOUT = 30.0
MODEL_TIMEOUT = 90.0
EXIT_TIMEOUT = 25.0


def b64(secret: str, urlsafe: bool = False) -> str:
    raw = secret.encode()
    return (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()


def every_form(secret: str) -> dict[str, str]:
    """The secret as each encoding a library might apply writes it."""
    percent = quote(secret, safe="")
    return {
        "as written": secret,
        "upper case": secret.upper(),
        "percent %2F": percent,
        "percent %2f": percent.lower(),
        "percent, path-safe": quote(secret),  # "/" kept, the rest encoded
        "form, + for space": quote_plus(secret),
        "JSON ascii": json.dumps(secret)[1:-1],
        "JSON \\/": json.dumps(secret)[1:-1].replace("/", "\\/"),
        "JSON every char": "".join(f"\\u{ord(c):04x}" for c in secret),
        "base64": b64(secret),
        "base64 unpadded": b64(secret).rstrip("="),
        "base64 urlsafe": b64(secret, urlsafe=True),
        "base64 urlsafe unpadded": b64(secret, urlsafe=True).rstrip("="),
        "base64, percent-encoded": quote(b64(secret), safe=""),
    }


def leaked(text: str, secret: str) -> list[str]:
    """The forms of `secret` that `text` holds, in any letter case."""
    lowered = text.lower()
    return [name for name, form in every_form(secret).items() if form.lower() in lowered]


@pytest.mark.parametrize("secret", [SECRET, SPACED])
@pytest.mark.parametrize("form", list(every_form(SECRET)))
def test_each_encoded_form_of_a_secret_is_redacted(secret: str, form: str) -> None:
    encoded = every_form(secret)[form]
    redact = Redactor([secret])
    assert redact(f"error: {encoded}; retry") == f"error: {REDACTED}; retry"


def test_encoded_forms_are_redacted_inside_structured_data_and_other_text_is_left() -> None:
    redact = Redactor([SECRET])
    body = json.dumps({"error": {"message": f"bad auth {quote(SECRET, safe='')}"}})
    assert redact(body) == json.dumps({"error": {"message": f"bad auth {REDACTED}"}})
    untouched = "Zq8 and Wx and %2F and dGVzdA== are ordinary"
    assert redact(untouched) == untouched
    assert redact.data({"a": [b64(SECRET)]}) == {"a": [REDACTED]}


PIECES = [
    SECRET,
    SECRET.upper(),
    quote(SECRET, safe=""),
    base64.b64encode(SECRET.encode()).decode(),
    base64.urlsafe_b64encode(SECRET.encode()).decode().rstrip("="),
    json.dumps(SECRET)[1:-1],
    SECRET[: len(SECRET) // 2],
    "%",
    "\\",
    "+",
    "-",
    "_",
    " ",
    "sk-",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES) | st.text(max_size=6), max_size=8))
def test_the_quick_paths_redact_exactly_what_the_full_pattern_does(parts: list[str]) -> None:
    """Text without a "%" or a backslash skips the encoded forms, and text holding no
    secret as written or as bare base64 skips the secrets: neither shortcut may change a
    result."""
    redactor = Redactor([SECRET, "with a space inside"])
    text = "".join(parts)
    assert redactor(text) == redactor._encoded.sub(REDACTED, text)


async def test_an_api_key_echoed_encoded_in_a_provider_error_reaches_no_reply_record_or_log(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeLLM
) -> None:
    echoed = (
        f"bad request from client {quote(SECRET, safe='')} "
        f"({quote(SECRET, safe='').lower()}, {b64(SECRET)}, {json.dumps(SECRET)[1:-1]})"
    )
    fake_llm.handler = lambda body: error(400, echoed)
    config = write_config(
        tmp_path,
        agent={**fake_model(fake_llm), "api_key": SECRET},
        telegram=fake_telegram(telegram, (OWNER,)),
    )
    async with ClawgateProcess(tmp_path, "--config", str(config), "gateway") as gateway:
        await gateway.wait_for_log(READY, START_TIMEOUT)
        telegram.user_says(OWNER, "hello")
        reply = (await telegram.next_message(OWNER, timeout=MODEL_TIMEOUT))["text"]
        gateway.send_signal(signal.SIGTERM)
        assert await gateway.wait(EXIT_TIMEOUT) == 0, gateway.stderr

    assert fake_llm.requests, "the model was never called"
    assert "bad request from client" in reply and REDACTED in reply, reply
    sessions = "\n".join(
        p.read_text("utf-8") for p in (tmp_path / "workspace" / "sessions").glob("*.jsonl")
    )
    log = (tmp_path / "data" / "logs" / "clawgate.log").read_text("utf-8")
    assert "bad request from client" in sessions and "bad request from client" in log
    for where, text in (("reply", reply), ("session", sessions), ("log", log)):
        assert not leaked(text, SECRET), (where, leaked(text, SECRET), text)
    assert not leaked(gateway.stderr, SECRET)


def test_no_token_shape_matches_a_string_shorter_than_the_fast_path_skips() -> None:
    # The redactor returns strings shorter than SHORTEST_SHAPE (and than every secret)
    # untouched without running a pattern: each shape's shortest match must be that long.
    for shape in secrets_module._SHAPES:
        shortest = re._parser.parse(shape).getwidth()[0]  # type: ignore[attr-defined]
        assert shortest >= secrets_module.SHORTEST_SHAPE, shape
    redactor = Redactor(["hunter22"])
    assert redactor("x hunter22") == "x [REDACTED]"
    assert redactor("sk-" + "a" * 16) == "[REDACTED]"

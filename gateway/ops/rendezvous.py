"""Where the running gateway's dashboard is, and proof that a listener is that dashboard.

Any account can listen on a loopback port, the dashboard's included, before the gateway
does. So the gateway's `Dashboard` (gateway/dashboard/server.py) keeps
`<data_dir>/dashboard.json` (0600 in the 0700 data_dir: only the owner reads it) while it
runs: its pid, the address it listens on or the error that keeps it from listening (it
retries), and a random nonce made for this run. Before `clawgate dashboard` prints or opens
a login link, `prove` sends a fresh random challenge to `GET /proof?challenge=...` at the
link's address and expects HMAC-SHA256(nonce, challenge), which only the process holding
the nonce can compute: a squatter on the port gets no link, and the owner's browser is never
sent there. `clawgate status` and `clawgate doctor` show a taken port with its fix
(`describe`).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import os
import secrets
from pathlib import Path
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, ValidationError

RECORD_FILE = "dashboard.json"
PROOF_PATH = "/proof"
PROOF_TIMEOUT_SECONDS = 5.0


class DashboardRecord(BaseModel):
    """What the gateway's dashboard says about itself; `error` set while the port is taken."""

    model_config = ConfigDict(frozen=True)

    pid: int
    host: str
    port: int
    nonce: str
    error: str | None = None

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def record_path(data_dir: Path) -> Path:
    return data_dir / RECORD_FILE


def new_nonce() -> str:
    return secrets.token_hex(32)


def answer(nonce: str, challenge: str) -> str:
    """The proof for `challenge`: what only the holder of `nonce` can compute."""
    return hmac.new(nonce.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def read_record(data_dir: Path) -> DashboardRecord | None:
    """The running gateway's record; None if there is none or its process has ended."""
    try:
        record = DashboardRecord.model_validate_json(record_path(data_dir).read_bytes())
    except (OSError, ValidationError):
        return None
    if record.pid <= 0:  # kill(0, 0) would hit our own group and look alive
        return None
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, another account's: the proof will tell
    return record


def describe(record: DashboardRecord) -> str:
    """One line for `clawgate status` and doctor."""
    if record.error is None:
        return f"dashboard listening on http://{record.address}/"
    return (
        f"dashboard port {record.address} is taken ({record.error}): another process listens "
        "there; stop it or set [dashboard] port to a free port and restart the gateway "
        "(it retries the port meanwhile)"
    )


def prove(record: DashboardRecord, host: str, port: int, *, site: str = "") -> str | None:
    """None when what listens on host:port is the dashboard that wrote `record`; otherwise
    why no login link may be made, in one line. `site` is the host name the dashboard
    answers under (dashboard/auth.site_host), sent as the Host header."""
    if record.error is not None:
        return describe(record)
    challenge = secrets.token_hex(32)
    connection = http.client.HTTPConnection(host, port, timeout=PROOF_TIMEOUT_SECONDS)
    try:
        headers = {"Host": f"{site}:{port}"} if site else {}
        connection.request("GET", f"{PROOF_PATH}?challenge={quote(challenge)}", headers=headers)
        response = connection.getresponse()
        given = response.read(1024).decode("ascii", errors="replace").strip()
        outcome = f"HTTP {response.status}, a wrong proof"
        if response.status == 200 and hmac.compare_digest(given, answer(record.nonce, challenge)):
            return None
    except (OSError, http.client.HTTPException) as exc:
        outcome = f"no answer: {exc}"
    finally:
        connection.close()
    return (
        f"what listens on {host}:{port} is not your gateway's dashboard ({outcome}): no login "
        "link made; see `clawgate status`"
    )

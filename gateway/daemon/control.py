"""The running gateway's local control socket: how `clawgate agent` talks to it.

While a gateway runs it owns the workspace (gateway/daemon/lock.py), so a terminal must not run
turns of its own: it connects to `<data_dir>/control.sock` (0600, in the 0700 data_dir:
only the owner's account reaches it, hence owner trust) and the daemon serves the turn in
the terminal's session, `cli:<name>`, exactly as an in-process terminal would. On the
daemon's side the socket is a channel named "cli", so replies, /stop, /new and delivery
records take the same path as Telegram's. One socket serves every agent of the gateway: a
request names its agent (`clawgate agent --agent NAME`), and the message carries it to the
daemon's routing (`InboundMessage.agent`; absent = the default agent).

Where data_dir is too long for a socket path, the socket goes to a folder only the owner can
create: `$XDG_RUNTIME_DIR/clawgate/`, else `<tmp>/clawgate-<uid>/` - which another account
can make first, so both ends check that the folder belongs to this account and is 0700
before using it; and the terminal reads the listener's uid from the connected socket
(SO_PEERCRED, Linux) before it sends a byte, talking only to its own account's gateway.

The socket is no way around exec's approvals or its sandbox: a connection from a process that
exec started (the gateway among its ancestors, or the per-call mark `EXEC_SCOPE_ID` in an
ancestor's environment; the peer's pid from SO_PEERCRED) is closed unread, and a connection
speaks for the one agent its first line named: a line naming another is refused.

On shutdown `stop` refuses new terminals and takes no more lines, but the open connections
stay writable until `close`, which the gateway calls after its dispatchers have finished or
cancelled their turns and the outbound queue is flushed: a reply finished in the grace
reaches its terminal, and only a terminal whose turn was cancelled (or never started) reads
the end of the connection ("the gateway stopped before answering").

One JSON object per line, both ways:

    terminal -> gateway   {"session": "default", "id": "<uuid>", "text": "...", "sender": "ann",
                           "agent": "work"}, or "choice": "<Choice.id>" for a y/N card answered
    gateway -> terminal   an OutboundMessage (text, is_error, reply_to = the id it answers)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import tempfile
from pathlib import Path

from pydantic import ValidationError

from clawgate.agent.tools.shell import SCOPE_VARIABLE
from clawgate.channels.base import Channel
from clawgate.kernel.bus import InboundMessage, MessageBus, OutboundMessage, Trust
from clawgate.kernel.config import MAIN_AGENT
from clawgate.kernel.errors import ChannelError

log = logging.getLogger(__name__)

SOCKET_NAME = "control.sock"
# sun_path holds 108 bytes on Linux, 104 on macOS (with the terminating NUL).
MAX_SOCKET_PATH = 100
LINE_LIMIT = 4 * 1024 * 1024  # a pasted document is one message
MAX_SESSION_NAME = 200
PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid


def socket_path(data_dir: Path) -> Path:
    """`<data_dir>/control.sock`, or, where that path is too long for a Unix socket, a name
    derived from data_dir in the runtime folder (both sides compute it)."""
    path = data_dir / SOCKET_NAME
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(data_dir.resolve())).hexdigest()[:24]
    return _runtime_folder() / f"{digest}.sock"


def _runtime_folder() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_absolute():
        return Path(runtime) / "clawgate"
    return Path(tempfile.gettempdir()) / f"clawgate-{os.getuid()}"


def check_private_folder(folder: Path) -> None:
    """Raise unless `folder` belongs to this account and no one else may enter it (0700)."""
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ChannelError(
            f"{folder} (the control socket's folder) belongs to another account or is open "
            "to others: remove it, set XDG_RUNTIME_DIR to a private folder, or use a shorter "
            "data_dir"
        )


def _peer(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) at the other end of a Unix socket; None without SO_PEERCRED."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    pid, uid, _ = PEER_CREDENTIALS.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, PEER_CREDENTIALS.size)
    )
    return int(pid), int(uid)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (None where the platform
    has no SO_PEERCRED: the folder check stands alone there)."""
    peer = _peer(sock)
    return None if peer is None else peer[1]


def started_by_exec(pid: int) -> bool:
    """Whether `pid` descends from this gateway (its exec commands are its only
    descendants) or from any process carrying an exec call's mark. The gateway itself is not
    its own descendant (an in-process client)."""
    me, mark = os.getpid(), f"{SCOPE_VARIABLE}=".encode()
    current = pid
    for _ in range(4096):  # a chain, not a cycle; bounded all the same
        try:
            ppid = int(Path(f"/proc/{current}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False  # gone, or no /proc: nothing left to inspect
        with contextlib.suppress(OSError):
            environ = Path(f"/proc/{current}/environ").read_bytes()
            if any(v.startswith(mark) for v in environ.split(b"\0")):
                return True
        if ppid == me and pid != me:
            return True
        if ppid <= 1:
            return False
        current = ppid
    return True


class ControlChannel(Channel):
    """The daemon's end: accepts terminals, publishes what they say as `cli:<name>` owner
    messages and sends each reply back to the terminal that asked (replies that answer no
    particular message - a rate-limit notice, a file - go to every terminal on that agent's
    session; two agents' `cli:default` are different sessions)."""

    name = "cli"

    def __init__(self, bus: MessageBus, data_dir: Path, default_agent: str = MAIN_AGENT) -> None:
        super().__init__(bus)
        self.path = socket_path(data_dir)
        self.default_agent = default_agent
        self._server: asyncio.Server | None = None
        self._by_session: dict[tuple[str, str], set[asyncio.StreamWriter]] = {}
        self._asked: dict[str, asyncio.StreamWriter] = {}
        self._stopping = False

    async def start(self) -> None:
        self._stopping = False
        if self.path.name != SOCKET_NAME:  # the runtime folder: check who made it
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            check_private_folder(self.path.parent)
        # Whoever starts this holds the instance lock: a file left here is a dead gateway's.
        self.path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Created 0600 from the start, not chmod-ed after a moment of being open to others.
        # Only tightens: whatever another thread creates meanwhile sets its own mode.
        umask = os.umask(0o077)
        try:
            sock.bind(str(self.path))
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(umask)
        os.chmod(self.path, 0o600)
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=LINE_LIMIT)
        log.info("control socket listening on %s", self.path)

    async def stop(self) -> None:
        """Refuse new terminals and stop reading; the open connections stay writable, so a
        turn the dispatcher finishes in the shutdown grace still reaches the terminal that
        asked. `close` ends them once the last replies have gone out."""
        if self._server is None:
            return
        self._stopping = True
        self._server.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    async def close(self) -> None:
        """End every open connection: a terminal still waiting sees the gateway stop before
        answering, which is now true (its turn was cancelled or never started)."""
        if self._server is None:
            return
        server, self._server = self._server, None
        for writers in list(self._by_session.values()):
            for writer in list(writers):
                writer.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), timeout=2)

    async def send(self, message: OutboundMessage) -> None:
        asker = self._asked.pop(message.reply_to, None) if message.reply_to else None
        key = (message.agent or self.default_agent, message.chat_id)
        targets = [asker] if asker is not None else list(self._by_session.get(key, ()))
        targets = [writer for writer in targets if not writer.is_closing()]
        if not targets:
            raise ChannelError("the terminal that asked has disconnected")
        line = message.model_dump_json().encode() + b"\n"
        for writer in targets:
            writer.write(line)
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer(writer.get_extra_info("socket"))
        if peer is not None and await asyncio.to_thread(started_by_exec, peer[0]):
            log.warning("control socket: refused pid %d, started by an exec command", peer[0])
            writer.close()
            return
        sessions: set[tuple[str, str]] = set()
        bound: str | None = None  # the agent this connection named first
        try:
            while line := await reader.readline():
                request = _parse(line)
                if request is None:
                    log.warning("control socket: ignoring a malformed line")
                    continue
                if self._stopping:
                    log.warning("control socket: the gateway is stopping; a message not taken")
                    continue
                session, message_id, text, sender, agent, choice = request
                bound = bound or agent or self.default_agent
                if (agent or self.default_agent) != bound:
                    await self._refuse(writer, message_id, session, bound)
                    continue
                key = (agent or self.default_agent, session)
                sessions.add(key)
                self._by_session.setdefault(key, set()).add(writer)
                if choice is None:  # a pressed button is answered by a notice, not a reply
                    self._asked[message_id] = writer
                await self.bus.publish_inbound(
                    InboundMessage(
                        channel=self.name,
                        chat_id=session,
                        message_id=message_id,
                        sender_id="local",
                        sender_name=sender,
                        text=text,
                        trust=Trust.OWNER,
                        mentioned=True,
                        agent=agent,
                        choice=choice,
                    )
                )
        except (ConnectionError, ValueError) as exc:  # ValueError: a line over the limit
            log.warning("control socket: connection dropped: %s", exc)
        finally:
            for key in sessions:
                writers = self._by_session.get(key, set())
                writers.discard(writer)
                if not writers:
                    self._by_session.pop(key, None)
            for message_id in [k for k, w in self._asked.items() if w is writer]:
                del self._asked[message_id]
            writer.close()

    async def _refuse(
        self, writer: asyncio.StreamWriter, message_id: str, session: str, bound: str
    ) -> None:
        text = f"this connection talks to agent {bound!r}; open another for a different agent"
        reply = OutboundMessage(
            channel=self.name, chat_id=session, text=text, reply_to=message_id, is_error=True
        )
        writer.write(reply.model_dump_json().encode() + b"\n")
        with contextlib.suppress(ConnectionError):
            await writer.drain()


def _parse(line: bytes) -> tuple[str, str, str, str, str | None, str | None] | None:
    try:
        body = json.loads(line)
        session, message_id = str(body["session"]), str(body["id"])
        text, sender = str(body.get("text", "")), str(body.get("sender") or "owner")
        agent = str(body["agent"]) if body.get("agent") else None
        choice = str(body["choice"]) if body.get("choice") else None
    except (ValueError, KeyError, TypeError):
        return None
    if not session or len(session) > MAX_SESSION_NAME or not message_id:
        return None
    if choice is None and "text" not in body:
        return None
    return session, message_id, text, sender, agent, choice


class ControlClient:
    """The terminal's end: a `TerminalLink` (channels/terminal.py) over the socket."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        session: str,
        agent: str | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.session = session
        self.agent = agent

    @classmethod
    async def connect(
        cls, data_dir: Path, session: str, agent: str | None = None
    ) -> ControlClient | None:
        """A connection to the gateway running on `data_dir` (the whole config's, not an
        agent's), talking to `agent` (None: the default one), or None if none listens.
        Raises ChannelError, having sent nothing, when the socket's folder or the process
        listening on it belongs to another account."""
        path = socket_path(data_dir)
        try:
            if path.name != SOCKET_NAME:
                check_private_folder(path.parent)
            reader, writer = await asyncio.open_unix_connection(str(path), limit=LINE_LIMIT)
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        uid = peer_uid(writer.get_extra_info("socket"))
        if uid not in (None, os.getuid()):
            writer.close()
            await writer.wait_closed()
            raise ChannelError(
                f"{path} is served by another account (uid {uid}), not your gateway: "
                "nothing was sent; remove it and restart the gateway"
            )
        return cls(reader, writer, session, agent)

    async def say(self, text: str, message_id: str, sender: str) -> None:
        await self._send(
            {"session": self.session, "id": message_id, "text": text, "sender": sender}
        )

    async def _send(self, request: dict[str, str]) -> None:
        if self.agent is not None:
            request["agent"] = self.agent
        line = json.dumps(request)
        try:
            self._writer.write(line.encode() + b"\n")
            await self._writer.drain()
        except ConnectionError as exc:
            raise ChannelError(f"lost the connection to the gateway: {exc}") from None

    async def choose(self, choice: str, message_id: str) -> None:
        await self._send({"session": self.session, "id": message_id, "choice": choice})

    async def next_reply(self) -> OutboundMessage:
        try:
            line = await self._reader.readline()
        except (ConnectionError, ValueError) as exc:
            raise ChannelError(f"lost the connection to the gateway: {exc}") from None
        if not line:
            raise ChannelError("the gateway stopped before answering")
        try:
            return OutboundMessage.model_validate_json(line)
        except ValidationError:
            raise ChannelError("the gateway sent something this version cannot read") from None

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()

"""A private PostgreSQL for the cluster tests: a copy of one initdb'd template in a temp
folder, a free loopback port, trust authentication on 127.0.0.1 only, stopped at the end. As
root (CI), the server runs as a system user made for it, since PostgreSQL refuses to run as
root. The binaries come from the distribution's package (/usr/lib/postgresql/<version>/bin),
else from PATH."""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

SERVER_USER = "clawgate-pg"
INITDB_OPTIONS = ("--auth=trust", "--no-sync", "-E", "UTF8", "--wal-segsize=1")


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivatePostgres:
    """`start()`, `url(database)`, `create_database()`, `pause()`/`resume()`, `stop()`."""

    def __init__(self) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self._bin = bin_dir
        self._root = Path(tempfile.mkdtemp(prefix="clawgate-pg-"))
        self.data = self._root / "data"
        self.port = _free_port()
        self._count = 0
        self._as: list[str] = []
        if os.getuid() == 0:
            try:
                pwd.getpwnam(SERVER_USER)
            except KeyError:
                subprocess.run(
                    [
                        "useradd",
                        "--system",
                        "--no-create-home",
                        "--shell",
                        "/bin/false",
                        SERVER_USER,
                    ],
                    check=True,
                )
            shutil.chown(self._root, SERVER_USER)
            self._as = ["runuser", "-u", SERVER_USER, "--"]

    def _run(self, *args: str) -> None:
        subprocess.run(
            [*self._as, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    def start(self) -> None:
        if not self.data.exists():
            self._run("cp", "-a", str(self._template()), str(self.data))
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self._root} "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            str(self._bin / "pg_ctl"), "-D", str(self.data), "-o", options,
            "-l", str(self._root / "log"), "-w", "-t", "60", "start",
        )  # fmt: skip

    def _template(self) -> Path:
        """An initdb'd data folder for these binaries, made once for every server of every
        test process (each initdb costs ~0.4 s of CPU, and a suite starts seven servers) and
        copied for each. Its WAL segments are 1 MB, not 16: the copy is 28 MB, not 39."""
        made_by = f"{self._bin}:{os.getuid()}:{INITDB_OPTIONS}"
        key = hashlib.sha256(made_by.encode()).hexdigest()[:12]
        folder = Path(tempfile.gettempdir()) / f"clawgate-pg-template-{key}"
        with open(f"{folder}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / "PG_VERSION").exists():
                shutil.rmtree(folder, ignore_errors=True)
                # Made aside and renamed into place: a failed initdb leaves no template.
                made = Path(tempfile.mkdtemp(prefix="clawgate-pg-initdb-"))
                try:
                    if self._as:
                        shutil.chown(made, SERVER_USER)
                    self._run(
                        str(self._bin / "initdb"), "-D", str(made / "data"), "-U", "postgres",
                        *INITDB_OPTIONS,
                    )  # fmt: skip
                    (made / "data").rename(folder)
                finally:
                    shutil.rmtree(made, ignore_errors=True)
        return folder

    def stop(self) -> None:
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new empty database; its URL."""
        self._count += 1
        name = f"t{os.getpid()}_{self._count}"
        subprocess.run(
            [shutil.which("psql") or str(self._bin / "psql"),
             "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-q",
             "-c", f"CREATE DATABASE {name}"],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        return self.url(name)

    def remove(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self._root, ignore_errors=True)

"""The Python that xdist starts its workers with, under the suite's zygote (tests/zygote.py).

Run as `python -I -S fork_python.py ARGS...`, it stands for `python ARGS...`: it hands its
standard streams, environment, working directory and arguments to the zygote, which forks a
child that has pytest, the suite's libraries and the gateway imported already (each worker
would otherwise spend ~1.6 s of CPU importing them), then it waits for that child and exits
as it did. Signals it gets are passed on to the child. Without a zygote to answer (none
named, or gone), it execs the real interpreter instead.

Standard library only, and no site: it costs a few milliseconds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from typing import NoReturn

# The shared zygote's socket (tests/forked.py SHARED; not imported: no site here).
SHARED = "PYTEST_CLAWGATE_ZYGOTE"


PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(args: list[str]) -> NoReturn:
    path = os.environ.get(SHARED)
    # Held from before the fork until the handlers below are in place: the child may already
    # have said it is ready, and been signalled, by then (and the signal would end this
    # launcher alone, leaving the child running).
    signal.pthread_sigmask(signal.SIG_BLOCK, PASSED_ON)
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        if not path:
            raise OSError("no zygote")
        connection.connect(path)
        request = {"args": args, "env": dict(os.environ), "cwd": os.getcwd(), "python": True}
        socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
        message, fds, _, _ = socket.recv_fds(connection, 4096, 1)
        if not message or len(fds) != 1:
            raise OSError("the zygote did not fork")
    except OSError:
        connection.close()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)
        os.execv(sys.executable, [sys.executable, *args])
    pidfd = fds[0]
    # The child alone holds the streams now: it ends, its reader sees the end.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)

    def pass_on(number: int, _frame: object) -> None:
        try:
            signal.pidfd_send_signal(pidfd, number)
        except ProcessLookupError:
            pass

    for number in PASSED_ON:
        signal.signal(number, pass_on)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, PASSED_ON)
    message = connection.recv(4096)
    code = int(json.loads(message)["exit"]) if message else -signal.SIGKILL
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    main(sys.argv[1:])

"""A `clawgate` with its modules already imported, forked for each test child.

The suite starts ~250 `clawgate` children, and importing the gateway costs each ~0.75 s of
CPU: most of the suite's time on a 2-core machine. This script imports what the console
script imports, fills the product's once-a-process caches (`warm`), then forks a child per
request. The child takes the request's stdin/stdout/stderr, working directory, environment
and arguments, and runs the console script's `main()` as `.venv/bin/clawgate` would: its own
pid and process, real signals and kill -9, and an interpreter exit without the module
teardown (`exit_without_teardown`).

What a fork cannot give, and which tests therefore start a real process: /proc/<pid>/environ
and /proc/<pid>/cmdline show this script's (they are fixed at exec), an LD_PRELOAD (libfaketime)
takes no effect, and every child shares one hash seed.

The xdist controller starts one for all its workers, or a test process its own
(tests/forked.py); it serves until its stdin ends. The controller's (--workers) imports
pytest and the suite's libraries as well, and forks xdist's workers themselves
(tests/fork_python.py): a request with "python" runs `python ARGS` (`run_python`), not
`clawgate ARGS`. It also forks a twin of itself before serving, which imports litellm too and
then serves, on a socket of its own, the children whose model goes through litellm
(`import_litellm`).

Protocol (SOCK_SEQPACKET on a Unix socket): the client sends one JSON request {"args", "env",
"cwd", "terminal", "python"} with three descriptors (stdin, stdout, stderr; with "terminal",
one pseudo-terminal's for all three, made the child's controlling terminal); it receives
{"pid"} with a pidfd (to signal the child with no risk of a reused pid), then {"exit"} (the
code, or minus the signal number) when the child ends.
"""

from __future__ import annotations

import atexit
import fcntl
import gc
import importlib
import io
import json
import os
import selectors
import signal
import socket
import sys
import termios
import threading
import time
import types
from pathlib import Path
from typing import Any, NoReturn

from clawgate.gateway.cli import main as clawgate_main
from clawgate.gateway.dashboard.server import PAGE_MODULES

# What `clawgate gateway` imports on its way to serving (the bulk of a child's start).
import clawgate.gateway.app  # noqa: F401  isort: skip

# What the children import later, inside functions (found by listing the modules each child
# of a whole suite run imported after its fork): the channels' libraries, numpy and the
# tokenizer library, the scheduler, the dashboard's pages, onboarding, the cluster. ~0.35 s
# of CPU a gateway child; httpcore (with trio where installed), which httpx imports when
# python-telegram-bot makes its first client, ~0.25 s more. Only imports here; `warm` below
# fills the product's own once-a-process caches, and nothing is started (the thread check).
LATER = (
    # anyio loads its parts lazily, at httpcore's first request in each child.
    "anyio._backends._asyncio",
    "anyio._core._eventloop",
    "anyio._core._sockets",
    "anyio._core._streams",
    "anyio._core._synchronization",
    "anyio._core._tasks",
    "anyio.abc",
    "anyio.lowlevel",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "apscheduler.schedulers.asyncio",
    "apscheduler.triggers.interval",
    "asyncpg",
    "clawgate.agent.llm.providers",
    "clawgate.agent.memory.audit",
    "clawgate.agent.tools.mcp_tools",
    "clawgate.channels.discord.adapter",
    "clawgate.channels.telegram.adapter",
    "clawgate.channels.terminal",
    "clawgate.gateway.cli.agent",
    "clawgate.gateway.cli.moving",
    "clawgate.gateway.cli.onboard",
    "clawgate.gateway.cli.serve",
    "clawgate.gateway.cluster.status",
    "clawgate.gateway.ops.doctor",
    "clawgate.gateway.setup.onboard",
    "clawgate.gateway.worker",
    "configparser",
    "discord",
    "encodings.idna",
    "encodings.unicode_escape",
    "getpass",
    "httpcore",
    "importlib.readers",
    "importlib.resources.readers",
    "numpy",
    "pydantic._internal._dataclasses",
    "rich.console",
    "rich.table",
    "telegram",
    "telegram.error",
    "telegram.request",
    "tokenizers",
    "tomlkit",
    "typer._adapters",
    "typer._click.decorators",
)
for name in LATER:
    importlib.import_module(name)
for page in PAGE_MODULES:
    importlib.import_module(f"clawgate.gateway.dashboard.{page}")

# With --workers (the xdist controller's zygote), xdist's workers are forked from it too
# (tests/fork_python.py): what each of them imports before its first test beyond the gateway's
# modules above, pytest with its plugins and the suite's libraries (found by listing a worker's
# modules after collection). ~1.6 s of CPU a worker.
WORKER_MODULES = (
    "_hypothesis_pytestplugin",
    "aiohttp.test_utils",
    "anyio.pytest_plugin",
    "click.testing",
    "execnet",
    "hypothesis.strategies",
    "pdb",
    "pygments.formatters.terminal",
    "pygments.lexers.diff",
    "pygments.lexers.python",
    "pytest",
    "pytest_asyncio.plugin",
    "rich.progress",
    "rich.syntax",
    "selenium.webdriver",
    "selenium.webdriver.common.keys",
    "trio.testing",
    "typer.testing",
    "unittest.mock",
    "xdist.plugin",
    "xdist.remote",
    "xml.etree.ElementTree",
)


def import_worker_modules() -> None:
    from _pytest.config import default_plugins

    for name in (*WORKER_MODULES, *(f"_pytest.{plugin}" for plugin in default_plugins)):
        importlib.import_module(name)


# The same trust store, CLI commands, tool schemas, templates and embedder every child would
# build or load for itself, each kept by the product once a process: ~0.15 s of CPU a child.
TLS_SETTINGS = ("SSL_CERT_FILE", "SSL_CERT_DIR")


def warm() -> None:
    """Fills the product's own once-a-process caches. No thread starts: the tokenizer's pool
    starts at its first batch, which no child shares with this process."""
    from pydantic import BaseModel

    from clawgate.agent.memory.embeddings import StaticEmbedder, default_embedder
    from clawgate.agent.tools.base import Tool, _schema_text
    from clawgate.gateway.cli.root import COMMANDS, load
    from clawgate.gateway.dashboard.render import environment
    from clawgate.kernel.net import tls_context

    tls_context()
    for command in COMMANDS:
        load(command)
    templates = environment()
    for name in templates.list_templates():
        templates.get_template(name)
    embedder = default_embedder()
    if isinstance(embedder, StaticEmbedder):
        embedder._load()
    tools: list[type[Any]] = [Tool]
    while tools:
        tool = tools.pop()
        tools.extend(tool.__subclasses__())
        params = getattr(tool, "Params", None)
        if isinstance(params, type) and issubclass(params, BaseModel):
            _schema_text(params)


def serve(path: str, clawgate: str, *, twin: bool = False) -> dict[str, Any]:
    """Forks a child per request; returns only in a child, with its request. The litellm
    twin's socket gets its name only once it listens: a client that finds it can connect."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind(f"{path}.binding" if twin else path)
        listener.listen(64)
        if twin:
            os.rename(f"{path}.binding", path)
    except FileNotFoundError:
        if not twin:
            raise
        sys.exit(0)  # a short run ended, and removed the zygote's folder, before it was ready
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    # Its starter holds the other end of stdin: at its end, however it ended, this ends too.
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ)
    waiting: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, connection)
    if not twin:
        print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.fd == sys.stdin.fileno():
                if not os.read(key.fd, 4096):
                    sys.exit(0)
            elif key.fileobj is listener:
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, 1 << 20, 3)
                if not message or len(fds) != 3:
                    connection.close()
                    for fd in fds:
                        os.close(fd)
                    continue
                request = json.loads(message)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    listener.close()
                    connection.close()
                    for pidfd, (_, other) in waiting.items():
                        os.close(pidfd)
                        other.close()
                    _become(request, fds, clawgate)
                    return request
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                try:
                    socket.send_fds(connection, [json.dumps({"pid": pid}).encode()], [pidfd])
                except OSError:
                    pass
                waiting[pidfd] = (pid, connection)
                selector.register(pidfd, selectors.EVENT_READ)
            else:
                pidfd = int(key.fd)
                pid, connection = waiting.pop(pidfd)
                selector.unregister(pidfd)
                os.close(pidfd)
                _, status = os.waitpid(pid, 0)
                try:
                    connection.send(
                        json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode()
                    )
                except OSError:
                    pass  # the test is gone
                connection.close()


def import_litellm() -> None:
    """The twin: this zygote forked before serving, with litellm imported too (~3-4 s of
    CPU), which a child whose model goes through litellm (the OpenAI reasoning models, any
    provider without a direct path) would otherwise import for itself; its tests ask for it
    (tests/forked.py `LITELLM`). A twin, not more imports here: the workers are forked from
    this one and would wait for the import, and every other child would be forked from a
    process 150 MB larger (~3 ms more CPU a fork, and more at its exit)."""
    from clawgate.agent.llm.litellm_path import import_litellm as load

    threads = len(os.listdir("/proc/self/task"))  # one: a fork keeps its own thread alone
    load()
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != threads:
        sys.exit("importing litellm started a thread: forking would copy it half-way")
    gc.collect()
    gc.freeze()


def exit_without_teardown(status: object) -> NoReturn:
    """What the interpreter's exit does that a test can see, as it does it: non-daemon threads
    joined, atexit handlers run (logging's flush among them), the status printed unless it is a
    number, the standard streams flushed. Not the module teardown after them, which writes to
    every object's reference count and so makes each page the child shares with this process
    its own: ~14k page faults and ~75 ms of CPU a child, ~15 s a suite run. Only SystemExit
    comes here; any other exception takes the interpreter's own way out."""
    if status is None:
        code = 0
    elif isinstance(status, int):
        code = status
    else:
        print(status, file=sys.stderr)
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # what Py_FinalizeEx calls first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: the interpreter ignores it at exit too
    os._exit(code & 0xFF)


def _become(request: dict[str, Any], fds: list[int], clawgate: str) -> None:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    if request.get("terminal"):
        # As a terminal's login does: a session of its own, with the terminal as its
        # controlling one, so that Ctrl-C there is a SIGINT to this child alone.
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    os.chdir(request["cwd"])
    before = [os.environ.get(name) for name in TLS_SETTINGS]
    os.environ.clear()
    os.environ.update(request["env"])
    if [os.environ.get(name) for name in TLS_SETTINGS] != before:
        from clawgate.kernel.net import tls_context

        tls_context.cache_clear()
    time.tzset()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = [clawgate, *request["args"]]
    sys.path[0] = str(Path(clawgate).parent)


def run_python(args: list[str]) -> NoReturn:
    """What `python [-u] [-B] -c CODE [ARG...]` would do (execnet starts each xdist worker
    so); any other command line is exec'd."""
    at = args.index("-c") if "-c" in args else len(args)
    flags = args[:at]
    if at + 1 >= len(args) or not set(flags) <= {"-u", "-B"}:
        os.execv(sys.executable, [sys.executable, *args])
    code = args[at + 1]
    sys.argv = ["-c", *args[at + 2 :]]
    sys.path[0] = ""
    if "-B" in flags:
        sys.dont_write_bytecode = True
    # New streams on the request's descriptors, unbuffered with -u, as the interpreter makes
    # them (the old ones stay open: sys.__stdin__ and the others hold them).
    encoding = sys.stdout.encoding
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding)
    unbuffered = "-u" in flags
    for name, errors in (("stdout", "strict"), ("stderr", "backslashreplace")):
        raw = io.FileIO(1 if name == "stdout" else 2, "w", closefd=False)
        binary = raw if unbuffered else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            binary,
            encoding,
            errors,
            line_buffering=unbuffered or name == "stderr",
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
        status: object = 0
    except SystemExit as done:
        status = done.code
    exit_without_teardown(status)


if __name__ == "__main__":
    socket_path, console_script = sys.argv[1], sys.argv[2]
    if "--workers" in sys.argv[3:]:
        import_worker_modules()
    if threading.active_count() != 1:
        sys.exit("the imports started a thread: forking would copy it half-way")
    # Native threads too: numpy's BLAS pool (fork-safe, it has its own handlers) is the one
    # expected; the tokenizer's would not be.
    native = len(os.listdir("/proc/self/task"))
    warm()
    if len(os.listdir("/proc/self/task")) != native:
        sys.exit("warming the caches started a thread: forking would copy it half-way")
    # Imported modules live as long as the child: the collector need not walk them, and not
    # walking them keeps their pages shared with this process.
    gc.collect()
    gc.freeze()
    twin = "--workers" in sys.argv[3:] and os.fork() == 0
    if twin:
        import_litellm()
        socket_path = f"{socket_path}.litellm"  # tests/forked.py `litellm_twin`
    request = serve(socket_path, console_script, twin=twin)
    if request.get("python"):
        run_python(request["args"])
    try:
        clawgate_main()
        status: object = 0
    except SystemExit as done:
        status = done.code
    exit_without_teardown(status)

"""Where the test suite's time goes: wall time, CPU time, and per phase and file.

Runs the README's test command (`python -m pytest`, its options from pyproject.toml) with this
module loaded as a pytest plugin in every xdist worker, then prints:

- wall time and CPU time (user + sys) of the whole process tree: pytest, its workers, every
  child they start (gateway subprocesses, Chromium, PostgreSQL). This process makes itself the
  tree's subreaper, so a daemon that outlives its parent (a forked postmaster) is counted too;
- per worker: process start to collected (interpreter, imports, conftest, collection) and
  collection alone, the sum of its tests' setup/call/teardown, its own and its children's CPU,
  and when it finished (a worker done long before the last one is an idle core);
- summed test durations by phase, and the costliest test files by wall and by CPU.

CPU per test is the worker's own CPU plus that of the children it waited for during the test;
a browser or database shared across tests is charged to the test that stopped it, and the
`clawgate` children a worker's zygote forked (tests/forked.py) to the zygote, at the end.

Run: python bench/suite_time.py [--top N] [-- PYTEST_ARGS...]
(the suite's output goes to build/suite_time/pytest.log)
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUT_ENV = "SUITE_TIME_DIR"
PR_SET_CHILD_SUBREAPER = 36
PHASES = ("setup", "call", "teardown")


# -- the plugin, loaded in each pytest process (`-p suite_time`) ------------------------------


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _process_started() -> float:
    """This process's start, as a Unix time (from /proc: field 22 of stat, ticks since boot)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


class _Recorder:
    def __init__(self) -> None:
        self.started = _process_started()
        self.collection_start = 0.0
        self.collected = 0.0
        self.phases: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
        self.tests: dict[str, dict[str, float]] = {}

    def write(self, folder: Path) -> None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        record = {
            "worker": worker,
            "started": self.started,
            "collection_start": self.collection_start,
            "collected": self.collected,
            "finished": time.time(),
            "cpu_self": _cpu(resource.RUSAGE_SELF),
            "cpu_children": _cpu(resource.RUSAGE_CHILDREN),
            "phases": self.phases,
            "tests": self.tests,
        }
        (folder / f"{worker}.json").write_text(json.dumps(record), encoding="utf-8")


_recorder = _Recorder()


def pytest_collection(session: pytest.Session) -> None:
    _recorder.collection_start = time.time()


def pytest_collection_finish(session: pytest.Session) -> None:
    _recorder.collected = time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, Any, None]:
    start = time.time()
    wall, cpu = time.perf_counter(), _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)
    yield
    _recorder.tests[item.nodeid] = {
        "start": start,
        "wall": time.perf_counter() - wall,
        "cpu": _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN) - cpu,
    }


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when in PHASES:
        _recorder.phases[report.nodeid][report.when] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get(OUT_ENV)
    if folder:
        _recorder.write(Path(folder))


# -- the runner --------------------------------------------------------------------------------


def _children() -> dict[int, tuple[str, str]]:
    """This process's children: pid -> (name, state) from /proc (a zombie keeps its name)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            head, tail = (proc / "stat").read_text().rsplit(")", 1)
        except OSError:
            continue
        fields = tail.split()
        if int(fields[1]) == os.getpid():
            found[int(proc.name)] = (head.split("(", 1)[1], fields[0])
    return found


def reap_orphans(patience: float = 10.0) -> tuple[dict[str, list[float]], list[str]]:
    """Reaps what the suite left to this subreaper (daemons, processes whose parent died
    first): ({name: [count, CPU seconds]}, names of those still running after `patience`)."""
    reaped: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    deadline = time.monotonic() + patience
    while (children := _children()) and time.monotonic() < deadline:
        zombies = {pid: name for pid, (name, state) in children.items() if state == "Z"}
        if not zombies:
            time.sleep(0.1)
        for pid, name in zombies.items():
            _, _, usage = os.wait4(pid, 0)
            reaped[name][0] += 1
            reaped[name][1] += usage.ru_utime + usage.ru_stime
    return dict(reaped), [name for name, _ in _children().values()]


class Run:
    """One run of the suite's whole process tree: exit code, wall time, CPU time (user, sys)
    of every process in it that ended, and what was left to the subreaper."""

    def __init__(self, pytest_args: list[str], out: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        env = dict(os.environ)
        env[OUT_ENV] = str(out)
        bench = str(ROOT / "bench")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [bench, env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-p", "suite_time", *pytest_args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        with (out / "pytest.log").open("wb") as log:
            done = subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.code = done.returncode
        self.wall = time.perf_counter() - start
        self.orphans, self.left_running = reap_orphans()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.user = after.ru_utime - before.ru_utime
        self.system = after.ru_stime - before.ru_stime


def _by_file(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    files: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for record in records:
        for nodeid, cost in record["tests"].items():
            name = nodeid.split("::", 1)[0]
            files[name]["wall"] += cost["wall"]
            files[name]["cpu"] += cost["cpu"]
            files[name]["tests"] += 1
    return files


def _load(out: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(the xdist controller's record or None, the records of the processes that ran tests)."""
    records = sorted(
        (json.loads(path.read_text(encoding="utf-8")) for path in out.glob("*.json")),
        key=lambda record: record["worker"],
    )
    workers = [record for record in records if record["worker"] != "main"]
    main = next((record for record in records if record["worker"] == "main"), None)
    return (main, workers) if workers else (None, records)


def report(run: Run, out: Path, top: int) -> None:
    log = (out / "pytest.log").read_text(encoding="utf-8", errors="replace").splitlines()
    summary = next((line for line in reversed(log) if line.strip()), "(no output)")
    cpu = run.user + run.system
    print(f"pytest exit {run.code}: {summary.strip()}")
    print(f"wall {run.wall:7.1f} s   CPU {cpu:7.1f} s (user {run.user:.1f}, sys {run.system:.1f})")
    controller, records = _load(out)
    if not records:
        print("no records from pytest (did it start?)")
        return
    t0 = min(record["started"] for record in [*records, *filter(None, [controller])])
    print("\nper test process (s; start, collected, done: from the first process's start;")
    print("cpu outside tests: start-up, collection, session fixtures' teardown):")
    print("  process  start  collected  collect  tests   setup    call  teardown    cpu  children")
    print(
        "                                                                     outside tests  done"
    )
    for record in records:
        sums = {ph: sum(item[ph] for item in record["phases"].values()) for ph in PHASES}
        own = record["cpu_self"] + record["cpu_children"]
        in_tests = sum(test["cpu"] for test in record["tests"].values())
        print(
            f"  {record['worker']:<6} {record['started'] - t0:6.1f}"
            f" {record['collected'] - t0:10.1f} {record['collected'] - record['collection_start']:8.1f}"
            f" {len(record['tests']):6d} {sums['setup']:7.1f} {sums['call']:7.1f}"
            f" {sums['teardown']:9.1f} {record['cpu_self']:6.1f} {record['cpu_children']:9.1f}"
            f" {own - in_tests:7.1f} {record['finished'] - t0:5.1f}"
        )
    if controller is not None:
        print(f"  xdist controller's own CPU: {controller['cpu_self']:.1f} s")
    orphan_cpu = sum(cpu for _, cpu in run.orphans.values())
    named = ", ".join(
        f"{name} x{int(count)} {cpu:.1f} s"
        for name, (count, cpu) in sorted(run.orphans.items(), key=lambda pair: -pair[1][1])
    )
    print(f"  left to the subreaper: {orphan_cpu:.1f} s CPU ({named or 'none'})")
    for name in run.left_running:
        print(f"  still running after the suite: {name}")
    totals = {
        phase: sum(item[phase] for record in records for item in record["phases"].values())
        for phase in PHASES
    }
    in_tests = sum(test["cpu"] for record in records for test in record["tests"].values())
    print(
        "\nsummed test durations: "
        + ", ".join(f"{phase} {totals[phase]:.1f} s" for phase in PHASES)
        + f" = {sum(totals.values()):.1f} s; CPU in tests {in_tests:.1f} s"
    )
    files = _by_file(records)
    for key in ("cpu", "wall"):
        print(f"\ncostliest files by {key} (summed over their tests):")
        for name, cost in sorted(files.items(), key=lambda pair: -pair[1][key])[:top]:
            print(
                f"  {cost[key]:6.1f} s  {name} ({int(cost['tests'])} tests,"
                f" wall {cost['wall']:.1f}, cpu {cost['cpu']:.1f})"
            )
    tests = [(nodeid, cost) for record in records for nodeid, cost in record["tests"].items()]
    print("\nlongest tests (wall):")
    for nodeid, cost in sorted(tests, key=lambda pair: -pair[1]["wall"])[:top]:
        print(f"  {cost['wall']:6.1f} s  cpu {cost['cpu']:5.1f}  {nodeid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=15, help="files and tests listed")
    parser.add_argument("pytest_args", nargs="*", help="after --, passed to pytest")
    args = parser.parse_args()
    out = ROOT / "build" / "suite_time"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    run = Run(args.pytest_args, out)
    report(run, out, args.top)
    sys.exit(run.code)


if __name__ == "__main__":
    main()

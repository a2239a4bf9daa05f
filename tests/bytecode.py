"""Where the suite's bytecode goes, and compiling it once for all the test processes.

With PYTHONDONTWRITEBYTECODE set, bytecode goes under build/pycache (PYTHONPYCACHEPREFIX)
instead of nowhere; the prefix would hide what pip compiled beside site-packages, which is
linked in; our modules and the test modules' rewritten asserts are compiled by xdist's
controller before its workers start, instead of by each of them at once.
"""

from __future__ import annotations

import compileall
import hashlib
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BYTECODE_CACHE = ROOT / "build" / "pycache"


def keep_bytecode_out_of_the_tree() -> None:
    """With PYTHONDONTWRITEBYTECODE set, every Python the suite starts (xdist workers, ~250
    `clawgate` children) would compile its modules from source again, and each worker would
    rewrite the asserts of every test module again (~4 s CPU of its collection). Bytecode is
    written instead under build/pycache (PYTHONPYCACHEPREFIX): still none beside the sources.
    Runs in the controller before it starts the workers, which inherit the environment."""
    if not sys.dont_write_bytecode or sys.pycache_prefix:
        return
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(BYTECODE_CACHE)
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(BYTECODE_CACHE)
    link_installed_bytecode()
    compile_our_sources()


def link_installed_bytecode() -> None:
    """The prefix hides the bytecode that pip and the interpreter's installer compiled beside
    the standard library and site-packages, so a new checkout would compile all of it again,
    in every worker at once (~30 s of CPU a run): it is linked into the prefix instead, once
    (a link each, or a copy across file systems)."""
    entries = [Path(os.path.abspath(p)) for p in dict.fromkeys(sys.path) if p]
    # Ours (the checkout) is compiled under the prefix.
    entries = [entry for entry in entries if entry != ROOT and entry.is_dir()]
    key = hashlib.sha256("\n".join(map(str, entries)).encode()).hexdigest()[:16]
    done = BYTECODE_CACHE / f"installed-{sys.implementation.cache_tag}-{key}"
    if done.exists():
        return
    tag = f".{sys.implementation.cache_tag}.pyc"
    for entry in entries:
        for cache in entry.rglob("__pycache__"):
            for compiled in cache.glob(f"*{tag}"):
                source = cache.parent / (compiled.name.removesuffix(tag) + ".py")
                _link(compiled, Path(importlib.util.cache_from_source(str(source))))
    done.parent.mkdir(parents=True, exist_ok=True)
    done.touch()


def rewrite_test_modules(config: pytest.Config) -> None:
    """Each test module's asserts rewritten and cached once, here, before the workers start:
    on a new checkout each of them did it at once for every module (~4 s of CPU a worker).
    This uses pytest's own rewriting (private names of the pinned pytest, the same calls its
    import hook makes); without them, or with bytecode off, the workers rewrite as before."""
    if sys.dont_write_bytecode:
        return
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for source in sorted(Path(__file__).parent.glob("test_*.py")):
            cache = rewrite.get_cache_dir(source)
            pyc = cache / (source.name.removesuffix(".py") + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc) is None and rewrite.try_makedirs(cache):
                source_hash, code = rewrite._rewrite_test(source, config)
                rewrite._write_pyc(state, code, source_hash, pyc)
    except (ImportError, AttributeError, KeyError):
        return


def compile_our_sources() -> None:
    """Once here, not by each worker at the same time. Test modules are left to pytest, which
    compiles them with its asserts rewritten."""
    skip = re.compile(r"(^|/)(test_[^/]*|conftest)\.py$")
    for folder in OUR_FOLDERS:
        compileall.compile_dir(ROOT / folder, quiet=1, rx=skip)


OUR_FOLDERS = ("kernel", "agent", "channels", "gateway", "tests")


def _link(compiled: Path, target: Path) -> None:
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(compiled, target)
    except FileExistsError:  # another process linked it first
        pass
    except OSError:
        shutil.copy2(compiled, target)

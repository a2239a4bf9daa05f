"""One home for exceptions: every public exception class lives in kernel/errors.py or is
named, with where it lives, in that module's docstring (the hierarchy a reader looks up)."""

from __future__ import annotations

import ast
import builtins
import functools
from collections.abc import Iterator
from pathlib import Path

import clawgate.kernel.errors as errors

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernel", "agent", "channels", "gateway")
HOME = ROOT / "kernel" / "errors.py"


def _base_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for base in node.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def _class_statements(tree: ast.Module) -> Iterator[ast.ClassDef]:
    """Every class statement at any depth. A class is a statement, so only statement lists
    are searched: ast.walk would visit every expression too (~1 s of CPU for the tree)."""
    lists = [tree.body]
    while lists:
        for node in lists.pop():
            if isinstance(node, ast.ClassDef):
                yield node
            for field in ("body", "orelse", "handlers", "finalbody", "cases"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    lists.append(inner)


@functools.cache
def exception_classes() -> dict[str, Path]:
    """Every class in our packages that derives from an exception, by name -> its module.
    Bases are followed by name until nothing new is found, so a subclass of one of our own
    exceptions (or of a builtin one) counts wherever it is defined."""
    classes = [
        (node, path)
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for node in _class_statements(ast.parse(path.read_text(encoding="utf-8")))
    ]
    known = {
        name
        for name in dir(builtins)
        if isinstance(getattr(builtins, name), type)
        and issubclass(getattr(builtins, name), BaseException)
    }
    found: dict[str, Path] = {}
    while True:
        new = {
            node.name: path
            for node, path in classes
            if node.name not in found and _base_names(node) & known
        }
        if not new:
            return found
        found.update(new)
        known |= set(new)


def test_the_walk_finds_the_kernels_own_hierarchy() -> None:
    found = exception_classes()
    assert found["ClawgateError"] == HOME
    assert found["ModelUnavailable"] == HOME
    assert found["RetriesExhausted"] == HOME


def test_every_public_exception_is_in_errors_py_or_named_there() -> None:
    doc = errors.__doc__ or ""
    unlisted = sorted(
        f"{name} ({path.relative_to(ROOT)})"
        for name, path in exception_classes().items()
        if path != HOME and not name.startswith("_") and f"`{name}`" not in doc
    )
    assert unlisted == []

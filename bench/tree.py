"""The source tree with line counts: each folder's total, then its modules and sub-folders.

Counts the Python files git tracks (so build/, .venv and caches never count), every line
including blanks, comments and docstrings: the size a reader has to page through.

Run: python bench/tree.py [--folders] [FOLDER ...]   (default: the four package folders,
then one total line each for tests/ and bench/)
"""

from __future__ import annotations

import argparse
import subprocess
from collections import defaultdict
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernel", "agent", "channels", "gateway")
ELSEWHERE = ("tests", "bench")


def tracked_modules(root: Path) -> dict[PurePosixPath, int]:
    """Every tracked .py file under `root` with its line count."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    counts = {}
    for name in filter(None, listed.split("\0")):
        path = root / name
        if path.is_file():  # deleted in the work tree but still in the index
            with path.open("rb") as handle:
                counts[PurePosixPath(name)] = sum(1 for _ in handle)
    return counts


def folder_totals(modules: dict[PurePosixPath, int]) -> dict[PurePosixPath, tuple[int, int]]:
    """Each folder's (lines, modules), its sub-folders included."""
    lines: dict[PurePosixPath, int] = defaultdict(int)
    files: dict[PurePosixPath, int] = defaultdict(int)
    for path, count in modules.items():
        for folder in path.parents[:-1]:  # [:-1] leaves out "."
            lines[folder] += count
            files[folder] += 1
    return {folder: (lines[folder], files[folder]) for folder in lines}


def modules_note(count: int, noun: str = "module") -> str:
    return f"({count} {noun}{'' if count == 1 else 's'})"


def render(
    folder: PurePosixPath,
    modules: dict[PurePosixPath, int],
    totals: dict[PurePosixPath, tuple[int, int]],
    *,
    folders_only: bool,
    depth: int = 0,
) -> list[str]:
    lines, count = totals[folder]
    indent = "  " * depth
    out = [f"{indent + folder.name + '/':<44}{lines:>7,}  {modules_note(count)}"]
    if not folders_only:
        own = sorted(p for p in modules if p.parent == folder)
        out += [f"{indent + '  ' + p.name:<44}{modules[p]:>7,}" for p in own]
    for sub in sorted(f for f in totals if f.parent == folder):
        out += render(sub, modules, totals, folders_only=folders_only, depth=depth + 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="top-level folders to show in full")
    parser.add_argument(
        "--folders",
        dest="folders_only",
        action="store_true",
        help="folder totals only, no module lines",
    )
    args = parser.parse_args()

    modules = tracked_modules(ROOT)
    totals = folder_totals(modules)
    shown = [PurePosixPath(f.strip("/")) for f in args.folders] or [
        PurePosixPath(p) for p in PACKAGES
    ]
    for folder in shown:
        if folder not in totals:
            raise SystemExit(f"tree.py: no tracked Python files under {folder}/")
        print("\n".join(render(folder, modules, totals, folders_only=args.folders_only)))
    package_lines = sum(totals[f][0] for f in shown)
    package_files = sum(totals[f][1] for f in shown)
    print(f"{'total':<44}{package_lines:>7,}  {modules_note(package_files)}")
    if not args.folders:
        for name in ELSEWHERE:
            lines, count = totals.get(PurePosixPath(name), (0, 0))
            print(
                f"{name + '/':<44}{lines:>7,}  {modules_note(count, 'file')[:-1]}, not in the total)"
            )


if __name__ == "__main__":
    main()

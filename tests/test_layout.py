"""The tree is the architecture: every top-level folder X/ installs as `clawgate.X`, and
each module has exactly one import path."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL = ("kernel", "agent", "channels", "gateway", "workspace")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_top_level_folder_installs_as_clawgate_x() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["package-dir"] == {f"clawgate.{name}": name for name in TOP_LEVEL}


def test_the_package_list_is_the_folders_on_disk() -> None:
    on_disk = {
        "clawgate." + ".".join(init.parent.relative_to(ROOT).parts)
        for name in TOP_LEVEL
        for init in (ROOT / name).rglob("__init__.py")
    }
    assert set(_pyproject()["tool"]["setuptools"]["packages"]) == on_disk


def test_every_folder_of_modules_is_a_package() -> None:
    loose = [
        str(folder.relative_to(ROOT))
        for name in TOP_LEVEL
        for folder in [ROOT / name, *(ROOT / name).rglob("*")]
        if folder.is_dir() and any(folder.glob("*.py")) and not (folder / "__init__.py").exists()
    ]
    assert loose == []


@pytest.mark.parametrize("module", ["clawgate.gateway.kernel", "clawgate.gateway.kernel.bus"])
def test_the_kernel_has_no_second_import_path(module: str) -> None:
    with pytest.raises(ImportError):
        importlib.import_module(module)


def test_the_kernel_is_the_top_level_folder() -> None:
    import clawgate.kernel.bus

    assert Path(clawgate.kernel.bus.__file__).parent == ROOT / "kernel"

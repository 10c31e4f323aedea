"""The wheel installs one top-level import name, ``toolscore``, and works outside the tree."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("collector", "scorer", "storage")


def _source_packages() -> set[str]:
    found = {"toolscore"}
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("toolscore", *parts)))
    return found


def test_pyproject_lists_every_package_folder() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(config["tool"]["setuptools"]["packages"]) == _source_packages()


def test_version_comes_from_the_package_metadata() -> None:
    from importlib.metadata import version

    import toolscore

    assert toolscore.__version__ == version("toolscore")
    result = subprocess.run(
        [sys.executable, "-m", "toolscore", "--version"], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == f"toolscore {version('toolscore')}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("toolscore-*.whl")
    return built


def test_wheel_has_one_top_level_name_and_the_data_files(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"toolscore"}
    assert "toolscore/storage/migrations/script.py.mako" in names
    assert "toolscore/scorer/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_installed_wheel_runs_outside_the_source_tree(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = (
        "import toolscore, toolscore.collector.cli as cli, toolscore.storage.migrate as m;"
        "print(toolscore.__file__); print(m.MIGRATIONS_DIR.is_dir())"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert shown == [str(target / "toolscore" / "__init__.py"), "True"]
    samples = ROOT / "examples" / "samples.jsonl"
    scored = subprocess.run(
        [sys.executable, "-m", "toolscore", "score", str(samples)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert scored.returncode == 0, scored.stderr
    assert len(scored.stdout.splitlines()) == len(samples.read_text().splitlines())

"""Lint and type checks, runnable on their own: ``python scripts/check.py``.

Runs ``ruff check .``, ``mypy --strict`` (configured in pyproject.toml) and the house rules
(module size and layering: ``tests/test_house_rules.py``, ``tests/test_layering.py``). The
repository keeps ``collector/``, ``scorer/`` and ``storage/`` at the top while they install as
``toolscore.collector`` and so on; mypy cannot follow setuptools' package-dir mapping, so it
checks a tree of symbolic links in ``.typecheck/toolscore`` that lays the package out as
installed. Exit status: 0 when all pass, 1 otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"collector": "collector", "scorer": "scorer", "storage": "storage"}


def link_tree(root: Path = ROOT) -> Path:
    """(Re)build ``.typecheck/toolscore``: the installed layout, as links into the repository."""
    tree = root / ".typecheck" / "toolscore"
    tree.mkdir(parents=True, exist_ok=True)
    wanted = {p.name: p for p in (root / "toolscore").iterdir() if p.name != "__pycache__"}
    wanted.update({name: root / folder for name, folder in PACKAGE_DIRS.items()})
    for entry in tree.iterdir():
        if entry.name not in wanted or not entry.is_symlink():
            entry.unlink()
    for name, target in wanted.items():
        link = tree / name
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(target, tree))
    return tree


def _tool(name: str) -> str:
    beside = Path(sys.executable).with_name(name)
    return str(beside) if beside.exists() else name


def main() -> int:
    link_tree()
    failed = False
    house_rules = ["tests/test_house_rules.py", "tests/test_layering.py"]
    for command in (
        [_tool("ruff"), "check", "."],
        [sys.executable, "-m", "mypy"],
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *house_rules],
    ):
        print("$", " ".join(command[1:] if command[0] == sys.executable else command), flush=True)
        failed |= subprocess.run(command, cwd=ROOT, check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The packages' rooms: scorer/ is pure, storage/ sits on scorer/, and only storage/ speaks SQL.

``PENDING`` lists the imports that still cross a wall (modules to move); the test fails both
when a new crossing appears and when a listed one is gone (then strike it from the list).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ALLOWED = {
    "scorer": ("toolscore.scorer",),
    "storage": ("toolscore.storage", "toolscore.scorer"),
}
SQL_MODULES = ("sqlalchemy", "alembic", "psycopg")

#: Crossings not yet removed: (module file, imported module).
PENDING: set[tuple[str, str]] = set()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _crossings() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for folder, allowed in ALLOWED.items():
        for path in (ROOT / folder).rglob("*.py"):
            for name in _imports(path):
                if name.startswith("toolscore") and not name.startswith(allowed):
                    found.add((str(path.relative_to(ROOT)), name))
    for path in (ROOT / "collector").rglob("*.py"):
        for name in _imports(path):
            if name.split(".")[0] in SQL_MODULES:
                found.add((str(path.relative_to(ROOT)), name.split(".")[0]))
    return found


def test_no_package_imports_across_its_walls() -> None:
    found = _crossings()
    assert found - PENDING == set(), "new imports across a wall"
    assert PENDING - found == set(), "gone: strike these from PENDING"

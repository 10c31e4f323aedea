"""The packages' rooms: scorer/ is pure, storage/ sits on scorer/, and only storage/ speaks SQL;
which database it is gets asked in storage/plumbing/dialect.py (statements), storage/base.py
(column types),
storage/plumbing/engine.py (connections) and the migrations only.

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


#: Where asking which database it is (SQLite or PostgreSQL) is allowed.
DIALECT_HOMES = (
    "storage/plumbing/dialect.py",
    "storage/plumbing/row_lists.py",
    "storage/plumbing/database_file.py",
    "storage/base.py",
    "storage/plumbing/engine.py",
    "storage/migrations/",
)
BACKENDS = {"sqlite", "postgresql", "postgres"}


def _dialect_questions(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        asks = (
            (isinstance(node, ast.Attribute) and node.attr == "get_backend_name")
            or (
                isinstance(node, ast.Attribute)
                and node.attr == "name"
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "dialect"
            )
            or (
                isinstance(node, ast.Compare)
                and any(
                    isinstance(c, ast.Constant) and c.value in BACKENDS
                    for c in (node.left, *node.comparators)
                )
            )
        )
        if asks:
            lines.append(node.lineno)
    return lines


def test_only_the_dialect_modules_ask_which_database_it_is() -> None:
    found = {}
    for folder in ("collector", "storage"):
        for path in (ROOT / folder).rglob("*.py"):
            name = str(path.relative_to(ROOT))
            if not name.startswith(DIALECT_HOMES) and (lines := _dialect_questions(path)):
                found[name] = lines
    assert found == {}, "dialect branches outside storage/plumbing/dialect.py"


#: Connection methods that run a statement: only storage/ calls them.
STATEMENT_CALLS = {"execute", "exec_driver_sql", "execution_options", "scalar", "scalars"}


def test_collector_runs_no_statement_itself() -> None:
    """collector/ may hold a connection (typed by storage/database.py) but hands it to storage."""
    found = {}
    for path in (ROOT / "collector").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        calls = [
            node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in STATEMENT_CALLS
        ]
        if calls:
            found[str(path.relative_to(ROOT))] = calls
    assert found == {}, "statements run outside storage/"

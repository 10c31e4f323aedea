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


# --- Rooms: the arrows between the sub-packages (and spine modules) of collector/ and storage/.
# A room is collector/<name>/ or storage/<name>/; a top-level module is its own "room" (the
# spine). Each entry says what a room may import; the test fails on any other arrow. Read it with
# the rooms' __init__ docstrings, which say the same in words.

COLLECTOR_SPINE = {"app", "cli", "components", "configuration", "errors", "logformat"}
COLLECTOR_SPINE |= {"serve_config", "settings"}
STORAGE_SPINE = {"base", "database", "migrate", "records", "schema"}

#: Pure rooms: no I/O frameworks, no storage but its pure vocabulary.
PURE_ROOMS = ("collector.otlp", "collector.reconstruction")
PURE_STORAGE = ("storage.records", "storage.plumbing.jsoncodec", "storage.conversations.user_input")
IMPURE = ("asyncio", "sqlalchemy", "alembic", "psycopg", "grpc", "aiohttp", "socket", "threading")

ARROWS: dict[str, set[str]] = {
    # collector: a span's path, receiver -> otlp -> ingest -> (stored) -> pipeline -> export
    "collector.otlp": {"collector.reconstruction", "storage.records"},
    "collector.reconstruction": {"storage.records", "storage.plumbing", "storage.conversations"},
    "collector.receiver": {
        "collector.otlp",
        "collector.ingest",
        "collector.errors",
        "collector.settings",
        "storage.records",
    },
    "collector.ingest": {
        "collector.errors",
        "collector.export",
        "storage.database",
        "storage.records",
        "storage.plumbing",
        "storage.telemetry",
    },
    "collector.pipeline": {
        "collector.reconstruction",
        "collector.ingest",
        "collector.components",
        "collector.configuration",
        "collector.logformat",
        "scorer",
        "storage.*",
    },
    "collector.export": {
        "collector.components",
        "collector.configuration",
        "storage.database",
        "storage.history",
        "storage.records",
    },
    "collector.upkeep": {
        "collector.components",
        "collector.configuration",
        "collector.export",
        "collector.ingest",
        "storage.*",
    },
    "collector.expectations": {
        "scorer",
        "storage.expectations",
        "storage.database",
        # promotion: a conversation rebuilt as scoring rebuilds it
        "collector.pipeline",
        "collector.reconstruction",
    },
    "collector.views": {
        "collector.reconstruction",
        "collector.export",
        "collector.configuration",
        "collector.errors",
        "storage.*",
    },
    "collector.offline": {
        "collector.otlp",
        "collector.ingest",
        "collector.reconstruction",
        "collector.pipeline",
        "scorer",
        "storage.*",
    },
    "collector.ui": {
        "collector.views",
        "collector.pipeline",
        "collector.expectations",
        "collector.components",
        "collector.configuration",
        "collector.settings",
        "storage.*",
    },
    # storage: plumbing at the bottom, then telemetry, then the scoring state and history
    "storage.plumbing": {"scorer"},
    "storage.telemetry": {"storage.base", "storage.records", "storage.plumbing"},
    "storage.conversations": {
        "storage.base",
        "storage.plumbing",
        "storage.telemetry",
        "storage.expectations",
        "storage.history",
    },
    "storage.history": {
        "storage.base",
        "storage.plumbing",
        "storage.telemetry",  # the evaluated trace's root span, for the write-back
        "storage.conversations",
    },
    "storage.expectations": {"storage.base", "storage.plumbing", "storage.conversations"},
    "storage.retention": {
        "storage.base",
        "storage.plumbing",
        "storage.telemetry",
        "storage.conversations",
        "storage.history",
    },
    "storage.migrations": {"storage.plumbing"},
}


def _room_of_file(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return f"{parts[0]}.{parts[1]}"


def _room_of_module(name: str) -> str:
    parts = name.split(".")[1:]
    if parts[0] in ("collector", "storage") and len(parts) > 1:
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


def _room_arrows() -> dict[str, set[str]]:
    arrows: dict[str, set[str]] = {}
    for folder in ("collector", "storage"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.parent == ROOT / folder:
                continue  # the spine composes the rooms and may import any of them
            room = _room_of_file(path)
            for name in _imports(path):
                if name.startswith("toolscore.") and (target := _room_of_module(name)) != room:
                    arrows.setdefault(room, set()).add(target)
    return arrows


def _allowed(room: str, target: str) -> bool:
    allowed = ARROWS.get(room, set())
    package = target.split(".")[0]
    return target in allowed or f"{package}.*" in allowed


def test_rooms_import_only_along_their_arrows() -> None:
    found = {
        (room, target)
        for room, targets in _room_arrows().items()
        for target in targets
        if room != "collector.commands" and not _allowed(room, target)
    }
    assert found == set(), "arrows between rooms that ARROWS does not allow"


def test_every_room_is_declared() -> None:
    rooms = {
        f"{folder}.{p.name}"
        for folder in ("collector", "storage")
        for p in (ROOT / folder).iterdir()
        if p.is_dir() and (p / "__init__.py").exists()
    }
    assert rooms - set(ARROWS) - {"collector.commands"} == set()


def test_nothing_imports_the_commands_room() -> None:
    found = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "collector").rglob("*.py")
        if not path.is_relative_to(ROOT / "collector" / "commands")
        and path != ROOT / "collector" / "cli.py"
        and any(n.startswith("toolscore.collector.commands") for n in _imports(path))
    }
    assert found == set()


def test_pure_rooms_do_no_io() -> None:
    found = set()
    for room in PURE_ROOMS:
        for path in (ROOT / room.replace(".", "/")).rglob("*.py"):
            for name in _imports(path):
                impure = name.split(".")[0] in IMPURE
                storage = name.startswith("toolscore.storage") and not name.startswith(
                    tuple(f"toolscore.{m}" for m in PURE_STORAGE)
                )
                if impure or storage:
                    found.add((str(path.relative_to(ROOT)), name))
    assert found == set()


def test_the_pure_storage_vocabulary_is_pure() -> None:
    for module in PURE_STORAGE:
        path = ROOT / (module.replace(".", "/") + ".py")
        impure = {n for n in _imports(path) if n.split(".")[0] in IMPURE}
        assert impure == set(), module


def test_spine_stays_small() -> None:
    for folder, spine in (("collector", COLLECTOR_SPINE), ("storage", STORAGE_SPINE)):
        modules = {p.stem for p in (ROOT / folder).glob("*.py")} - {"__init__"}
        assert modules <= spine, f"{folder}/ grew a top-level module: make it part of a room"
        assert len(modules) <= 8

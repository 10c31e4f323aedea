"""Shared fixtures: database URLs for a real SQLite file and a real PostgreSQL server.

PostgreSQL tests read the server URL from ``TOOLSCORE_TEST_POSTGRES_URL`` (for example
``postgresql+psycopg://postgres@127.0.0.1:5432/test``). When it is unset they are skipped and the
run says so in its header and in the skip reasons; ``.ci/run`` always sets it.

Every test that asks for ``postgres_url`` gets a database of its own (created from the server URL,
dropped afterwards), so tests and concurrent test runs never see each other's rows;
``migrated_*_url`` gives one at the newest schema, copied from a template migrated once a session.

The quick tier (``python -m pytest -m "not slow"``, README): ``tests/tiers.py`` says which tests
are slow, and that run uses the ``quick`` Hypothesis profile (``TOOLSCORE_HYPOTHESIS_PROFILE``
picks one by name in any run).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from sqlalchemy.engine import make_url

from tests.tiers import is_slow, skip_file

POSTGRES_ENV = "TOOLSCORE_TEST_POSTGRES_URL"
PROFILE_ENV = "TOOLSCORE_HYPOTHESIS_PROFILE"
QUICK_EXAMPLES = 10  # the quick tier's cap on examples per property test

settings.register_profile("full", deadline=None)
settings.register_profile("quick", max_examples=QUICK_EXAMPLES, deadline=None)


def _quick_tier(config: pytest.Config) -> bool:
    return " ".join(str(config.option.markexpr or "").split()) == "not slow"


def _quick(config: pytest.Config) -> bool:
    """The quick tier's profile: asked for by name, else when ``-m "not slow"`` is the run."""
    named = os.environ.get(PROFILE_ENV, "").strip()
    return named == "quick" if named else _quick_tier(config)


def pytest_configure(config: pytest.Config) -> None:
    settings.load_profile("quick" if _quick(config) else "full")


def pytest_report_header(config: pytest.Config) -> list[str]:
    if os.environ.get(POSTGRES_ENV):
        postgres = f"postgres: tests run against {os.environ[POSTGRES_ENV]} ({POSTGRES_ENV})"
    else:
        postgres = f"postgres: {POSTGRES_ENV} is NOT set: every PostgreSQL test will be SKIPPED"
    return [postgres, f"hypothesis profile: {settings.get_current_profile_name()}"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A quick run does not import the files whose every test is slow (frameworks cost seconds)."""
    if not _quick_tier(config) or collection_path.suffix != ".py":
        return None
    if not collection_path.is_relative_to(config.rootpath):
        return None
    relative = collection_path.relative_to(config.rootpath).as_posix()
    return True if skip_file(relative) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark slow what ``tests/tiers.py`` says is; in the quick profile, cap property tests'
    own ``max_examples`` too (an explicit ``@settings`` would otherwise beat the profile)."""
    quick = settings.get_current_profile_name() == "quick"
    for item in items:
        if is_slow(item):
            item.add_marker(pytest.mark.slow)
        if quick:
            _cap_examples(item)


def _cap_examples(item: pytest.Item) -> None:
    test = getattr(item, "obj", None)
    # where @given keeps the test's settings (read when it runs; no public setter exists)
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is not None and own.max_examples > QUICK_EXAMPLES:
        test._hypothesis_internal_use_settings = settings(own, max_examples=QUICK_EXAMPLES)  # type: ignore[union-attr]


def _admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"PostgreSQL test skipped: set {POSTGRES_ENV} to run it")
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped after the test."""
    with _database(_admin_url(), "toolscore_t") as url:
        yield url


@contextlib.contextmanager
def _database(admin_url: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """A database of a unique name (so parallel runs never share one), dropped afterwards."""
    from sqlalchemy import create_engine, text

    admin = make_url(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(
            text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        )
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """URL of a real SQLite file in a fresh temporary directory."""
    return f"sqlite:///{tmp_path / 'toolscore.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """Each test using this runs twice: on a SQLite file and on PostgreSQL."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
    else:
        url = request.getfixturevalue("postgres_url")
    return url


# Migrated databases: the migrations run once per test session (per worker) into a template,
# and each test gets a copy (migrating takes about 0.7 s on SQLite, 2.4 s on PostgreSQL; a copy
# a few milliseconds, a PostgreSQL clone about 0.3 s). tests/storage/test_migrations.py and the
# tests of single migrations still migrate for real.


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from toolscore.storage import migrate

    path = tmp_path_factory.mktemp("template") / "migrated.db"
    migrate.upgrade(f"sqlite:///{path}", "heads")
    with sqlite3.connect(path) as conn:  # everything in the file itself, no log beside it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture
def migrated_sqlite_url(tmp_path: Path, _sqlite_template: Path) -> str:
    """URL of a SQLite file at the newest schema (a copy of the session's migrated template)."""
    target = tmp_path / "toolscore.db"
    shutil.copyfile(_sqlite_template, target)
    return f"sqlite:///{target}"


@pytest.fixture(scope="session")
def _postgres_template() -> Iterator[str]:
    from toolscore.storage import migrate

    with _database(_admin_url(), "toolscore_tpl") as url:
        migrate.upgrade(url, "heads")
        yield str(make_url(url).database)


@pytest.fixture
def migrated_postgres_url(_postgres_template: str) -> Iterator[str]:
    """URL of a PostgreSQL database of its own at the newest schema (``CREATE DATABASE ...
    TEMPLATE`` the session's migrated one), dropped after the test."""
    with _database(_admin_url(), "toolscore_t", template=_postgres_template) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def migrated_db_url(request: pytest.FixtureRequest) -> str:
    """``db_url``, migrated: each test using this runs on a SQLite file and on PostgreSQL."""
    name = "migrated_sqlite_url" if request.param == "sqlite" else "migrated_postgres_url"
    url: str = request.getfixturevalue(name)
    return url

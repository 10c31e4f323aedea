"""Shared fixtures: database URLs for a real SQLite file and a real PostgreSQL server.

PostgreSQL tests read the server URL from ``TOOLSCORE_TEST_POSTGRES_URL`` (for example
``postgresql+psycopg://postgres@127.0.0.1:5432/test``). When it is unset they are skipped and the
run says so in its header and in the skip reasons; ``.ci/run`` always sets it.

Every test that asks for ``postgres_url`` gets a database of its own (created from the server URL,
dropped afterwards), so tests and concurrent test runs never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_ENV = "TOOLSCORE_TEST_POSTGRES_URL"


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get(POSTGRES_ENV):
        return f"postgres: tests run against {os.environ[POSTGRES_ENV]} ({POSTGRES_ENV})"
    return f"postgres: {POSTGRES_ENV} is NOT set: every PostgreSQL test will be SKIPPED"


def _admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"PostgreSQL test skipped: set {POSTGRES_ENV} to run it")
    return url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped after the test."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    admin = make_url(_admin_url())
    name = f"toolscore_t_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
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

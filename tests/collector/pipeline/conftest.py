"""Fixtures for the pipeline unit tests: a real database (SQLite file or PostgreSQL) with tables."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.schema import metadata


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    eng = create_engine(db_url)
    metadata.create_all(eng)
    try:
        yield eng
    finally:
        eng.dispose()

"""A migrated database for tests of the expectations tables."""

from __future__ import annotations

from sqlalchemy import Engine

from toolscore.storage import migrate
from toolscore.storage.plumbing.engine import create_engine


def create_schema(db_url: str) -> Engine:
    """An engine on ``db_url`` after ``alembic upgrade head`` (the real schema, both dialects)."""
    migrate.upgrade(db_url, "heads")
    return create_engine(db_url)

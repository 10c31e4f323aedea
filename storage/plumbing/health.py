"""The database liveness probe of ``serve``'s health check."""

from __future__ import annotations

from sqlalchemy import Engine, text


def ping(engine: Engine) -> None:
    """One round trip through the pool (its pre-ping included); raises when it fails."""
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))

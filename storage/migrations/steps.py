"""Long data migrations say what they do: each step timed and logged on ``toolscore.migrate``
(``toolscore db upgrade`` prints those lines)."""

from __future__ import annotations

import logging
import time

from alembic import op

log = logging.getLogger("toolscore.migrate")


def run_step(revision: str, what: str, sql: str) -> None:
    """Run ``sql`` in the migration's connection and log how many rows and how long."""
    started = time.monotonic()
    rows = op.get_bind().exec_driver_sql(sql).rowcount
    log_step(revision, what, started, rows)


def log_step(revision: str, what: str, started: float, rows: int = -1) -> None:
    counted = f"{rows} rows in " if rows >= 0 else ""  # DDL counts no rows
    log.info("migration %s: %s: %s%.1f s", revision, what, counted, time.monotonic() - started)

"""The database handles the rest of toolscore holds without speaking SQL.

``collector/`` passes engines and connections from the place that opens them to the storage
function that uses them; it names their types from here, so only ``storage/`` imports SQLAlchemy.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine

__all__ = ["Connection", "Engine"]

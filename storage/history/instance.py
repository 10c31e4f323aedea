"""This database's instance id: drawn at random once (migration ``0016``), never changed.

The write-back hashes it with an evaluation's row id into span and annotation ids, so that two
databases (which number their evaluations alike) never send the same ids to one backend, while a
resend from the same database carries the same ones.
"""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import Connection, Integer, String, Table, select
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, UtcDateTime
from toolscore.storage.plumbing.dialect import insert_ignore_duplicates


class ToolscoreInstance(Base):
    __tablename__ = "toolscore_instance"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    instance_id: Mapped[str] = mapped_column(String(32), nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)


toolscore_instance: Table = ToolscoreInstance.__table__  # type: ignore[assignment]


def instance_id(conn: Connection) -> str:
    """The database's instance id (drawn here if the row is missing, e.g. a schema made by
    ``create_all``; concurrent callers agree on the first one stored)."""
    query = select(toolscore_instance.c.instance_id).where(toolscore_instance.c.id == 1)
    found = conn.execute(query).scalar()
    if found is None:
        row = {"id": 1, "instance_id": secrets.token_hex(16), "created_at": dt.datetime.now(dt.UTC)}
        insert_ignore_duplicates(conn, toolscore_instance, [row], index_elements=["id"])
        found = conn.execute(query).scalar_one()
    return str(found)

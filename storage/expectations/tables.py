"""The ``expectations`` and ``expectation_match_ids`` tables and how their rows are read back.

JSON content is stored with the plain ``JSON`` type (``json`` on PostgreSQL, not ``jsonb``):
``jsonb`` reorders object keys, and Ragas parity compares nested argument values by their Python
``repr``, where key order matters. What was imported is what the scorer gets back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    Table,
    Text,
    text,
)
from sqlalchemy.engine import RowMapping
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base

# ``none_as_null``: a Python None is SQL NULL (the schema's "JSON NULL"), not the JSON ``null``.
ExactJson = JSON(none_as_null=True)


class Expectation(Base):
    __tablename__ = "expectations"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    is_latest: Mapped[bool] = mapped_column(Boolean, nullable=False)
    reference_tool_calls: Mapped[Any] = mapped_column(ExactJson, nullable=False)
    user_input: Mapped[Any | None] = mapped_column(ExactJson, nullable=True)
    metrics: Mapped[Any | None] = mapped_column(ExactJson, nullable=True)
    match: Mapped[Any | None] = mapped_column(ExactJson, nullable=True)
    match_user_input_norm: Mapped[str | None] = mapped_column(Text, nullable=True, index=True)
    content_hash: Mapped[str] = mapped_column(Text, nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)

    __table_args__ = (
        # At most one latest version per id, enforced by the database (partial unique index).
        Index(
            "uq_expectations_latest_id",
            "id",
            unique=True,
            sqlite_where=text("is_latest"),
            postgresql_where=text("is_latest"),
        ),
    )


class ExpectationMatchId(Base):
    """One row per conversation id that an expectation version's ``match`` rule names."""

    __tablename__ = "expectation_match_ids"

    expectation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(Text, primary_key=True, index=True)

    __table_args__ = (
        ForeignKeyConstraint(
            ["expectation_id", "version"],
            ["expectations.id", "expectations.version"],
            ondelete="CASCADE",
        ),
    )


EXPECTATIONS = cast(Table, Expectation.__table__)
MATCH_IDS = cast(Table, ExpectationMatchId.__table__)


@dataclass(frozen=True, slots=True)
class ExpectationData:
    """One expectation as read from a file, before it is stored."""

    id: str
    reference_tool_calls: Any
    user_input: Any = None
    metrics: tuple[str, ...] | None = None
    match: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ExpectationRow:
    """One stored version of an expectation."""

    id: str
    version: int
    is_latest: bool
    reference_tool_calls: Any
    user_input: Any
    metrics: tuple[str, ...] | None
    match: Mapping[str, Any] | None
    match_user_input_norm: str | None
    content_hash: str
    created_at: datetime

    @property
    def match_conversation_ids(self) -> tuple[str, ...]:
        return conversation_ids(self.match)


def conversation_ids(match: Mapping[str, Any] | None) -> tuple[str, ...]:
    if not match:
        return ()
    value = match.get("conversation_id")
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(dict.fromkeys(v for v in value if isinstance(v, str)))
    return ()


def as_utc(value: datetime) -> datetime:
    # SQLite has no time zones: values come back naive, and we only ever write UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def row_of(m: RowMapping) -> ExpectationRow:
    metrics = m["metrics"]
    return ExpectationRow(
        id=m["id"],
        version=m["version"],
        is_latest=bool(m["is_latest"]),
        reference_tool_calls=m["reference_tool_calls"],
        user_input=m["user_input"],
        metrics=tuple(metrics) if metrics is not None else None,
        match=m["match"],
        match_user_input_norm=m["match_user_input_norm"],
        content_hash=m["content_hash"],
        created_at=as_utc(m["created_at"]),
    )

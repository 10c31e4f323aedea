"""Declarative base and portable column types shared by every table.

Dialect differences in column types live here (and only here): JSON is JSONB on PostgreSQL and
JSON text on SQLite; 64-bit integers (Unix nanoseconds) are BIGINT on PostgreSQL; timestamps are
stored naive UTC on SQLite and read back timezone-aware on both.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, DateTime, Integer, MetaData, TypeDecorator
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase

# Stable constraint names make Alembic migrations reproducible across dialects.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JsonType = JSON().with_variant(postgresql.JSONB(), "postgresql")
Int64 = BigInteger().with_variant(BigInteger(), "postgresql").with_variant(Integer(), "sqlite")
# Python ``None`` stored as SQL NULL (not JSON ``null``) so "no arguments decoded" is queryable.
JsonOrNull = JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


class UtcDateTime(TypeDecorator[dt.datetime]):
    """A timezone-aware UTC timestamp on both dialects (SQLite keeps no zone; we restore UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware UTC time")
        value = value.astimezone(dt.UTC)
        # SQLite compares timestamps as text: store them naive so every row has one format.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(
        self, value: dt.datetime | None, dialect: Dialect
    ) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JsonType, list[Any]: JsonType}

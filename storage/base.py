"""Declarative base and portable column types shared by every table.

Dialect differences in column types live here (and only here): JSON is JSONB on PostgreSQL and
JSON text on SQLite; 64-bit integers (Unix nanoseconds) are BIGINT on PostgreSQL.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import JSON, BigInteger, Integer, MetaData
from sqlalchemy.dialects import postgresql
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


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JsonType, list[Any]: JsonType}

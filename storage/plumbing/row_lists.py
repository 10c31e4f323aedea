"""Statements over a list of ids or rows, by dialect (a part of storage/plumbing/dialect.py, which
holds
the other dialect differences): a list bound as one parameter on SQLite (:func:`in_json_list`),
looking rows up id by id (:func:`each_id`), updating many
rows in one statement (:func:`update_each`), inserting many where most are stored already
(:func:`insert_tuples_skip_existing`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, Table, bindparam, func, literal_column, select, true
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import Text, TypeDecorator, TypeEngine

from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.jsoncodec import json_dumps


class _JsonList(TypeDecorator[Any]):
    """A list bound as the text of one JSON array."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else json_dumps(list(value))


def in_json_list(column: ColumnElement[Any], name: str = "ids") -> ColumnElement[bool]:
    """SQLite: ``column IN (SELECT value FROM json_each(:name))``, the list bound as one JSON
    array: an expanding ``IN`` costs the client about a microsecond per item to render and bind
    at each execution (a round's statements bind every id of its part), this one text."""
    listed = func.json_each(bindparam(name, type_=_JsonList())).table_valued("value")
    return column.in_(select(listed.c.value))


def bulk_insert(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Plain ``INSERT`` of many rows that share their keys (no conflicts expected).

    Values are bound by the columns' own SQLAlchemy types, so they are stored exactly as
    ``conn.execute(table.insert(), rows)`` stores them, without its per-row work: PostgreSQL one
    ``COPY`` (an order of magnitude less server work than ``executemany``, which runs one
    ``INSERT`` per row); SQLite the driver's ``executemany`` (one prepared statement).
    """
    if not rows:
        return
    if conn.dialect.name not in ("postgresql", "sqlite"):
        conn.execute(table.insert(), list(rows))
        return
    columns = tuple(rows[0])
    bind = row_binder(conn.dialect, table, columns)
    insert_bound(conn, table, columns, [bind([row[c] for c in columns]) for row in rows])


def row_binder(
    dialect: Dialect, table: Table, columns: tuple[str, ...]
) -> Callable[[Sequence[Any]], list[Any]]:
    """Binds a row of ``table`` (values in ``columns`` order) as :func:`bulk_insert` does, so
    that rows can be made before the transaction that inserts them (:func:`insert_bound`)."""
    processors = [p for _, p in bind_processors(dialect, table, columns)]

    def bind(values: Sequence[Any]) -> list[Any]:
        return [v if p is None else p(v) for v, p in zip(values, processors, strict=True)]

    return bind


def insert_bound(
    conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Insert rows bound by :func:`row_binder` (PostgreSQL ``COPY``, SQLite ``executemany``)."""
    if not rows:
        return
    if conn.dialect.name == "sqlite":
        marks = ", ".join("?" * len(columns))
        sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
        conn.exec_driver_sql(sql, [tuple(v) for v in rows])
        return
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    statement = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
    with dbapi.cursor() as cursor, cursor.copy(statement) as copy:
        for value in rows:
            copy.write_row(value)


@cache
def bind_processors(
    dialect: Dialect, table: Table, columns: tuple[str, ...]
) -> list[tuple[str, Any]]:
    """(column, its type's bind processor or None) for ``columns`` of ``table``."""
    return [(c, table.c[c].type.dialect_impl(dialect).bind_processor(dialect)) for c in columns]


def each_id(
    dialect: Dialect, query: Select[Any], column: ColumnElement[Any], name: str = "ids"
) -> Select[Any]:
    """``query`` (built once per dialect) restricted to rows whose ``column`` is in the list
    bound as ``name``, looked up id by id through ``column``'s index.

    PostgreSQL: ``FROM unnest(:ids) AS wanted(id) JOIN LATERAL (query AND column = wanted.id
    OFFSET 0)``,
    a nested loop whatever the planner's statistics say. ``column = ANY(:ids)`` is estimated with
    the default selectivity of an equality per element on a table never analysed (autovacuum
    off, or not yet run: a table truncated or just filled): 200 ids, the whole table, so a
    sequential scan of every partition of ``spans`` in every round, whose cost grows with what
    is stored. SQLite (whose planner uses the index for an ``IN`` list): ``query`` with an
    expanding ``IN``. A correlated subquery in ``query`` runs once per row (a nested loop too)."""
    if dialect.name != "postgresql":
        return query.where(in_json_list(column, name))
    wanted = (
        func.unnest(bindparam(name, type_=postgresql.ARRAY(column.type)))
        .table_valued("id")
        .render_derived(name="wanted")
    )
    # OFFSET 0: the planner would otherwise pull the subquery up into a plain join, and may
    # hash-join it with a scan of the whole table again
    found = query.where(column == wanted.c.id).offset(literal_column("0")).lateral("found")
    return select(*found.c).select_from(wanted.join(found, true()))


# (statement key, dialect name) -> the statement update_each built
_UPDATES: dict[tuple[str, str], Any] = {}


def update_each(
    conn: Connection,
    key: str,
    build: Callable[[Callable[[str], ColumnElement[Any]]], Any],
    types: Mapping[str, TypeEngine[Any]],
    rows: Sequence[Mapping[str, Any]],
) -> None:
    """One ``UPDATE`` per row of ``rows`` (dicts with the keys of ``types``): ``build(value)``
    returns the ``UPDATE`` statement whose ``WHERE`` and values take the row's values from
    ``value(name)``; built once per dialect, cached under ``key``.

    PostgreSQL: one statement for all rows, ``UPDATE ... FROM unnest(:name::type[], ...) AS
    each_row(name, ...)`` (the driver's ``executemany`` runs the statement once per row, each
    with its own parse, plan and execution in the server). SQLite: the driver's ``executemany``
    (one prepared statement)."""
    if not rows:
        return
    dialect = conn.dialect
    stmt = _UPDATES.get((key, dialect.name))
    if stmt is None:
        if dialect.name == "postgresql":
            names = list(types)
            arrays = [bindparam(n, type_=postgresql.ARRAY(types[n])) for n in names]
            each_row = func.unnest(*arrays).table_valued(*names).render_derived(name="each_row")
            stmt = build(lambda name: each_row.c[name])
        else:
            stmt = build(lambda name: bindparam(name, type_=types[name]))
        _UPDATES[(key, dialect.name)] = stmt
    if dialect.name == "postgresql":
        conn.execute(stmt, {name: [row[name] for row in rows] for name in types})
    else:
        conn.execute(stmt, list(rows))


def insert_new_ids(
    conn: Connection, table: Table, column: str, ids: Sequence[str], returning: str
) -> list[tuple[Any, Any]]:
    """``INSERT INTO table (column)`` each of ``ids`` in their order, skipping those already
    there; returns ``(column, returning)`` of the rows inserted. PostgreSQL one statement over
    an array (a COPY would fail on the first id already stored), SQLite one per 500 ids."""
    head = f"INSERT INTO {table.name} ({column}) "
    tail = f" ON CONFLICT DO NOTHING RETURNING {column}, {returning}"
    if conn.dialect.name == "postgresql":
        sql = head + "SELECT unnest(CAST(%(ids)s AS text[]))" + tail
        return [(r[0], r[1]) for r in conn.exec_driver_sql(sql, {"ids": list(ids)})]
    out: list[tuple[Any, Any]] = []
    for chunk in chunks(ids):
        sql = head + "VALUES " + ", ".join(["(?)"] * len(chunk)) + tail
        out.extend((r[0], r[1]) for r in conn.exec_driver_sql(sql, tuple(chunk)))
    return out


def key_share_in(dialect: Dialect, query: Select[Any]) -> Select[Any]:
    """``query`` holding the rows it returns until the transaction ends against deletion and
    key changes, not against other readers or updates (PostgreSQL ``FOR KEY SHARE``). SQLite:
    ``query`` (its one write lock, taken by a write earlier in the transaction, does it)."""
    if dialect.name == "postgresql":
        return query.with_for_update(read=True, key_share=True)
    return query


def insert_tuples_skip_existing(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    key: Sequence[str],
) -> None:
    """Insert ``rows`` (tuples in ``columns`` order), skipping those whose ``key`` is stored,
    where duplicates are the usual case (so no COPY: it fails on the first one). PostgreSQL:
    one ``INSERT ... SELECT FROM unnest(arrays)``; SQLite: one prepared ``executemany``."""
    if not rows:
        return
    cols = ", ".join(columns)
    tail = f" ON CONFLICT ({', '.join(key)}) DO NOTHING"
    if conn.dialect.name == "postgresql":
        types = [table.c[c].type.compile(dialect=conn.dialect) for c in columns]
        arrays = ", ".join(f"%s::{t}[]" for t in types)
        values = [list(column) for column in zip(*rows, strict=True)]
        conn.exec_driver_sql(
            f"INSERT INTO {table.name} ({cols}) SELECT * FROM unnest({arrays})" + tail,
            tuple(values),
        )
        return
    marks = ", ".join("?" * len(columns))
    conn.exec_driver_sql(f"INSERT INTO {table.name} ({cols}) VALUES ({marks})" + tail, list(rows))

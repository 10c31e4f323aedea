"""The ONE place that knows SQL dialect differences in statements (column types: storage/base.py).

``insert_ignore_duplicates`` and ``upsert`` build ``INSERT ... ON CONFLICT`` for SQLite and
PostgreSQL, so idempotent writes read the same in every caller; ``insert_for`` gives the dialect
``INSERT`` for ``ON CONFLICT`` with expressions in ``SET``. ``skip_locked`` and
``lock_for_write`` lock rows (PostgreSQL row locks; SQLite's one write lock), ``one_writer`` says
whether a transaction needs row locks at all. ``take_write_lock`` and ``write_transaction`` are
the one way a transaction takes SQLite's write lock (serve's writers taking turns first).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy import Column, Connection, Select, Table, Text, any_, bindparam, cast, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import ColumnElement

from toolscore.storage.plumbing.row_lists import bind_processors, in_json_list
from toolscore.storage.plumbing.turns import write_turn


def insert_for(conn: Connection, table: Table) -> Any:
    """A dialect ``INSERT`` offering ``on_conflict_do_update`` and ``excluded``."""
    return insert_dialect(conn.dialect.name, table)


def backend_name(url: str) -> str:
    """``"postgresql"`` or ``"sqlite"``: the database ``url`` names."""
    from toolscore.storage.plumbing.engine import normalize_url

    return str(normalize_url(url).get_backend_name())


def scoring_round_size(backend: str) -> int:
    """Most conversations one scoring round claims: 500 on PostgreSQL, where each round's
    statements and commits cost about 10 ms of CPU whatever its size; 200 on SQLite, where a
    round's write holds the one write lock ingest waits for (docs/benchmarks.md)."""
    return 500 if backend == "postgresql" else 200


def one_writer(conn: Connection) -> bool:
    """SQLite: one write transaction at a time, so what a transaction read stays current and no
    row locks are needed."""
    return conn.dialect.name == "sqlite"


def insert_ignore_duplicates(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    index_elements: Iterable[str] | None = None,
) -> None:
    """Insert ``rows``; a row whose key already exists is skipped (``ON CONFLICT DO NOTHING``).

    ``index_elements`` names the unique columns to conflict on (default: any constraint).
    """
    if not rows:
        return
    stmt: Insert = insert_for(conn, table)
    stmt = stmt.on_conflict_do_nothing(  # type: ignore[attr-defined]
        index_elements=list(index_elements) if index_elements is not None else None
    )
    conn.execute(stmt, list(rows))


def upsert(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    index_elements: Iterable[str],
    update_columns: Iterable[str],
) -> None:
    """Insert ``rows``; on a key conflict overwrite ``update_columns`` with the new values."""
    if not rows:
        return
    stmt = insert_for(conn, table)
    cols = list(update_columns)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(index_elements),
        set_={c: getattr(stmt.excluded, c) for c in cols},
    )
    conn.execute(stmt, list(rows))


def insert_tuples_ignore_duplicates(
    conn: Connection,
    table: Table,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    conflict_columns: Sequence[str],
    json_columns: Collection[str] = (),
) -> None:
    """Fast bulk path of :func:`insert_ignore_duplicates` for hot tables.

    ``rows`` are tuples in ``columns`` order, with JSON columns already serialised to text; the
    statement goes straight to the driver's ``executemany`` (no per-row SQLAlchemy processing).
    """
    if not rows:
        return
    name = conn.dialect.name
    head = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES "
    target = f" ({', '.join(conflict_columns)})" if conflict_columns else ""  # (): any key
    tail = f" ON CONFLICT{target} DO NOTHING"
    if name == "sqlite":
        # sqlite3's executemany reuses one prepared statement: already the fast way
        conn.exec_driver_sql(head + f"({', '.join('?' * len(columns))})" + tail, list(rows))
    elif name == "postgresql":
        _copy_ignore_duplicates(conn, table.name, columns, rows, tail)
    else:
        raise NotImplementedError(f"unsupported dialect {name!r}")


# (statement key, dialect name, row keys) -> (SQL, parameter names in driver order or None:
# named, binders)
_PREPARED: dict[
    tuple[str, str, tuple[str, ...]], tuple[str, tuple[str, ...] | None, dict[str, Any]]
] = {}


def execute_prepared(
    conn: Connection,
    key: str,
    build: Callable[[str], Any],
    table: Table,
    rows: Sequence[Mapping[str, Any]],
) -> None:
    """Hot path of ``conn.execute(build(), rows)`` for an ``INSERT`` into ``table`` whose rows
    all have the same keys: the statement is built and compiled once per dialect (cached under
    ``key``) and goes straight to the driver's ``executemany``; values are bound by the columns'
    own types (so stored exactly as ``conn.execute`` stores them), each distinct value once per
    call. ``build(dialect name)`` may use :func:`insert_dialect`; no literal bound values."""
    if not rows:
        return
    dialect = conn.dialect
    columns = tuple(rows[0])
    prepared = _PREPARED.get((key, dialect.name, columns))
    if prepared is None:
        compiled = build(dialect.name).compile(dialect=dialect, column_keys=list(columns))
        names = tuple(compiled.positiontup or ()) if compiled.positional else None
        if set(names if names is not None else compiled.binds) != set(columns):
            raise ValueError(f"{key}: the statement binds other values than the rows' keys")
        binders = {c: p for c, p in bind_processors(dialect, table, columns) if p is not None}
        prepared = (str(compiled), names, binders)
        _PREPARED[(key, dialect.name, columns)] = prepared
    sql, names, binders = prepared
    getter: Callable[[dict[str, Any]], tuple[Any, ...]] | None = None
    if names is not None:  # itemgetter of one name gives the value, not a 1-tuple
        getter = operator.itemgetter(*names) if len(names) > 1 else lambda v: (v[names[0]],)
    bound: list[Any] = []
    memo: dict[tuple[str, Any], Any] = {}
    for row in rows:
        values = dict(row)
        for name, binder in binders.items():
            value = values[name]
            if value is None:
                continue
            try:
                hit = memo.get((name, value), memo)
            except TypeError:  # unhashable (a JSON value): bound on its own
                hit = binder(value)
            if hit is memo:
                hit = memo[(name, value)] = binder(value)
            values[name] = hit
        bound.append(values if getter is None else getter(values))
    conn.exec_driver_sql(sql, bound)


def insert_dialect(name: str, table: Table) -> Any:
    """:func:`insert_for` by dialect name (for statements built once per dialect)."""
    if name == "postgresql":
        return postgresql.insert(table)
    if name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported dialect {name!r}")


def in_list(conn: Connection, count: int) -> str:
    """``(p, p, ...)``: ``count`` driver placeholders for a ``WHERE x IN`` in driver SQL."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    return "(" + ", ".join([mark] * count) + ")"


def _copy_ignore_duplicates(
    conn: Connection,
    table: str,
    columns: Sequence[str],
    rows: Sequence[tuple[Any, ...]],
    on_conflict: str,
) -> None:
    """PostgreSQL: COPY straight into ``table``; when that hits a duplicate key (a resent
    batch: rare), roll back to a savepoint and go through a staging table with
    ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``. Both are an order of magnitude faster than
    ``executemany``; the direct COPY does half the server work of the staging path."""
    import psycopg  # the postgresql dialect runs on psycopg 3

    cols = ", ".join(columns)
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    with dbapi.cursor() as cursor:
        cursor.execute("SAVEPOINT toolscore_copy")
        try:
            with cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        except psycopg.errors.UniqueViolation:
            cursor.execute("ROLLBACK TO SAVEPOINT toolscore_copy")
        else:
            cursor.execute("RELEASE SAVEPOINT toolscore_copy")
            return
        staging = f"_toolscore_staging_{table}"
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {staging} "
            f"(LIKE {table} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS"
        )
        with cursor.copy(f"COPY {staging} ({cols}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {staging}" + on_conflict)


def skip_locked(conn: Connection, query: Select[Any], of: Table | None = None) -> Select[Any]:
    """``query`` locking the rows it returns (of table ``of`` only, when given) for this
    transaction, without waiting for rows another transaction holds (PostgreSQL ``FOR UPDATE
    SKIP LOCKED``: those are skipped). SQLite has no row locks: the caller's transaction must
    already hold the write lock (begin with a write) or accept that the rows may change before
    it writes."""
    return skip_locked_in(conn.dialect, query, of)


def skip_locked_in(dialect: Dialect, query: Select[Any], of: Table | None = None) -> Select[Any]:
    """:func:`skip_locked` for a statement built once per dialect (``conn.dialect``)."""
    if dialect.name == "postgresql":
        return query.with_for_update(skip_locked=True, of=of)
    return query


def lock_for_write(
    conn: Connection,
    table: Table,
    columns: Sequence[ColumnElement[Any]],
    where: ColumnElement[bool],
    touch: Column[Any],
) -> Sequence[tuple[Any, ...]]:
    """Lock the rows of ``table`` that ``where`` selects until the caller's transaction ends and
    read their ``columns``. PostgreSQL: ``SELECT ... FOR UPDATE``, a row lock that writes no new
    row version (with autovacuum slow or off, every extra version of a hot row slows the claim
    queries down). SQLite: ``UPDATE`` setting ``touch`` to itself ``RETURNING`` the columns, so
    the transaction takes the write lock before anything is read (a read first could be
    upgraded too late and fail with SQLITE_BUSY)."""
    return _rows(conn.execute(lock_statement(conn.dialect, table, columns, where, touch)).all())


def lock_statement(
    dialect: Dialect,
    table: Table,
    columns: Sequence[ColumnElement[Any]],
    where: ColumnElement[bool],
    touch: Column[Any],
) -> Any:
    """:func:`lock_for_write`'s statement for ``dialect`` (``conn.dialect``), to build once
    (with bound parameters) and run many times."""
    if dialect.name == "postgresql":
        return select(*columns).where(where).with_for_update()
    return table.update().where(where).values({touch.name: touch}).returning(*columns)


def _rows(rows: Sequence[Any]) -> Sequence[tuple[Any, ...]]:
    return rows  # Row unpacks like a tuple; typed so for the callers


def take_write_lock(conn: Connection) -> None:
    """SQLite: begin ``conn``'s transaction holding the database's write lock (``BEGIN
    IMMEDIATE``, waiting through SQLite's busy handler up to the busy timeout), so that what it
    reads stays current until it writes; a transaction that reads first and writes later can
    fail with SQLITE_BUSY when another connection wrote in between. A transaction a write
    already began holds the lock. PostgreSQL: nothing (the statements take row locks)."""
    if conn.dialect.name != "sqlite":
        return
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    if not dbapi.in_transaction:  # Python's sqlite3 begins implicitly before writes only
        dbapi.execute("BEGIN IMMEDIATE")


class _Connects(Protocol):
    def connect(self) -> Connection: ...


@contextmanager
def write_transaction(db: _Connects) -> Iterator[Connection]:
    """A transaction holding the write lock from its start (:func:`take_write_lock`), committed
    on success. SQLite: the writers of ``serve`` (the ingest writer, the scoring rounds) first
    take turns (:mod:`toolscore.storage.plumbing.turns`), so that a round waiting behind
    back-to-back ingest commits gets the lock after the next one, not at the busy handler's next
    sleep."""
    with db.connect() as conn, write_turn(_turn_path(conn)), conn.begin():
        take_write_lock(conn)
        yield conn


def _turn_path(conn: Connection) -> str | None:
    """The SQLite file whose writers take turns; None elsewhere (PostgreSQL, in memory)."""
    if conn.dialect.name != "sqlite":
        return None
    database = conn.engine.url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return database


def compresses_large_values(dialect: Dialect) -> bool:
    """Whether the database compresses large column values itself (PostgreSQL's TOAST does;
    SQLite stores them as they are)."""
    return dialect.name == "postgresql"


def can_partition(conn: Connection) -> bool:
    """Whether the database partitions tables (PostgreSQL; storage/telemetry/partitions.py)."""
    return conn.dialect.name == "postgresql"


def json_text(column: ColumnElement[Any]) -> ColumnElement[Any]:
    """``column`` (a JSON column) read as its stored JSON text, not decoded: JSON text on
    SQLite, JSONB's text output on PostgreSQL (what its driver would otherwise decode)."""
    return cast(column, Text)


def in_ids(dialect: Dialect, column: ColumnElement[Any], name: str = "ids") -> ColumnElement[bool]:
    """``column IN`` the list bound as ``name``, for a statement built once per dialect.

    PostgreSQL: ``= ANY`` of one array parameter, so the statement's text is the same whatever
    the list's length (the driver parses and prepares it once; an expanding ``IN`` has one
    placeholder per item, a new text per length). SQLite: an expanding ``IN``."""
    if dialect.name == "postgresql":
        return column == any_(bindparam(name, type_=postgresql.ARRAY(column.type)))
    return in_json_list(column, name)


def utc_day(dialect: Dialect, column: ColumnElement[Any]) -> ColumnElement[Any]:
    """The UTC day (``YYYY-MM-DD`` text) of a ``UtcDateTime`` column, for grouping by day."""
    if dialect.name == "postgresql":
        return func.to_char(func.timezone("UTC", column), "YYYY-MM-DD")
    return func.date(column)

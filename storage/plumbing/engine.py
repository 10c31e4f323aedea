"""Engine construction: the only place that knows how to connect to each database.

SQLite gets WAL (readers never block the writer), a busy timeout (concurrent processes wait
instead of failing at once), ``synchronous=NORMAL`` (durable across process crashes in WAL mode,
much faster than FULL) and enforced foreign keys. PostgreSQL goes through psycopg 3.

Every engine gets transport deadlines on PostgreSQL (``connect_timeout``, TCP keepalives,
``tcp_user_timeout``): a dead network path fails a call instead of hanging it. A long-running
service also passes :class:`Deadlines` with statement deadlines: server-side
``statement_timeout`` / ``lock_timeout`` / ``idle_in_transaction_session_timeout``, and a
client-side call deadline (:mod:`toolscore.storage.plumbing.callwatch`) that abandons a call the
server
never answers. Settings given in the database URL's query win over all of these.
"""

from __future__ import annotations

import dataclasses
import math
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url

from toolscore.storage.plumbing.callwatch import CallWatch
from toolscore.storage.plumbing.jsoncodec import json_dumps, json_loads

SQLITE_BUSY_TIMEOUT_MS = 10_000

# Transport deadlines of every PostgreSQL connection. An idle connection whose peer is gone is
# found after KEEPALIVE_IDLE_S + KEEPALIVES_COUNT * KEEPALIVE_INTERVAL_S (25 s); data the peer
# does not acknowledge for TCP_USER_TIMEOUT_S fails the call (the kernel drops the connection).
DEFAULT_CONNECT_TIMEOUT_S = 10.0
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVES_COUNT = 3
TCP_USER_TIMEOUT_S = 20.0
# Query parameter of a URL made by url_with_deadlines (never sent to the database).
CALL_DEADLINE_PARAM = "toolscore_call_deadline"


@dataclass(frozen=True, slots=True)
class Deadlines:
    """Deadlines of one engine's database calls (seconds; None: no such deadline).

    ``call_s`` is the client-side limit on any single call (statement, COMMIT, pre-ping): past
    it the connection is shut down and discarded. It must exceed ``statement_s``, so that the
    server cancels a slow but live statement first and only a silent connection is abandoned.
    On SQLite only ``lock_s`` applies (the busy timeout: how long a writer waits for the lock).
    """

    connect_s: float = DEFAULT_CONNECT_TIMEOUT_S
    statement_s: float | None = None
    lock_s: float | None = None
    idle_in_transaction_s: float | None = None
    call_s: float | None = None


class DatabaseUrlError(ValueError):
    """The database URL is malformed or names an unsupported backend."""


class DatabaseMissingError(DatabaseUrlError):
    """A read-only command was pointed at a SQLite file that does not exist."""


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and pick our drivers: ``postgresql://`` becomes ``postgresql+psycopg://``.

    Errors never show the password, even of a malformed URL (``storage.plumbing.url_safety``).
    """
    from toolscore.storage.plumbing.url_safety import parse_error_reason, url_problem, url_text

    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError with a terse message
        reason = parse_error_reason(exc)
        raise DatabaseUrlError(f"invalid database URL {url_text(url)}: {reason}") from None
    if (problem := url_problem(parsed)) is not None:
        raise DatabaseUrlError(f"invalid database URL {url_text(url)}: {problem}")
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if parsed.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise DatabaseUrlError(
                f"unsupported SQLite driver {parsed.drivername!r}; use sqlite://"
            )
        return parsed
    raise DatabaseUrlError(
        f"unsupported database {backend!r} in {redact(url)}: use sqlite:///PATH or "
        "postgresql+psycopg://USER@HOST:PORT/NAME"
    )


def redact(url: str | URL) -> str:
    """The URL as text with any password hidden (safe to log), even when it is malformed."""
    from toolscore.storage.plumbing.url_safety import url_text

    return url_text(url)


#: Page size of new SQLite files (bytes). 8 KiB pages store a span in 14 % less space than the
#: default 4 KiB (fewer overflow pages for spans with message content: docs/benchmarks.md).
NEW_FILE_PAGE_SIZE = 8192
#: Bytes SQLite truncates the WAL file to after a checkpoint has reset it.
WAL_SIZE_LIMIT = 64 * 1024 * 1024


def _sqlite_pragmas(
    busy_timeout_ms: int, autocheckpoint: bool, temp_in_memory: bool
) -> Callable[[Any, Any], None]:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        try:
            if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
                # A new file: both settings apply only before its first page is written (WAL
                # mode writes it). Incremental vacuum lets span retention give the pages it
                # frees back to the file system (storage/plumbing/database_file.py).
                cursor.execute(f"PRAGMA page_size={NEW_FILE_PAGE_SIZE}")
                cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
            cursor.execute("PRAGMA synchronous=NORMAL")
            # Without a limit the WAL file keeps the size of its largest burst forever.
            cursor.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
            cursor.execute("PRAGMA foreign_keys=ON")
            if (
                not autocheckpoint
            ):  # the owner checkpoints (storage.plumbing.dialect.checkpoint_wal)
                cursor.execute("PRAGMA wal_autocheckpoint=0")
            if temp_in_memory:
                cursor.execute("PRAGMA temp_store=MEMORY")
        finally:
            cursor.close()

    return on_connect


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def postgres_connect_args(deadlines: Deadlines, url: URL) -> dict[str, Any]:
    """libpq connection parameters for ``deadlines``; those set in ``url``'s query are kept."""
    given = url.query
    args: dict[str, Any] = {
        # libpq reads whole seconds and treats anything below 2 as 2
        "connect_timeout": max(2, math.ceil(deadlines.connect_s)),
        "keepalives": 1,
        "keepalives_idle": KEEPALIVE_IDLE_S,
        "keepalives_interval": KEEPALIVE_INTERVAL_S,
        "keepalives_count": KEEPALIVES_COUNT,
        "tcp_user_timeout": _ms(TCP_USER_TIMEOUT_S),
    }
    args = {k: v for k, v in args.items() if k not in given}
    server = [
        (name, value)
        for name, value in (
            ("statement_timeout", deadlines.statement_s),
            ("lock_timeout", deadlines.lock_s),
            ("idle_in_transaction_session_timeout", deadlines.idle_in_transaction_s),
        )
        if value is not None
    ]
    # No JIT compilation: toolscore's statements are index lookups and bulk writes, which JIT
    # never speeds up, but an estimate above jit_above_cost (a table never analysed, autovacuum
    # off) makes every execution compile its plan first: 100-150 ms of server CPU each time.
    ours = " ".join(["-c jit=off", *(f"-c {name}={_ms(value)}" for name, value in server)])
    theirs = given.get("options")
    # later -c settings win: the URL's own options come last
    args["options"] = ours if not theirs else f"{ours} {theirs}"
    return args


def _check_exists(parsed: URL) -> None:
    if parsed.get_backend_name() != "sqlite":
        return
    database = parsed.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return
    if not os.path.exists(database):
        raise DatabaseMissingError(
            f"no database at {database}: `toolscore serve` or `toolscore db upgrade` creates it"
        )


def create_engine(
    url: str | URL,
    *,
    deadlines: Deadlines | None = None,
    on_abandon: Callable[[], None] | None = None,
    must_exist: bool = False,
    autocheckpoint: bool = True,
    temp_in_memory: bool = False,
    **kwargs: Any,
) -> Engine:
    """A SQLAlchemy engine for ``url`` (SQLite file or PostgreSQL), configured for this service.

    ``deadlines`` (default: :class:`Deadlines` ``()``, transport deadlines only) bound every
    call; ``on_abandon`` is called (in the deadline thread) for each call abandoned after
    ``deadlines.call_s``. ``must_exist`` (read-only commands): a SQLite file that does not exist
    raises :class:`DatabaseMissingError` instead of being created empty. ``autocheckpoint``
    False (SQLite): commits never copy the write-ahead log into the file; the caller runs
    :func:`~toolscore.storage.plumbing.dialect.checkpoint_wal` itself, off the commit path.
    ``temp_in_memory`` (SQLite): statement journals and temporary tables stay in memory
    (``temp_store=MEMORY``). A multi-row write that follows another in one transaction keeps a
    journal of the pages it changes; past 64 KiB SQLite moves it to a new temporary file, so
    every ingest transaction created, wrote and deleted one, larger as the indexes grow
    (docs/scaling.md#as-the-data-grows). For serve's processes, whose statements are bounded;
    not for commands whose sorts may be as large as the history.
    """
    parsed = normalize_url(url)
    if must_exist:
        _check_exists(parsed)
    parsed, deadlines = _call_deadline_from_query(parsed, deadlines or Deadlines())
    kwargs.setdefault("json_serializer", json_dumps)
    kwargs.setdefault("json_deserializer", json_loads)
    if parsed.get_backend_name() == "sqlite":
        busy_ms = SQLITE_BUSY_TIMEOUT_MS if deadlines.lock_s is None else _ms(deadlines.lock_s)
        engine = sqlalchemy.create_engine(parsed, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas(busy_ms, autocheckpoint, temp_in_memory))
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    connect_args = postgres_connect_args(deadlines, parsed)
    connect_args.update(kwargs.pop("connect_args", {}))
    engine = sqlalchemy.create_engine(parsed, connect_args=connect_args, **kwargs)
    if deadlines.call_s is not None:
        _watches[engine] = CallWatch(engine, deadlines.call_s, on_abandon)
    return engine


def url_with_deadlines(url: str, deadlines: Deadlines) -> str:
    """``url`` carrying ``deadlines`` in its query (PostgreSQL; other URLs come back unchanged),
    for a process that builds its own engine from a URL, such as a scoring process:
    :func:`create_engine` on that URL applies the same deadlines."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    query = {name: str(value) for name, value in postgres_connect_args(deadlines, parsed).items()}
    if deadlines.call_s is not None and CALL_DEADLINE_PARAM not in parsed.query:
        query[CALL_DEADLINE_PARAM] = repr(deadlines.call_s)
    return parsed.update_query_dict(query).render_as_string(hide_password=False)


def _call_deadline_from_query(url: URL, deadlines: Deadlines) -> tuple[URL, Deadlines]:
    text = url.query.get(CALL_DEADLINE_PARAM)
    if text is None:
        return url, deadlines
    try:
        seconds = float(str(text))
    except ValueError:
        raise DatabaseUrlError(f"{CALL_DEADLINE_PARAM}: not a number: {text!r}") from None
    url = url.difference_update_query([CALL_DEADLINE_PARAM])
    return url, dataclasses.replace(deadlines, call_s=seconds if seconds > 0 else None)


_watches: weakref.WeakKeyDictionary[Engine, CallWatch] = weakref.WeakKeyDictionary()


def call_watch(engine: Engine) -> CallWatch | None:
    """The :class:`~toolscore.storage.plumbing.callwatch.CallWatch` of ``engine`` (None: no call
    deadline)."""
    return _watches.get(engine)

"""Which write failures are the data's fault (resending cannot help) and which may be transient.

A database refuses some values whatever the moment: integers beyond its 64-bit columns, NUL in
PostgreSQL text, a key too long for a btree index, a constraint broken. Those are *data faults*:
the ingest writer isolates the request that carries them instead of failing its neighbours, and
answers it with a non-retryable error. Anything else (connection refused or reset, the server
shutting down, a deadlock, a full disk, a lock timeout) may pass, so it stays retryable.

The description returned is written for clients: it never quotes the database's own message,
which can name hosts, ports, indexes and limits.
"""

from __future__ import annotations

import sqlite3

import orjson
from sqlalchemy import exc as sa_exc

# PostgreSQL SQLSTATE classes (two first characters) that depend on the data only.
_PG_DATA_CLASSES = {
    "21": "a set of values the database cannot take together",  # cardinality violation
    "22": "a value the database cannot store",  # data exception
    "23": "a value that breaks a table constraint",  # integrity constraint violation
    "54": "a value too large for the database (for example a key over the index size limit)",
}
_PG_DATA_CODES = {
    "22003": "a number out of range (integers must fit in a signed 64-bit column)",
    "22021": "text the database cannot store (a NUL character or invalid UTF-8)",
    "22P05": "text the database cannot store (a NUL character or a lone surrogate in JSON)",
    "54000": "a value too long for an index (a key such as a conversation or reference id)",
}
_NUL_HINT = "NUL"  # psycopg's client-side refusal of NUL in text names it


def data_fault(error: BaseException) -> str | None:
    """A client-safe description when ``error`` says the data cannot be stored, else ``None``.

    ``error`` is what a write raised: a SQLAlchemy wrapper, a raw driver error (the COPY path
    talks to psycopg directly) or a Python error from converting a value (``OverflowError`` for
    an integer SQLite cannot hold, ``TypeError`` from the JSON encoder).
    """
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated:
            return None  # a lost connection, whatever the wrapper class says
        return _driver_fault(error.orig) if error.orig is not None else None
    if isinstance(error, sa_exc.StatementError):  # a bind processor refused a value
        return data_fault(error.orig) if error.orig is not None else None
    return _driver_fault(error)


def _driver_fault(error: BaseException) -> str | None:
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        return _PG_DATA_CODES.get(sqlstate) or _PG_DATA_CLASSES.get(sqlstate[:2])
    if _is_psycopg_data_error(error):  # raised by psycopg itself, before the server (no SQLSTATE)
        if _NUL_HINT in str(error):
            return _PG_DATA_CODES["22021"]
        return "a value the database cannot store"
    if isinstance(error, sqlite3.IntegrityError):
        return "a value that breaks a table constraint"
    if isinstance(error, sqlite3.DataError):
        return "a value the database cannot store (too large)"
    if isinstance(error, sqlite3.Error):
        return None  # locked, busy, disk I/O, full: may pass
    if isinstance(error, OverflowError):
        return _PG_DATA_CODES["22003"]
    if isinstance(error, RecursionError):
        return "a value nested too deeply to store"
    if isinstance(error, orjson.JSONEncodeError):  # depth over 254, integer beyond 64 bits
        return "a value the database cannot store as JSON (nested too deeply or out of range)"
    if isinstance(error, UnicodeEncodeError):
        return "text the database cannot store (a lone surrogate)"
    return None  # anything else (our own bugs included) is not blamed on the data


def failure_reason(error: BaseException) -> str:
    """Why a write that is not a data fault failed, in words for ``/health``: a full disk, a
    lost connection, or the error's type (never the database's own message)."""
    orig = error.orig if isinstance(error, sa_exc.DBAPIError) and error.orig else error
    sqlstate = getattr(orig, "sqlstate", None)
    if getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or sqlstate == "53100":
        return "the database's disk is full"
    if isinstance(sqlstate, str) and sqlstate.startswith("53"):
        return "the database server is out of resources (disk, memory or connections)"
    lost = isinstance(error, sa_exc.DBAPIError) and error.connection_invalidated
    if lost or (isinstance(sqlstate, str) and sqlstate.startswith("08")):
        return "the connection to the database was lost"
    return f"the database refused the commit ({type(orig).__name__})"


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` says the database is away or refusing work for now (a lost or refused
    connection, a server shutting down or out of resources, a locked SQLite file, a full disk):
    an expected event to wait out, unlike a fault of the data or of our own code."""
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated or isinstance(
            error, sa_exc.OperationalError | sa_exc.InterfaceError
        ):
            return True
        error = error.orig if error.orig is not None else error
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate[:2] in {"08", "53", "57"}:
        return True
    if isinstance(error, sqlite3.OperationalError):
        return True
    return _is_psycopg_operational_error(error)


def _is_psycopg_operational_error(error: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installs
        return False
    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


def _is_psycopg_data_error(error: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installs
        return False
    return isinstance(error, psycopg.DataError | psycopg.IntegrityError)


__all__ = ["data_fault", "failure_reason", "is_outage"]

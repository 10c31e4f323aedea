"""A client-side deadline on every PostgreSQL call: a call running longer is abandoned.

Server-side timeouts (``statement_timeout``, ``lock_timeout``) only help while the server hears
us, and TCP keepalives / ``tcp_user_timeout`` only when the peer's kernel stops acknowledging.
Behind a proxy, a load balancer or a failed-over address the socket can stay open and silent for
ever: libpq then waits for a reply that never comes, with no error. So one daemon thread per
engine samples every open connection a few times a second; a connection whose current call (a
statement, COMMIT, the pool's pre-ping, a COPY) has been in progress for longer than the
deadline gets its socket shut down. The blocked thread wakes with a connection error at once,
SQLAlchemy sees a disconnect and discards that connection and every older pooled one, and the
next checkout connects afresh.

"In progress" is libpq's own view (``PQtransactionStatus() == PQTRANS_ACTIVE``: a command was
sent and its result not fully read). SQLAlchemy's statement, commit and rollback events mark the
start of each call, so a busy connection running many short statements back to back is never
mistaken for one long call; calls the events do not see (the pre-ping, raw COPY) are timed from
the first sample that saw them in progress (so they get up to one sample period more).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger(__name__)

_PQTRANS_ACTIVE = 1  # libpq's PGTransactionStatusType: a command is in progress


@dataclass(slots=True)
class _Call:
    seq: int = 0  # bumped by every call start the events see
    seen_seq: int = -1  # seq when the current in-progress call was first sampled
    since: float = 0.0  # monotonic time the current call started (or was first sampled)


class CallWatch:
    """Abandons PostgreSQL calls of ``engine`` that run longer than ``deadline_s``."""

    def __init__(
        self,
        engine: Engine,
        deadline_s: float,
        on_abandon: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.deadline_s = deadline_s
        self.period_s = min(0.5, deadline_s / 4)
        self.abandoned = 0  # calls abandoned so far
        self._on_abandon = on_abandon
        self._clock = clock
        self._calls: weakref.WeakKeyDictionary[Any, _Call] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # held while a connection is read, and while it closes
        self._stopped = threading.Event()
        self._install(engine)
        thread = threading.Thread(
            target=_sample_forever,
            args=(weakref.ref(self), self._stopped, self.period_s),
            name="toolscore-db-deadline",
            daemon=True,
        )
        thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _install(self, engine: Engine) -> None:
        event.listen(engine, "connect", self._on_connect)
        event.listen(engine, "close", self._on_close)
        event.listen(engine, "close_detached", self._on_close)
        event.listen(engine, "before_cursor_execute", self._on_statement)
        event.listen(engine, "commit", self._on_transaction_end)
        event.listen(engine, "rollback", self._on_transaction_end)

    # --- events (in the threads using the engine) --------------------------------------------

    def _on_connect(self, dbapi_conn: Any, _record: Any) -> None:
        with self._lock:
            self._calls[dbapi_conn] = _Call()

    def _on_close(self, dbapi_conn: Any, *_args: Any) -> None:
        # Emitted before the close: once it returns the sampler no longer touches the connection.
        with self._lock:
            self._calls.pop(dbapi_conn, None)

    def _on_statement(self, conn: Connection, *_args: Any) -> None:
        self._started(conn)

    def _on_transaction_end(self, conn: Connection) -> None:
        self._started(conn)

    def _started(self, conn: Connection) -> None:
        with contextlib.suppress(Exception):  # an invalidated connection has no DBAPI object
            call = self._calls.get(conn.connection.dbapi_connection)
            if call is not None:
                call.seq += 1
                call.since = self._clock()
                call.seen_seq = call.seq

    # --- the sampler thread --------------------------------------------------------------------

    def sample(self) -> int:
        """Check every open connection once; return how many calls were abandoned."""
        now = self._clock()
        abandoned = 0
        with self._lock:
            for dbapi_conn, call in list(self._calls.items()):
                if self._overdue(dbapi_conn, call, now):
                    _shut_down(dbapi_conn)
                    self._calls.pop(dbapi_conn, None)
                    abandoned += 1
        for _ in range(abandoned):
            self.abandoned += 1
            log.warning(
                "database call abandoned: no reply for %.1f s (--db-call-deadline); its "
                "connection is closed and the pool reconnects",
                self.deadline_s,
            )
            if self._on_abandon is not None:
                self._on_abandon()
        return abandoned

    def _overdue(self, dbapi_conn: Any, call: _Call, now: float) -> bool:
        try:
            active = dbapi_conn.pgconn.transaction_status == _PQTRANS_ACTIVE
        except Exception:  # closed meanwhile
            return False
        if not active:
            call.seen_seq = -1
            return False
        if call.seen_seq != call.seq:  # a call the events did not see: time it from now
            call.seen_seq = call.seq
            call.since = now
            return False
        return now - call.since > self.deadline_s


def _shut_down(dbapi_conn: Any) -> None:
    """Shut the connection's socket down (both ways): the thread blocked on it wakes with an
    error. A duplicate descriptor is shut down and closed; libpq's own stays valid until the
    pool closes the connection."""
    try:
        fd = os.dup(dbapi_conn.pgconn.socket)
    except Exception:
        return
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


def _sample_forever(
    ref: weakref.ReferenceType[CallWatch], stopped: threading.Event, period_s: float
) -> None:
    # Holds the watch weakly: a watch (and its engine) that is gone ends the thread.
    while not stopped.wait(period_s):
        watch = ref()
        if watch is None:
            return
        try:
            watch.sample()
        except Exception:  # the watch must outlive any surprise
            log.exception("database deadline check failed")
        del watch

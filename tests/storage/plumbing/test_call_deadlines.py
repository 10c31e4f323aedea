"""Database call deadlines (storage/plumbing/engine.py, storage/plumbing/callwatch.py) against a
real PostgreSQL
behind a proxy that turns into a black hole: a silent connection fails the call after the call
deadline instead of hanging it, the pool discards it, and the next call reconnects."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from tests.blackhole_proxy import BlackholeProxy
from toolscore.storage.plumbing.engine import (
    Deadlines,
    call_watch,
    create_engine,
    postgres_connect_args,
    url_with_deadlines,
)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[tuple[BlackholeProxy, str]]:
    real = make_url(postgres_url)
    proxy = BlackholeProxy(real.host or "127.0.0.1", real.port or 5432)
    via = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    yield proxy, via
    proxy.close()


def test_libpq_parameters_carry_every_deadline_and_the_url_wins() -> None:
    deadlines = Deadlines(connect_s=3, statement_s=15, lock_s=2.5, idle_in_transaction_s=60)
    args = postgres_connect_args(deadlines, make_url("postgresql+psycopg://u@h/db"))
    assert args["connect_timeout"] == 3
    assert (args["keepalives"], args["keepalives_idle"]) == (1, 10)
    assert (args["keepalives_interval"], args["keepalives_count"]) == (5, 3)
    assert args["tcp_user_timeout"] == 20_000
    assert args["options"] == (
        "-c jit=off -c statement_timeout=15000 -c lock_timeout=2500 "
        "-c idle_in_transaction_session_timeout=60000"
    )
    mine = make_url("postgresql+psycopg://u@h/db?connect_timeout=30&options=-c%20lock_timeout%3D9")
    args = postgres_connect_args(deadlines, mine)
    assert "connect_timeout" not in args  # the URL's own value is used
    assert args["options"].endswith("-c lock_timeout=9")  # last one wins in PostgreSQL


def test_server_side_timeouts_are_in_force(postgres_url: str) -> None:
    engine = create_engine(postgres_url, deadlines=Deadlines(statement_s=0.5, lock_s=0.25))
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "500ms"
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "250ms"
            started = time.monotonic()
            with pytest.raises(OperationalError, match="statement timeout"):
                conn.execute(text("SELECT pg_sleep(5)"))
            assert time.monotonic() - started < 2
    finally:
        engine.dispose()


def test_a_silent_connection_fails_the_call_after_the_deadline_and_the_pool_recovers(
    proxy: tuple[BlackholeProxy, str],
) -> None:
    hole, url = proxy
    abandoned: list[float] = []
    engine = create_engine(
        url,
        deadlines=Deadlines(connect_s=2, call_s=1.0),
        on_abandon=lambda: abandoned.append(time.monotonic()),
    )
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
        hole.blackhole()
        started = time.monotonic()
        with pytest.raises(DBAPIError) as info, engine.connect() as conn:
            # the pre-ping on the pooled connection is what meets the silence
            conn.execute(text("SELECT 2"))
        took = time.monotonic() - started
        assert info.value.connection_invalidated or "timeout" in str(info.value)
        assert 1.0 <= took < 4.0, took
        hole.restore()
        started = time.monotonic()
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 3")).scalar_one() == 3
        assert time.monotonic() - started < 2.0
    finally:
        engine.dispose()
        hole.close()
    watch = call_watch(engine)
    assert watch is not None and watch.abandoned == len(abandoned) >= 1


def test_a_statement_stuck_mid_transaction_is_abandoned_and_nothing_commits(
    proxy: tuple[BlackholeProxy, str], postgres_url: str
) -> None:
    hole, url = proxy
    engine = create_engine(url, deadlines=Deadlines(connect_s=2, call_s=1.0))
    outcome: list[BaseException | None] = []

    def stuck_transaction() -> None:
        try:
            with engine.begin() as conn:
                conn.execute(text("CREATE TABLE t (x int)"))
                hole.blackhole()
                conn.execute(text("INSERT INTO t VALUES (1)"))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    try:
        worker = threading.Thread(target=stuck_transaction)
        started = time.monotonic()
        worker.start()
        worker.join(10)
        assert not worker.is_alive(), "the stuck statement was never abandoned"
        assert 1.0 <= time.monotonic() - started < 4.0
        assert isinstance(outcome[0], DBAPIError) and outcome[0].connection_invalidated
        hole.restore()
        with engine.connect() as conn:  # a fresh connection, no pre-ping on a silent one
            assert conn.execute(text("SELECT 4")).scalar_one() == 4
    finally:
        engine.dispose()
    direct = create_engine(postgres_url)
    try:
        with direct.connect() as conn:
            exists = conn.execute(text("SELECT to_regclass('public.t') IS NOT NULL"))
            assert exists.scalar_one() is False  # the server rolled the transaction back
    finally:
        direct.dispose()


def test_busy_connections_running_many_short_statements_are_never_abandoned(
    postgres_url: str,
) -> None:
    engine = create_engine(postgres_url, deadlines=Deadlines(call_s=0.3))
    try:
        with engine.connect() as conn:
            ends = time.monotonic() + 1.5  # five deadlines of back-to-back statements
            count = 0
            while time.monotonic() < ends:
                conn.execute(text("SELECT pg_sleep(0.01)"))
                count += 1
        watch = call_watch(engine)
        assert watch is not None and watch.abandoned == 0 and count > 20
    finally:
        engine.dispose()


def test_sqlite_busy_timeout_follows_the_lock_deadline(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url, deadlines=Deadlines(lock_s=2.5))
    default = create_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == 2500
        with default.connect() as conn:
            assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == 10_000
        assert call_watch(engine) is None
    finally:
        engine.dispose()
        default.dispose()


def test_a_url_carries_the_deadlines_to_an_engine_built_elsewhere(postgres_url: str) -> None:
    # how a scoring process (its own engine, built from a URL) gets the server's deadlines
    deadlines = Deadlines(connect_s=3, statement_s=1.5, lock_s=0.5, call_s=2.5)
    url = url_with_deadlines(postgres_url, deadlines)
    assert "toolscore_call_deadline=2.5" in url
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW statement_timeout")).scalar_one() == "1500ms"
            assert conn.execute(text("SHOW lock_timeout")).scalar_one() == "500ms"
        watch = call_watch(engine)
        assert watch is not None and watch.deadline_s == 2.5
    finally:
        engine.dispose()
    assert url_with_deadlines("sqlite:///x.db", deadlines) == "sqlite:///x.db"

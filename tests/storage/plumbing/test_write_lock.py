"""The one way a transaction takes SQLite's write lock (``storage.plumbing.dialect``):
``take_write_lock`` begins it holding the lock (``BEGIN IMMEDIATE`` through SQLite's busy
handler), and ``write_transaction`` has serve's writers take turns first
(``storage.plumbing.turns``: ``flock`` locks beside the database), so that a writer waiting
behind back-to-back transactions goes after the one in progress, not at the busy handler's next
sleep."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from toolscore.storage.plumbing.dialect import take_write_lock, write_transaction
from toolscore.storage.plumbing.engine import Deadlines, create_engine
from toolscore.storage.plumbing.turns import write_turn


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlite_url, deadlines=Deadlines(lock_s=0.3))
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    yield engine
    engine.dispose()


def other_writer(engine: Engine) -> sqlite3.Connection:
    path = engine.url.database
    assert path is not None
    return sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)


def rows(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(text("SELECT x FROM t ORDER BY x")).scalars().all())


def test_the_transaction_holds_the_write_lock_from_its_start(engine: Engine) -> None:
    other = other_writer(engine)
    with engine.begin() as conn:
        take_write_lock(conn)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("INSERT INTO t VALUES (2)")
        conn.execute(text("INSERT INTO t VALUES (1)"))
    other.execute("INSERT INTO t VALUES (2)")  # free once committed
    assert rows(engine) == [1, 2]


def test_a_transaction_a_write_began_keeps_its_lock(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
        take_write_lock(conn)  # no second BEGIN
        conn.execute(text("INSERT INTO t VALUES (2)"))
    assert rows(engine) == [1, 2]


def test_it_waits_for_a_writer_and_goes_on_once_that_one_commits(engine: Engine) -> None:
    other = other_writer(engine)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")
    threading.Timer(0.15, other.execute, ("COMMIT",)).start()
    started = time.monotonic()
    with engine.begin() as conn:
        take_write_lock(conn)
        waited = time.monotonic() - started
        conn.execute(text("INSERT INTO t VALUES (2)"))
    assert waited >= 0.1, "it had to wait for the other writer"
    assert rows(engine) == [1, 2]


def test_it_gives_up_after_the_busy_timeout_and_keeps_that_timeout(engine: Engine) -> None:
    other = other_writer(engine)
    other.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"), write_transaction(engine):
        pass
    assert time.monotonic() - started >= 0.29, "gave up before the lock deadline (lock_s=0.3)"
    other.execute("ROLLBACK")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == 300


def test_a_write_transaction_commits_and_rolls_back(engine: Engine) -> None:
    with write_transaction(engine) as conn:
        conn.execute(text("INSERT INTO t VALUES (1)"))
    with pytest.raises(RuntimeError), write_transaction(engine) as conn:
        conn.execute(text("INSERT INTO t VALUES (2)"))
        raise RuntimeError("rolled back")
    assert rows(engine) == [1]


def test_writers_take_turns_and_a_waiter_goes_as_soon_as_the_holder_is_done(
    engine: Engine,
) -> None:
    order: list[str] = []
    holding = threading.Event()

    def holder() -> None:
        with write_transaction(engine) as conn:
            holding.set()
            conn.execute(text("INSERT INTO t VALUES (1)"))
            time.sleep(0.2)
            order.append("holder done")

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait(5)
    with write_transaction(engine) as conn:
        order.append("waiter in")
        conn.execute(text("INSERT INTO t VALUES (2)"))
    thread.join()
    assert order == ["holder done", "waiter in"]
    assert rows(engine) == [1, 2]


def test_the_turn_is_a_lock_on_a_file_beside_the_database(engine: Engine) -> None:
    path = f"{engine.url.database}-turn"
    with write_turn(engine.url.database):
        other = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # held: another process would wait
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once the block is left
    finally:
        os.close(other)


WAITER = """
import sys
from toolscore.storage.plumbing.turns import write_turn
with write_turn(sys.argv[1]):
    print("turn", flush=True)
"""


def _queued(path: str) -> bool:
    """Someone holds the queue lock (a writer waiting for the turn)."""
    fd = os.open(f"{path}-turn-queue", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_writer_going_back_to_back_lets_the_one_waiting_go_first(tmp_path: Path) -> None:
    """The waiter is a process stopped while it waits (as a busy machine may leave it, off a
    CPU): the writer that had the turn cannot take it again before the waiter had it."""
    path = str(tmp_path / "db")
    waiter: subprocess.Popen[str] | None = None
    again = threading.Event()
    try:
        with write_turn(path):
            waiter = subprocess.Popen(
                [sys.executable, "-c", WAITER, path], stdout=subprocess.PIPE, text=True
            )
            deadline = time.monotonic() + 30
            while not _queued(path):
                assert time.monotonic() < deadline, "the waiter never queued"
                time.sleep(0.01)
            waiter.send_signal(signal.SIGSTOP)

        def back_to_back() -> None:
            with write_turn(path):
                again.set()

        thread = threading.Thread(target=back_to_back)
        thread.start()
        assert not again.wait(0.5), "took the turn again while a writer was waiting"
        waiter.send_signal(signal.SIGCONT)
        assert waiter.stdout is not None and waiter.stdout.readline() == "turn\n"
        thread.join(10)
        assert again.is_set()
    finally:
        if waiter is not None:
            waiter.send_signal(signal.SIGCONT)
            waiter.wait(10)


def test_a_database_in_memory_has_no_turn() -> None:
    engine = create_engine("sqlite://")
    try:
        with write_transaction(engine) as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


def test_postgresql_transactions_are_left_as_they_are(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    try:
        with write_transaction(engine) as conn:
            take_write_lock(conn)  # row locks there: nothing to take
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()

"""Turns between the writers of one SQLite file: serve's ingest writer and its scoring processes.

SQLite lets one transaction write at a time, and a writer that finds the lock taken sleeps in
its busy handler, in steps growing to 100 ms: behind ingest committing back to back it misses
the short gaps between two commits, and scoring fell behind during bursts. These writers take
turns instead, through two ``flock`` locks on files beside the database: ``FILE-turn``, held
exclusively by the writer whose turn it is, and ``FILE-turn-queue``, held shared by the writers
waiting for it. A writer first lets those already waiting go ahead (an exclusive lock on the
queue is granted once each of them has had its turn), then queues and waits for the turn. The
kernel wakes a waiter when the holder lets go (or its process dies), and a writer that commits
back to back cannot take the turn again before those waiting have had theirs. Writers that do
not take turns (another program, ``toolscore prune``) still wait through SQLite's busy handler.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def write_turn(path: str | None) -> Iterator[None]:
    """Hold the turn of the database file ``path`` (None, or a directory where the lock files
    cannot be made: no turn, a no-op) while in the block."""
    turn = _open(f"{path}-turn") if path is not None else None
    queue = _open(f"{path}-turn-queue") if path is not None else None
    try:
        if turn is None or queue is None:
            yield
            return
        _after_those_waiting(queue)
        fcntl.flock(queue, fcntl.LOCK_SH)  # seen waiting from now on
        fcntl.flock(turn, fcntl.LOCK_EX)
        fcntl.flock(queue, fcntl.LOCK_UN)
        yield
    finally:
        for fd in (turn, queue):
            if fd is not None:
                os.close(fd)  # releases its lock


def _after_those_waiting(queue: int) -> None:
    try:
        fcntl.flock(queue, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # writers are waiting for the turn: they go first
        fcntl.flock(queue, fcntl.LOCK_EX)
    fcntl.flock(queue, fcntl.LOCK_UN)


def _open(path: str) -> int | None:
    # A descriptor per turn: flock locks belong to the open file, so threads of one process
    # sharing a descriptor would not exclude each other.
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None

"""Keeps the pages of SQLite's random-keyed indexes mapped into this process's memory.

Every new trace inserts its random 128-bit id into the ``traces`` index, at a page of its own
once the index outgrows what a few seconds of inserts touch; so do conversation ids where they
are random. Those pages sit in the operating system's page cache between two visits, and a
reclaimer that pages out what has been idle for a minute (as this VM's DAMON does with page
cache no process maps) pushes them out, so that an insert waits for a disk read. SQLite's own
page cache does not keep them: it is dropped whenever another process commits. Pages that some
process maps stay: :class:`ResidentPages` maps the file and populates the pages of those
indexes (``MADV_POPULATE_READ``: no byte is ever dereferenced, so a file truncated meanwhile
gives an error, not ``SIGBUS``). Under memory pressure the kernel still reclaims them like any
clean file page.
"""

from __future__ import annotations

import errno
import mmap
import os
from dataclasses import dataclass

from sqlalchemy import Connection

from toolscore.storage.plumbing.database_file import NoPageList, index_pages

# The random-keyed indexes, most written first: the trace-id index takes an insert per trace,
# whatever the instrumentation; the others one per conversation, random where the ids are.
RANDOM_KEYED_INDEXES = (
    "sqlite_autoindex_traces_1",  # traces.trace_id
    "sqlite_autoindex_conversations_1",  # conversations.id
    "ix_traces_conversation_id",
    "ix_log_records_trace_id",
)
MADV_POPULATE_READ = 22  # Linux 5.14+; Python's mmap module does not name it


@dataclass(frozen=True, slots=True)
class Residency:
    """What one :meth:`ResidentPages.refresh` kept mapped."""

    resident_bytes: int
    index_bytes: int  # all the pages of the indexes, within the budget or not


class ResidencyUnavailable(RuntimeError):
    """Pages cannot be kept mapped here (not Linux 5.14+, or no ``dbstat`` in SQLite)."""


class ResidentPages:
    """A map of a SQLite file whose index pages :meth:`refresh` populates, ``budget`` bytes at
    most; one instance per file, used from one thread at a time."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._map: mmap.mmap | None = None
        self._path = ""

    def refresh(self, conn: Connection) -> Residency | None:
        """Populate the indexes' pages as they are now; None where there is nothing to keep
        (PostgreSQL, a database in memory)."""
        try:
            found = index_pages(conn, RANDOM_KEYED_INDEXES)
        except NoPageList as exc:
            raise ResidencyUnavailable(str(exc)) from exc
        if found is None:
            return None
        if not hasattr(mmap.mmap, "madvise"):  # not Linux
            raise ResidencyUnavailable("this system cannot populate a map (no madvise)")
        wanted = found.pages[: self._budget // found.page_size]
        mapping = self._mapping(found.path)
        kept = _map_exactly(mapping, _runs(wanted, found.page_size))
        return Residency(kept, len(found.pages) * found.page_size)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def _mapping(self, path: str) -> mmap.mmap:
        size = os.path.getsize(path)
        if self._map is not None and self._path == path and size == len(self._map):
            return self._map
        fd = os.open(path, os.O_RDONLY)
        try:  # the new map first: pages the old one holds stay resident meanwhile
            new = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.close()
        self._map, self._path = new, path
        return new


def _runs(pages: tuple[int, ...], page_size: int) -> list[tuple[int, int]]:
    """(offset, length) of each run of consecutive pages."""
    runs: list[list[int]] = []
    for page in sorted(pages):
        start = (page - 1) * page_size
        if runs and runs[-1][0] + runs[-1][1] == start:
            runs[-1][1] += page_size
        else:
            runs.append([start, page_size])
    return [(start, length) for start, length in runs]


def _populate(mapping: mmap.mmap, start: int, length: int) -> int:
    """Map in [start, start + length): the bytes populated. Pages past the end of the map (in
    the write-ahead log only, for now) or of the file (truncated since) count nothing."""
    aligned = start - start % mmap.PAGESIZE
    length = min(length, len(mapping) - start)
    if length <= 0:
        return 0
    try:
        mapping.madvise(MADV_POPULATE_READ, aligned, length + start - aligned)
    except OSError as exc:
        if exc.errno == errno.EFAULT:  # past the file's end: truncated since it was mapped
            return 0
        raise ResidencyUnavailable(f"madvise(MADV_POPULATE_READ): {exc}") from exc
    return length


def _map_exactly(mapping: mmap.mmap, runs: list[tuple[int, int]]) -> int:
    """Map in ``runs`` and nothing else: the bytes populated. A fault maps the cached pages
    around it too (fault-around, 64 KiB), which would keep up to 8 times the budget out of the
    reclaimer's reach: each gap is unmapped once the runs on both sides are in, so that the
    surplus never exceeds two windows. Dropping a shared file map's pages leaves the cache as
    it was."""
    kept = end = 0
    for start, length in [*runs, (len(mapping), 0)]:
        kept += _populate(mapping, start, length)
        gap_start = -(-end // mmap.PAGESIZE) * mmap.PAGESIZE  # whole pages outside the runs
        gap_end = min(start, len(mapping)) // mmap.PAGESIZE * mmap.PAGESIZE
        if gap_end > gap_start:
            mapping.madvise(mmap.MADV_DONTNEED, gap_start, gap_end - gap_start)
        end = start + length
    return kept

"""What the kernel says a process has mapped of a file (/proc/PID/smaps and pagemap)."""

from __future__ import annotations

import mmap
from collections.abc import Sequence
from pathlib import Path


def mapped_bytes(path: Path, pid: int | str = "self") -> int:
    """Resident bytes of process ``pid``'s maps of ``path`` (page-table entries present). The
    kernel maps cached neighbours of a faulted page too (fault-around, 64 KiB)."""
    total, inside = 0, False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:  # a map's first line
            inside = len(fields) >= 6 and fields[5] == str(path)
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total


def mapped_pages(path: Path, pages: Sequence[int], page_size: int) -> list[int]:
    """Those of SQLite's ``pages`` of ``path`` this process has mapped (/proc/self/pagemap)."""
    maps = [line.split() for line in Path("/proc/self/maps").read_text().splitlines()]
    (base,) = [int(m[0].split("-")[0], 16) for m in maps if len(m) >= 6 and m[5] == str(path)]
    mapped = []
    with Path("/proc/self/pagemap").open("rb") as pagemap:
        for page in pages:
            pagemap.seek((base + (page - 1) * page_size) // mmap.PAGESIZE * 8)
            if int.from_bytes(pagemap.read(8), "little") >> 63:  # present
                mapped.append(page)
    return mapped

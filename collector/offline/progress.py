"""The one-line progress report of a long ``toolscore score`` on a terminal."""

from __future__ import annotations

import time
from typing import IO


class Progress:
    """A one-line progress report on a terminal's stderr, redrawn at most 5 times a second."""

    def __init__(self, stream: IO[str], total_bytes: int | None) -> None:
        self.stream, self.total = stream, total_bytes
        self.count = self.done = 0
        self.started = self.last = time.monotonic()

    def advance(self, count: int, size: int) -> None:
        self.count += count
        self.done += size
        now = time.monotonic()
        if now - self.last >= 0.2:
            self.last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.count / max(now - self.started, 1e-9)
        text = f"\rtoolscore score: {self.count:,} samples ({rate:,.0f}/s)"
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = int(fraction * 30)
            text += f" [{'#' * filled}{'.' * (30 - filled)}] {fraction:.0%}"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.count:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

"""Aggregates the pages share, kept for a while: answered at once, refreshed in the background.

A page whose figures cost a scan of the period (the overview's scores and coverage) is answered
from the last computed value while it is younger than its time to live; once older, the next
request still gets it and starts one refresh (never two at once). The time to live is at least
``ttl_s`` and at least ``cost_factor`` times what the last computation took, so however large
the history grows the refreshes cost at most about ``1 / cost_factor`` of a core. Only a request
that comes before the first computation ended waits for it, or one that finds the value stale
while computing it is cheap (under ``wait_below_s``): small databases always show fresh
figures. :meth:`invalidate` marks a value stale at once (``serve`` does when scores were
written).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("toolscore.ui")


class Cached:
    def __init__(self, ttl_s: float, cost_factor: float = 20.0, wait_below_s: float = 0.2) -> None:
        self.ttl_s = ttl_s
        self.cost_factor = cost_factor
        self.wait_below_s = wait_below_s
        # key -> (when computed, time to live, what it cost, value)
        self._values: dict[str, tuple[float, float, float, Any]] = {}
        self._stale: set[str] = set()
        self._refreshing: dict[str, asyncio.Task[Any]] = {}

    async def get(self, key: str, compute: Callable[[], Awaitable[Any]]) -> Any:
        found = self._values.get(key)
        if found is None:
            return await self._refresh(key, compute)
        when, ttl, cost, value = found
        stale = key in self._stale or time.monotonic() - when > ttl
        if stale and cost < self.wait_below_s:
            return await self._refresh(key, compute)
        if stale and key not in self._refreshing:
            task = asyncio.get_running_loop().create_task(self._refresh(key, compute))
            task.add_done_callback(_log_failure)
        return value

    async def _refresh(self, key: str, compute: Callable[[], Awaitable[Any]]) -> Any:
        running = self._refreshing.get(key)
        if running is not None:
            return await asyncio.shield(running)
        began = time.monotonic()
        self._stale.discard(key)
        task = asyncio.ensure_future(compute())
        self._refreshing[key] = task
        try:
            value = await task
        finally:
            self._refreshing.pop(key, None)
        done = time.monotonic()
        cost = done - began
        self._values[key] = (done, max(self.ttl_s, self.cost_factor * cost), cost, value)
        return value

    def start(self, key: str, compute: Callable[[], Awaitable[Any]]) -> None:
        """Compute ``key`` in the background unless that is already under way."""
        if key not in self._refreshing:
            task = asyncio.get_running_loop().create_task(self._refresh(key, compute))
            task.add_done_callback(_log_failure)

    def ready(self, key: str) -> bool:
        """Whether a value of ``key`` was computed (it may be stale)."""
        return key in self._values

    def invalidate(self, key: str) -> None:
        """Mark ``key`` stale (safe from any thread: one set insertion)."""
        self._stale.add(key)


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("web UI: refreshing a page's figures failed: %s", task.exception())

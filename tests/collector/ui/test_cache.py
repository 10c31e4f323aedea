"""Figures kept for a while and refreshed in the background (collector/ui/cache.py)."""

from __future__ import annotations

import asyncio

from toolscore.collector.ui.cache import Cached


def test_one_computation_serves_concurrent_and_later_requests_until_it_is_stale() -> None:
    calls = 0

    async def compute() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return calls

    async def scenario() -> None:
        cache = Cached(ttl_s=0.2, cost_factor=0, wait_below_s=0)
        first = await asyncio.gather(*(cache.get("k", compute) for _ in range(5)))
        assert first == [1] * 5 and calls == 1
        assert await cache.get("k", compute) == 1  # fresh: no computation
        await asyncio.sleep(0.25)
        assert await cache.get("k", compute) == 1  # stale: answered at once, refresh started
        await asyncio.sleep(0.1)
        assert await cache.get("k", compute) == 2 and calls == 2

    asyncio.run(scenario())


def test_an_expensive_computation_is_refreshed_less_often() -> None:
    async def scenario() -> None:
        cache = Cached(ttl_s=0.01, cost_factor=20)

        async def slow() -> str:
            await asyncio.sleep(0.05)
            return "v"

        await cache.get("k", slow)
        ttl = cache._values["k"][1]
        assert ttl >= 20 * 0.05 * 0.9

    asyncio.run(scenario())


def test_a_cheap_stale_value_is_recomputed_before_answering_and_invalidate_marks_it_stale() -> None:
    calls = 0

    async def compute() -> int:
        nonlocal calls
        calls += 1
        return calls

    async def scenario() -> None:
        cache = Cached(ttl_s=60)
        assert await cache.get("k", compute) == 1
        assert await cache.get("k", compute) == 1
        cache.invalidate("k")
        assert await cache.get("k", compute) == 2  # cheap: waited for, fresh

    asyncio.run(scenario())


def test_start_computes_in_the_background_once() -> None:
    calls = 0

    async def compute() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return calls

    async def scenario() -> None:
        cache = Cached(ttl_s=60)
        cache.start("k", compute)
        cache.start("k", compute)  # already under way
        assert not cache.ready("k")
        await asyncio.sleep(0.1)
        assert cache.ready("k") and await cache.get("k", compute) == 1 and calls == 1

    asyncio.run(scenario())

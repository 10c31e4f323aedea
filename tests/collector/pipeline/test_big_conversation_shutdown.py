"""A big conversation on PostgreSQL: its reconstruction runs outside any transaction, and a
shutdown while it is being scored is prompt.

Before: scoring kept the read transaction open while a conversation was rebuilt in Python, so a
300,000-span conversation (rebuilt in more than the 60 s idle-in-transaction timeout) lost its
connection (``IdleInTransactionSessionTimeout``) and was never scored; and ``stop()`` waited for
it, past the shutdown grace ("PipelineWorker did not stop in time; abandoned", exit 1).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import time

import pytest

from tests.collector.pipeline.test_big_conversation import (
    REFERENCE,
    SPANS_PER_TRACE,
    conversation_of,
    revisions,
)
from tests.collector.pipeline.test_score import expect
from toolscore.collector.pipeline import rounds
from toolscore.collector.pipeline.child import ScoringProcess
from toolscore.collector.pipeline.claim import NS, SizeLimits, Timing
from toolscore.collector.pipeline.rounds import RoundRunner
from toolscore.collector.pipeline.worker import PipelineWorker
from toolscore.scorer import default_config
from toolscore.storage.conversations.leases import lease_of
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import Deadlines, create_engine
from toolscore.storage.schema import metadata

# PostgreSQL ends a session idle inside a transaction this long; rebuilding the conversation
# below takes longer than that, so scoring it inside one transaction fails. The spans are
# streamed in small batches so that decoding one between fetches stays far below it, even on
# a busy machine, and the test process's own heap (every earlier test's objects) is kept out
# of the garbage collector's full passes, which could pause a fetch for longer.
IDLE_IN_TRANSACTION_S = 0.5
TRACES = 1_500  # 10,500 spans
STREAM_ROWS = 200


def test_a_big_conversation_is_rebuilt_outside_any_transaction(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rounds, "BIG_BATCH_ROWS", STREAM_ROWS)
    engine = create_engine(postgres_url, deadlines=Deadlines(idle_in_transaction_s=30))
    metadata.create_all(engine)
    strict = create_engine(
        postgres_url, deadlines=Deadlines(idle_in_transaction_s=IDLE_IN_TRANSACTION_S)
    )
    try:
        expect(engine, ExpectationData(id="bench", reference_tool_calls=REFERENCE))
        conversation_of(engine, "big", TRACES, time.time_ns() - 60 * NS)
        runner = RoundRunner(
            strict,
            default_config(),
            timing=Timing(),
            batch_size=50,
            worker_id="w",
            limits=SizeLimits(big_spans=100),
        )
        (claimed,) = runner.run_once().big
        gc.collect()
        gc.freeze()
        started = time.monotonic()
        try:
            assert runner.score_big(claimed).statuses == ("scored",)
        finally:
            gc.unfreeze()
        took = time.monotonic() - started
        assert revisions(engine)["big"][:2] == ("scored", 1)
    finally:
        strict.dispose()
        engine.dispose()
    print(f"\n{TRACES * SPANS_PER_TRACE} spans scored in {took:.1f} s")
    assert took > IDLE_IN_TRANSACTION_S  # the rebuild did outlast the idle timeout


async def _stop_while_scoring(worker: PipelineWorker) -> float:
    await worker.start()
    deadline = time.monotonic() + 120
    while "big" not in worker.held:
        assert time.monotonic() < deadline, "the big conversation was never handed off"
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)  # its process is loading and rebuilding it
    started = time.monotonic()
    await worker.stop()
    return time.monotonic() - started


def test_stop_ends_the_scoring_of_a_big_conversation_and_releases_it(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    metadata.create_all(engine)
    try:
        expect(engine, ExpectationData(id="bench", reference_tool_calls=REFERENCE))
        conversation_of(engine, "big", 5_000, time.time_ns())  # 35,000 spans: tens of seconds
        timing = Timing(settle_s=0.3, idle_s=0.2, lease_s=60)
        worker = PipelineWorker(
            engine,
            default_config(),
            timing=timing,
            poll_s=0.2,
            worker_id="w",
            process=ScoringProcess(postgres_url),
            limits=SizeLimits(big_spans=100),
        )
        took = asyncio.run(_stop_while_scoring(worker))
        assert took < 5, f"stop() took {took:.1f} s"
        assert revisions(engine)["big"][:2] == ("open", 0)
        with engine.connect() as conn:
            _who, until = lease_of(conn, "big")
        assert until is not None and until <= dt.datetime.now(dt.UTC), "claim released"
    finally:
        engine.dispose()

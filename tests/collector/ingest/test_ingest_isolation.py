"""A request the database refuses for its data is isolated from its group commit.

The writer gets records that decode would have rejected (built directly, as a future decode gap
would let them through), committed in one batch with six good requests and the real conversation
hook: the six are committed, only the poison request fails, non-retryably, naming what is wrong
without the database's text. A database that is down still fails everything retryably.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Sequence

import pytest
from sqlalchemy import Connection, func, select

from toolscore.collector.errors import StorageUnavailable, UnstorableData, status_for
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import IngestConfig, IngestWriter, StoredBatch
from toolscore.collector.pipeline.assign import AssignConfig
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.hook import ConversationHook
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import spans_table

CONV = "gen_ai.conversation.id"


def _span(trace: int, span: int, **kw: object) -> SpanRecord:
    fields: dict[str, object] = {
        "trace_id": f"{trace:032x}",
        "span_id": f"{span:016x}",
        "parent_span_id": None,
        "name": f"span {span}",
        "kind": 1,
        "start_ns": 1_700_000_000_000_000_000 + span,
        "end_ns": 1_700_000_000_000_000_999 + span,
        "attributes": {CONV: f"conv-{trace}"},
    }
    fields.update(kw)
    return SpanRecord(**fields)  # type: ignore[arg-type]


def _deep(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


# Each poison: (span, databases that refuse it); its own trace, so its id names a conversation.
# On SQLite NUL and long keys are fine.
POISONS: dict[str, tuple[SpanRecord, set[str]]] = {
    "start_ns 2^63": (_span(101, 50, start_ns=2**63), {"sqlite", "postgresql"}),
    "value nested 300 deep": (
        _span(101, 50, attributes={"deep": _deep(300)}),
        {"sqlite", "postgresql"},
    ),
    "NUL in conversation id": (_span(101, 50, attributes={CONV: "c\x00"}), {"postgresql"}),
    "3,200-byte conversation id": (
        _span(101, 50, attributes={CONV: os.urandom(1600).hex()}),
        {"postgresql"},
    ),
}


class BatchSizes:
    """Ingest hook (after the conversation hook): the spans of each transaction that got past
    the inserts and the conversation hook (the ones that commit)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        self.sizes.append(len(batch.spans))


def _count(url: str, table: object = spans_table) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(table)).scalar_one()  # type: ignore[arg-type]
    engine.dispose()
    return int(n)


async def _submit_together(
    writer: IngestWriter, requests: Sequence[Sequence[SpanRecord]]
) -> list[BaseException | None]:
    # gather queues every request before the writer task runs: they share one batch
    results = await asyncio.gather(*(writer.submit(r) for r in requests), return_exceptions=True)
    return [r if isinstance(r, BaseException) else None for r in results]


def _run(url: str, requests: Sequence[Sequence[SpanRecord]], sizes: BatchSizes, metrics: Metrics):  # type: ignore[no-untyped-def]
    upgrade(url)
    engine = create_engine(url)
    hook = ConversationHook(AssignConfig(), Timing())
    writer = IngestWriter(engine, IngestConfig(), hooks=[hook, sizes], metrics=metrics)

    async def main() -> list[BaseException | None]:
        await writer.start()
        try:
            return await _submit_together(writer, requests)
        finally:
            await writer.stop()

    try:
        return asyncio.run(main())
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", POISONS)
def test_six_good_requests_commit_and_only_the_poison_request_fails(db_url: str, kind: str) -> None:
    poison, refused_by = POISONS[kind]
    good = [[_span(trace, i) for i in range(1, 21)] for trace in range(1, 7)]
    poisoned = [_span(100, i) for i in range(1, 50)] + [poison]
    poisoned += [_span(100, i) for i in range(51, 101)]
    requests = [good[0], good[1], good[2], poisoned, good[3], good[4], good[5]]
    sizes, metrics = BatchSizes(), Metrics()

    outcomes = _run(db_url, requests, sizes, metrics)

    dialect = "postgresql" if db_url.startswith("postgresql") else "sqlite"
    assert outcomes[:3] + outcomes[4:] == [None] * 6  # the six neighbours: all committed
    if dialect not in refused_by:
        assert outcomes[3] is None and _count(db_url) == 6 * 20 + 100
        return
    error = outcomes[3]
    assert isinstance(error, UnstorableData), error
    status = status_for(error)
    assert (status.http_status, status.grpc_code.name) == (400, "INVALID_ARGUMENT")
    assert status.retry_after_s is None  # not retryable: exporters drop it
    assert "resending it unchanged will fail again" in status.message
    for internal in ("psycopg", "sqlite3", "bigint", "btree", "index row", "Recursion limit"):
        assert internal not in status.message
    assert _count(db_url) == 6 * 20  # the poison request: nothing of it stored
    assert _count(db_url, conversations) == 6  # and no conversation of it either
    assert metrics.unstorable_requests._value.get() == 1
    # The seven shared one transaction, then halves: [0-6] refused, [0-2] commits, [3-6]
    # refused, [3,4] refused, [3] refused (isolated), [4] commits, [5,6] commits.
    assert metrics.data_faults._value.get() == 4
    assert sizes.sizes == [60, 20, 40]  # the committed ones, in spans
    assert metrics.commit_failures._value.get() == 0


def test_two_poison_requests_are_both_isolated(sqlite_url: str) -> None:
    good = [[_span(trace, i) for i in range(1, 11)] for trace in range(1, 7)]
    bad = [[_span(100 + n, 1, start_ns=2**64 - 1)] for n in range(2)]
    requests = [bad[0], *good[:3], bad[1], *good[3:]]
    metrics = Metrics()
    outcomes = _run(sqlite_url, requests, BatchSizes(), metrics)
    assert [type(o).__name__ for o in outcomes] == ["UnstorableData"] + ["NoneType"] * 3 + [
        "UnstorableData"
    ] + ["NoneType"] * 3
    assert _count(sqlite_url) == 60
    assert metrics.unstorable_requests._value.get() == 2


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_database_that_is_down_fails_every_request_retryably_without_its_address() -> None:
    port = _closed_port()
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{port}/none")
    metrics = Metrics()
    writer = IngestWriter(engine, IngestConfig(retry_after_s=0.5), metrics=metrics)

    async def main() -> list[BaseException | None]:
        await writer.start()
        try:
            return await _submit_together(writer, [[_span(t, 1)] for t in range(1, 5)])
        finally:
            await writer.stop()

    outcomes = asyncio.run(main())
    engine.dispose()
    assert all(isinstance(o, StorageUnavailable) for o in outcomes)
    status = status_for(outcomes[0])  # type: ignore[arg-type]
    assert (status.http_status, status.retry_after_s) == (503, 0.5)
    assert str(port) not in status.message and "127.0.0.1" not in status.message
    assert metrics.data_faults._value.get() == 0  # no bisection against a dead database
    assert metrics.commit_failures._value.get() == 1

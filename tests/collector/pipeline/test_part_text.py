"""A round's part is bounded in text too: it stops taking conversations once the text decoded so
far reaches ``SizeLimits.part_chars``, and the rest are scored in the round's next parts.

Before: a part was bounded in spans only, so sixteen conversations of 900 spans each holding a
distinct 62,000-byte message (14,400 spans, under the 20,000 of a part) were loaded together,
about 1 GB in one scoring process.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time

import pytest
from sqlalchemy import Engine, select

from tests.collector.pipeline.test_big_conversation import (
    REFERENCE,
    agent_trace,
    ingest,
    revisions,
)
from tests.collector.pipeline.test_score import expect
from toolscore.collector.pipeline import loading
from toolscore.collector.pipeline.claim import NS, SizeLimits, Timing
from toolscore.collector.pipeline.loading import load_within
from toolscore.collector.pipeline.rounds import RoundRunner
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.expectations.repository import ExpectationData

NOTE_CHARS = 100_000  # distinct text per conversation, on its root span
IDS = [f"c{i}" for i in range(6)]


def conversation_with_text(engine: Engine, conv_id: str, at_ns: int) -> None:
    """An ordinary 7-span agent turn whose root span also carries NOTE_CHARS of distinct text
    (stored as compressed pieces, so its rows do not show its size)."""
    root, *rest = agent_trace(conv_id, 10**18)
    note = os.urandom(NOTE_CHARS // 2).hex()
    root = dataclasses.replace(root, attributes={**root.attributes, "app.note": note})
    ingest(engine, [root, *rest], at_ns)


@pytest.fixture
def six(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Engine:
    expect(engine, ExpectationData(id="bench", reference_tool_calls=REFERENCE))
    for conv_id in IDS:
        conversation_with_text(engine, conv_id, time.time_ns() - 60 * NS)
    monkeypatch.setattr(loading, "GROUP_SPANS", 7)  # one conversation a group
    return engine


def parts_written(engine: Engine, limits: SizeLimits) -> list[int]:
    clock = itertools.count(time.time_ns(), NS)  # each write of a part: its own created_at
    runner = RoundRunner(
        engine,
        default_config(),
        timing=Timing(),
        batch_size=500,
        worker_id="w",
        clock_ns=lambda: next(clock),
        limits=limits,
    )
    result = runner.run_once()
    assert result.claimed == 6 and sorted(result.ids) == IDS
    assert set(result.statuses) == {"scored"}
    assert {r[:2] for r in revisions(engine).values()} == {("scored", 1)}
    with engine.connect() as conn:
        rows = conn.execute(select(evaluations.c.created_at, evaluations.c.conversation_id))
        by_part: dict[object, set[str]] = {}
        for created_at, conv_id in rows:
            by_part.setdefault(created_at, set()).add(conv_id)
    return sorted(len(p) for p in by_part.values())


def test_a_part_stops_taking_conversations_once_its_text_reaches_the_budget(six: Engine) -> None:
    # 100,000 characters each: the second reaches 150,000, the third waits for the next part
    assert parts_written(six, SizeLimits(part_chars=150_000)) == [2, 2, 2]


def test_within_the_default_budget_the_part_is_the_whole_round(six: Engine) -> None:
    assert parts_written(six, SizeLimits()) == [6]


def test_a_conversation_bigger_than_the_budget_is_loaded_alone(six: Engine) -> None:
    assert parts_written(six, SizeLimits(part_chars=1_000)) == [1] * 6


def test_loading_stops_at_the_budget_and_leaves_the_rest_unread(six: Engine) -> None:
    counts = dict.fromkeys(IDS, 7)
    with six.connect() as conn:
        t = load_within(conn, IDS, budget_chars=250_000, counts=counts)
        everything = load_within(conn, IDS)

    assert [h.id for h in t.heads] == IDS[:3] and t.left == tuple(IDS[3:])
    assert set(t.spans) == set(IDS[:3]), "the conversations left are not loaded"
    assert 300_000 <= t.text_chars < 300_000 + 10_000, "the budget plus at most one group"
    assert {c: everything.spans[c] for c in IDS[:3]} == t.spans
    assert everything.left == () and everything.text_chars == 0

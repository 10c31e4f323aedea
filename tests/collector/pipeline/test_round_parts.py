"""A round scores its conversations in parts of at most ``SizeLimits.round_spans`` spans, so the
memory of a round is bounded by spans, not by how many conversations it claimed."""

from __future__ import annotations

import itertools
import time

from sqlalchemy import Engine, select

from tests.collector.pipeline.test_big_conversation import conversation_of, revisions
from tests.collector.pipeline.test_score import expect
from toolscore.collector.pipeline.claim import NS, SizeLimits, Timing
from toolscore.collector.pipeline.rounds import RoundRunner, within_budget
from toolscore.scorer import default_config
from toolscore.storage.conversations.leases import Claimed
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.dialect import scoring_round_size

from .test_big_conversation import REFERENCE


def claims(*ids: str) -> list[Claimed]:
    return [Claimed(i, 0) for i in ids]


def ids(parts: list[list[Claimed]]) -> list[list[str]]:
    return [[c.conversation_id for c in part] for part in parts]


def test_parts_keep_the_claim_order_and_stay_within_the_budget() -> None:
    counts = {"a": 7, "b": 7, "c": 7, "d": 14, "e": 1}
    parts = within_budget(claims("a", "b", "c", "d", "e"), counts, 15)
    assert ids(parts) == [["a", "b"], ["c"], ["d", "e"]]


def test_a_conversation_bigger_than_the_budget_is_alone_in_its_part() -> None:
    counts = {"a": 3, "huge": 40, "b": 3}
    assert ids(within_budget(claims("a", "huge", "b"), counts, 10)) == [["a"], ["huge"], ["b"]]


def test_no_claims_no_parts_and_unknown_sizes_count_as_none() -> None:
    assert within_budget([], {}, 10) == []
    assert ids(within_budget(claims("x", "y"), {}, 1)) == [["x", "y"]]


def test_a_round_writes_each_part_on_its_own_and_scores_every_conversation(
    engine: Engine,
) -> None:
    expect(engine, ExpectationData(id="bench", reference_tool_calls=REFERENCE))
    for i in range(6):
        conversation_of(engine, f"c{i}", 1, time.time_ns() - 60 * NS)  # 7 spans each
    clock = itertools.count(time.time_ns(), NS)  # each write of a part: its own created_at
    runner = RoundRunner(
        engine,
        default_config(),
        timing=Timing(),
        batch_size=500,
        worker_id="w",
        clock_ns=lambda: next(clock),
        limits=SizeLimits(round_spans=15),
    )

    result = runner.run_once()

    assert result.claimed == 6 and sorted(result.ids) == [f"c{i}" for i in range(6)]
    assert set(result.statuses) == {"scored"}
    assert {r[:2] for r in revisions(engine).values()} == {("scored", 1)}
    with engine.connect() as conn:
        written_at = set(conn.execute(select(evaluations.c.created_at)).scalars())
    assert len(written_at) == 3, "two conversations (14 spans) per part of at most 15"


def test_postgresql_rounds_claim_more_than_sqlite_rounds() -> None:
    assert (scoring_round_size("postgresql"), scoring_round_size("sqlite")) == (500, 200)

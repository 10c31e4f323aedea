"""A round makes its revision's rows before its write transaction opens: the transaction (on
SQLite, the one write lock that ingest waits for) holds only the statements.

Before: ``write_revisions`` built the rows and bound their values (the JSON of each evaluation's
details and configuration, each call's arguments) inside the transaction.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.collector.pipeline.test_big_conversation import REFERENCE, conversation_of, revisions
from tests.collector.pipeline.test_score import expect
from toolscore.collector.pipeline import rounds
from toolscore.collector.pipeline.claim import NS, Timing
from toolscore.collector.pipeline.rounds import RoundRunner
from toolscore.scorer import default_config
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing import engine as engine_module
from toolscore.storage.schema import metadata


def test_a_rounds_rows_are_bound_before_its_write_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dumps = {"in the write transaction": 0, "before it": 0}
    writing = [False]
    json_dumps = engine_module.json_dumps

    def counted(value: Any) -> str:  # the engine's JSON serializer: binds each JSON value
        dumps["in the write transaction" if writing[0] else "before it"] += 1
        return json_dumps(value)

    monkeypatch.setattr(engine_module, "json_dumps", counted)
    engine = engine_module.create_engine(f"sqlite:///{tmp_path}/round.db")
    metadata.create_all(engine)
    expect(engine, ExpectationData(id="bench", reference_tool_calls=REFERENCE))
    for conv_id in ("a", "b", "c"):
        conversation_of(engine, conv_id, 2, time.time_ns() - 60 * NS)
    real_transaction = rounds.write_transaction

    @contextmanager
    def watched(db: Any) -> Iterator[Any]:
        with real_transaction(db) as conn:
            writing[0] = True
            try:
                yield conn
            finally:
                writing[0] = False

    monkeypatch.setattr(rounds, "write_transaction", watched)
    runner = RoundRunner(engine, default_config(), timing=Timing(), batch_size=10, worker_id="w")
    dumps["before it"] = 0  # the fill's own JSON is not the round's
    assert runner.run_once().claimed == 3

    assert {r[:2] for r in revisions(engine).values()} == {("scored", 1)}
    assert dumps["before it"] > 0, "the round bound its evaluations' and calls' JSON"
    assert dumps["in the write transaction"] == 0
    engine.dispose()

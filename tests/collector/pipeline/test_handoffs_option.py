"""``serve --handoffs exclude`` (env TOOLSCORE_HANDOFFS): handoffs to other agents are not scored.

The option travels from the serve flags to the worker, in a thread and in a scoring child process.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import Engine, select

from tests.collector.pipeline.test_score import current_scores, expect, offline_scores, store
from tests.collector.pipeline.test_worker import _until_scored, parse
from tests.collector.test_reconstruct import assistant, chat, result, user
from toolscore.collector.configuration import ConfigError
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.worker import PipelineWorker, ScoringProcess
from toolscore.scorer import default_config
from toolscore.storage.expectations import ExpectationData
from toolscore.storage.pipeline import tool_calls

CONV = "conv-handoff"
LOOKUP = {"name": "lookup", "args": {"q": "invoice 7"}}
TRANSFER = {"name": "transfer_to_billing", "args": {}}


def test_the_option_defaults_to_include_and_reads_flag_and_environment() -> None:
    assert parse([]).include_handoffs is True
    assert parse(["--handoffs", "exclude"]).include_handoffs is False
    assert parse([], {"TOOLSCORE_HANDOFFS": "exclude"}).include_handoffs is False
    assert parse(["--handoffs", "include"], {"TOOLSCORE_HANDOFFS": "exclude"}).include_handoffs
    with pytest.raises(ConfigError, match="TOOLSCORE_HANDOFFS: expected include or"):
        parse([], {"TOOLSCORE_HANDOFFS": "maybe"})


def _spans() -> list:  # type: ignore[type-arg]
    conv = {"extra": {"gen_ai.conversation.id": CONV}}
    lookup = ("lookup", LOOKUP["args"], "c1")
    transfer = ("transfer_to_billing", {}, "c2")
    history = [user("my invoice?"), assistant(lookup), result("c1", "found")]
    return [
        chat([user("my invoice?")], [assistant(lookup)], start=1, **conv),
        chat(history, [assistant(transfer)], start=20, **conv),
        chat(
            [*history, assistant(transfer), result("c2", "billing")],
            [assistant(text="paid")],
            start=40,
            **conv,
        ),
    ]


@pytest.mark.parametrize("in_child", [False, True], ids=["thread", "child-process"])
@pytest.mark.parametrize("include", [True, False], ids=["include", "exclude"])
def test_the_worker_scores_with_or_without_handoffs(
    engine: Engine, db_url: str, in_child: bool, include: bool
) -> None:
    store(engine, _spans(), at_ns=time.time_ns())
    expect(
        engine,
        ExpectationData(id="r", reference_tool_calls=[LOOKUP], match={"conversation_id": CONV}),
    )
    worker = PipelineWorker(
        engine,
        default_config(),
        timing=Timing(settle_s=0.2, idle_s=0.1),
        poll_s=0.2,
        process=ScoringProcess(db_url, None, include) if in_child else None,
        include_handoffs=include,
    )
    asyncio.run(_until_scored(worker))
    with engine.connect() as conn:
        names = list(
            conn.execute(
                select(tool_calls.c.name)
                .where(tool_calls.c.conversation_id == CONV)
                .order_by(tool_calls.c.position)
            ).scalars()
        )
    predicted = [LOOKUP, TRANSFER] if include else [LOOKUP]
    assert names == [c["name"] for c in predicted]
    assert current_scores(engine, CONV) == offline_scores(predicted, [LOOKUP])

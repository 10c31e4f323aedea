"""``serve --control-calls`` (env TOOLSCORE_CONTROL_CALLS): framework control calls (handoffs to
other agents...) are left out of the scored calls by default.

The option travels from the serve flags to the worker, in a thread and in a scoring child process.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from sqlalchemy import Engine, select

from tests.collector.pipeline.test_score import current_scores, expect, offline_scores, store
from tests.collector.pipeline.test_worker import _until_scored, parse
from tests.collector.reconstruction.test_reconstruct import assistant, chat, result, user
from toolscore.collector.configuration import ConfigError
from toolscore.collector.pipeline.child import ScoringProcess
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.worker import PipelineWorker
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import tool_calls
from toolscore.storage.expectations.repository import ExpectationData

CONV = "conv-handoff"
LOOKUP = {"name": "lookup", "args": {"q": "invoice 7"}}
TRANSFER = {"name": "transfer_to_billing", "args": {}}


def test_the_policy_defaults_to_exclude_and_flags_beat_the_environment() -> None:
    assert parse([]).control_calls == ControlCalls(include=False)
    assert not parse([]).control_calls.includes("handoff")
    assert parse(["--control-calls", "include"]).control_calls.includes("handoff")
    env = {"TOOLSCORE_CONTROL_CALLS": "include=handoff"}
    assert parse([], env).control_calls.includes("handoff")
    assert not parse([], env).control_calls.includes("smolagents.final_answer")
    assert not parse(["--control-calls", "exclude"], env).control_calls.includes("handoff")
    both = parse(["--control-calls", "include exclude=handoff"])
    assert both.control_calls.includes("pydantic_ai.final_result")
    assert not both.control_calls.includes("handoff")
    assert both.control_calls.describe() == "include exclude=handoff"


def test_unknown_kinds_and_modes_are_refused_naming_the_known_kinds() -> None:
    with pytest.raises(ConfigError, match=r"unknown control-call kind 'handof'.*handoff"):
        parse(["--control-calls", "include=handof"])
    with pytest.raises(
        ConfigError, match="--control-calls / TOOLSCORE_CONTROL_CALLS: expected include"
    ):
        parse([], {"TOOLSCORE_CONTROL_CALLS": "maybe"})


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
    policy = ControlCalls.parse(["include=handoff" if include else "exclude"])
    worker = PipelineWorker(
        engine,
        default_config(),
        timing=Timing(settle_s=0.2, idle_s=0.1),
        poll_s=0.2,
        process=ScoringProcess(db_url, None, policy) if in_child else None,
        control_calls=policy,
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

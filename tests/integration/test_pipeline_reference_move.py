"""Issue 9: a reference id is never lost when a trace moves to a named conversation.

A real ``toolscore serve`` (pipeline on, SQLite file and PostgreSQL) gets agent turns whose
``toolscore.reference.id`` (on a child span) and ``gen_ai.conversation.id`` (on the root span)
arrive in separate requests 0.2 s apart, in either order, or in one request children first; also
conversations of two traces with the reference id on either trace. Every conversation must end
``scored`` against the referenced expectation, with the Ragas scores of the equivalent sample,
and no trace-keyed conversation may be left behind.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence

from opentelemetry.sdk.trace import ReadableSpan
from sqlalchemy import func, select

from tests.collector.pipeline.e2e import (
    import_refs,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from tests.integration.reference_traces import (
    QUESTION,
    WEATHER,
    Sender,
    agent_turn,
    children_of,
    exporter_for,
    root_of,
    sender,
)
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.traces import traces_table

GAP_S = 0.2  # between the requests of one conversation, as in the report
Phases = list[list[list[ReadableSpan]]]  # phase -> requests -> spans


def ref_first(conv: str) -> Phases:
    t = agent_turn(conv, "w")
    return [[children_of(t)], [root_of(t)]]


def name_first(conv: str) -> Phases:
    t = agent_turn(conv, "w")
    return [[root_of(t)], [children_of(t)]]


def one_request_children_first(conv: str) -> Phases:
    t = agent_turn(conv, "w")
    return [[children_of(t) + root_of(t)]]


def ref_on_first_of_two_traces(conv: str) -> Phases:
    t1, t2 = agent_turn(conv, "w"), agent_turn(conv, None)
    return [[children_of(t1)], [root_of(t1)], [t2]]


def ref_on_second_of_two_traces(conv: str) -> Phases:
    t1, t2 = agent_turn(conv, None), agent_turn(conv, "w")
    return [[t1], [children_of(t2)], [root_of(t2)]]


def both_traces_unnamed_first(conv: str) -> Phases:
    t1, t2 = agent_turn(conv, None), agent_turn(conv, "w")
    return [[children_of(t1), children_of(t2)], [root_of(t2)], [root_of(t1)]]


SCENARIOS: dict[str, tuple[Callable[[str], Phases], int]] = {  # builder, traces per conversation
    "ref-first": (ref_first, 1),
    "name-first": (name_first, 1),
    "one-request": (one_request_children_first, 1),
    "ref-on-trace-1": (ref_on_first_of_two_traces, 2),
    "ref-on-trace-2": (ref_on_second_of_two_traces, 2),
    "all-unnamed-first": (both_traces_unnamed_first, 2),
}
PER_SCENARIO = 5


def scenario_of(name: str) -> str:
    return name.rsplit("-", 1)[0]


def send_in_phases(plans: Sequence[Phases], sends: Sequence[Sender]) -> None:
    """Phase k of every conversation, then GAP_S later phase k+1; requests alternate servers."""
    n = 0
    for phase in range(max(len(p) for p in plans)):
        for plan in plans:
            for request in plan[phase] if phase < len(plan) else []:
                sends[n % len(sends)](request)
                n += 1
        time.sleep(GAP_S)


def stored_state(db_url: str) -> tuple[int, int, dict[str, str | None]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            n_conv = conn.execute(select(func.count()).select_from(conversations)).scalar_one()
            n_traces = conn.execute(
                select(func.count())
                .select_from(traces_table)
                .where(traces_table.c.conversation_id.is_not(None))
            ).scalar_one()
            expectation_of_current = dict(
                conn.execute(
                    select(evaluations.c.conversation_id, evaluations.c.expectation_id)
                    .where(evaluations.c.is_current)
                    .distinct()
                ).all()
            )
        return int(n_conv), int(n_traces), expectation_of_current
    finally:
        engine.dispose()


def test_reference_id_survives_moves_in_every_arrival_order(db_url: str) -> None:
    import_refs(db_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    names = [f"{s}-{i}" for s in SCENARIOS for i in range(PER_SCENARIO)]
    plans = [SCENARIOS[scenario_of(name)][0](name) for name in names]
    with pipeline_server(db_url) as srv:
        http = exporter_for(http_url=srv.http_url)
        grpc = exporter_for(grpc_target=srv.grpc_target)
        send_in_phases(plans, [sender(http), sender(grpc)])
        rows = wait_scored(db_url, names, timeout_s=60)
        http.shutdown()
        grpc.shutdown()

    wrong = Counter(
        (scenario_of(n), rows[n]["status"], rows[n]["reference_id"])
        for n in names
        if (rows[n]["status"], rows[n]["reference_id"], rows[n]["expectation_id"])
        != ("scored", "w", "w")
    )
    assert wrong == {}, f"(scenario, status, reference id): conversations of {len(names)}"
    n_conv, n_traces, expectation_of = stored_state(db_url)
    traces = sum(SCENARIOS[scenario_of(n)][1] for n in names)
    assert (n_conv, n_traces) == (len(names), traces), "no trace-keyed conversation left behind"
    assert expectation_of == {n: "w" for n in names}
    one = ragas_scores(ragas_sample(QUESTION, [[WEATHER]], [WEATHER]))
    two = ragas_scores(ragas_sample(QUESTION, [[WEATHER], [WEATHER]], [WEATHER]))
    engine = create_engine(db_url)
    with engine.connect() as conn:
        scores = conn.execute(
            select(evaluations.c.conversation_id, evaluations.c.metric, evaluations.c.score).where(
                evaluations.c.is_current
            )
        ).all()
    engine.dispose()
    for name in names:
        expected = one if SCENARIOS[scenario_of(name)][1] == 1 else two
        assert {m: v for c, m, v in scores if c == name} == expected, name

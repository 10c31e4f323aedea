"""The per-tool views (migration 0007) give the same answers on SQLite and PostgreSQL.

The evaluations hold real explanations (the scorer's ``details``) of random samples; the
expected rows are counted here in Python from the same details.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from tests.collector.export.helpers import add_conversation, add_evaluation
from tests.scorer.helpers import instance
from toolscore.scorer import ToolCall
from toolscore.storage.history.tool_scores import most_often_wrong
from toolscore.storage.plumbing.engine import create_engine

DAY1 = dt.datetime(2026, 11, 2, 23, 30, tzinfo=dt.UTC)
DAY2 = dt.datetime(2026, 11, 3, 0, 30, tzinfo=dt.UTC)
METRICS = {  # instance name: its configuration
    "strict_acc": {"type": "tool_call_accuracy"},
    "subset_acc": {"type": "tool_call_accuracy", "order": "subset"},
    "grouped_acc": {"type": "tool_call_accuracy", "order": "unordered", "args": "levenshtein"},
    "tool_call_f1": {"type": "tool_call_f1"},  # not per tool: left out of the views
}
TOOLS = {"search": ("q", "limit"), "book": ("who", "when"), "ping": ()}


def _call(rng: random.Random) -> ToolCall:
    name = rng.choice(list(TOOLS))
    return ToolCall(name, {a: rng.choice(["x", "y", 1]) for a in TOOLS[name]})


def _history(rng: random.Random) -> list[tuple[str, str, dt.datetime, str, Any, Any]]:
    """(conversation, expectation, day, metric, score, details) of 30 random samples."""
    rows = []
    for i in range(30):
        reference = [_call(rng) for _ in range(rng.randint(0, 3))]
        predicted = [rng.choice([c, _call(rng)]) for c in reference] + [
            _call(rng) for _ in range(rng.randint(0, 1))
        ]
        if rng.random() < 0.3:  # the right calls in the wrong order
            predicted = list(reversed(reference))
        for metric, options in METRICS.items():
            result = instance(**options).score(predicted, tuple(reference))
            day = DAY1 if i % 2 else DAY2
            rows.append(
                (
                    f"c{i:02d}",
                    "weather" if i < 20 else "flights",
                    day,
                    metric,
                    result.value,
                    result.details,
                )
            )
    return rows


def _load(engine: Engine, rows: list[tuple[str, str, dt.datetime, str, Any, Any]]) -> None:
    for conv in sorted({r[0] for r in rows}):
        add_conversation(engine, conv, first_seen_at=next(r[2] for r in rows if r[0] == conv))
    for conv, expectation, day, metric, score, details in rows:
        kind = METRICS[metric]["type"]
        # an earlier revision, superseded: the views read only current evaluations
        add_evaluation(
            engine,
            conv,
            metric,
            0.0,
            metric_type=kind,
            expectation_id=expectation,
            created_at=day,
            details={"pairs": [{"name": "stale", "score": 0.0}]},
        )
        add_evaluation(
            engine,
            conv,
            metric,
            score,
            revision=2,
            metric_type=kind,
            expectation_id=expectation,
            created_at=day,
            details=details,
        )
    # a current evaluation that could not be scored counts nowhere
    add_conversation(engine, "broken", first_seen_at=DAY1)
    add_evaluation(
        engine,
        "broken",
        "strict_acc",
        None,
        metric_type="tool_call_accuracy",
        error="not scorable",
        details={"pairs": [{"name": "x", "score": 0.0}]},
    )


def _expected(rows: list[tuple[str, str, dt.datetime, str, Any, Any]]) -> tuple[Any, Any]:
    tools: dict[tuple[str, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    arguments: dict[tuple[str, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for _, expectation, day, metric, score, details in rows:
        if METRICS[metric]["type"] != "tool_call_accuracy" or score is None:
            continue
        key = (day.date().isoformat(), expectation, metric)
        for pair in details["pairs"]:
            t = tools[(*key, pair["name"])]
            t["expected"] += 1
            t["called"] += 1
            t["matched" if pair["score"] >= 1 else "wrong"] += 1
        for label in details["losses"]:
            t = tools[(*key, label["tool"])]
            t["points_lost"] += label["points"]
            if label["kind"] == "wrong_argument":
                a = arguments[(*key, label["tool"], label["argument"])]
                a["wrong"] += 1
                a["points_lost"] += label["points"]
                continue
            t["expected"] += "expected" in label
            t["called"] += "predicted" in label
            if label["kind"] in ("missing", "extra"):
                t[label["kind"]] += 1
            elif "expected" in label:
                t["misplaced"] += 1
    columns = ("expected", "called", "matched", "wrong", "missing", "extra", "misplaced")
    tool_rows = [
        (*k, *(int(v[c]) for c in columns), round(v["points_lost"], 9))
        for k, v in sorted(tools.items())
    ]
    arg_rows = [
        (*k, int(v["wrong"]), round(v["points_lost"], 9)) for k, v in sorted(arguments.items())
    ]
    return tool_rows, arg_rows


def _query(engine: Engine, sql: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [
            tuple(round(float(v), 9) if isinstance(v, float) else v for v in row)
            for row in conn.execute(text(sql)).all()
        ]


def test_views_count_what_the_explanations_say(migrated_db_url: str) -> None:
    rows = _history(random.Random(8))
    engine = create_engine(migrated_db_url)
    try:
        _load(engine, rows)
        tools = _query(
            engine,
            "SELECT day, expectation_id, metric, tool, expected, called, matched, wrong,"
            " missing, extra, misplaced, points_lost FROM tool_scores"
            " ORDER BY day, expectation_id, metric, tool",
        )
        arguments = _query(
            engine,
            "SELECT day, expectation_id, metric, tool, argument, wrong, points_lost"
            " FROM tool_argument_scores ORDER BY day, expectation_id, metric, tool, argument",
        )
    finally:
        engine.dispose()
    want_tools, want_arguments = _expected(rows)
    assert tools == want_tools
    assert arguments == want_arguments
    assert {r[2] for r in tools} == {"strict_acc", "subset_acc", "grouped_acc"}
    assert all(r[4] == r[6] + r[7] + r[8] + r[10] for r in tools)  # expected = the four fates
    # the history has every fate (the seed is chosen for it)
    assert all(sum(r[i] for r in tools) > 0 for i in range(6, 11)) and len(arguments) > 10


def test_a_worked_example_and_the_tools_most_often_wrong(migrated_db_url: str) -> None:
    metric = instance()  # strict, exact: a(x=9) wrong, b never called, c unexpected
    result = metric.score(
        [ToolCall("a", {"x": 9}), ToolCall("c", {})], (ToolCall("a", {"x": 1}), ToolCall("b", {}))
    )
    assert result.value == 0.0
    engine = create_engine(migrated_db_url)
    try:
        add_conversation(engine, "one", first_seen_at=DAY1)
        add_evaluation(
            engine, "one", "acc", 0.0, metric_type="tool_call_accuracy", details=result.details
        )
        tools = _query(
            engine,
            "SELECT tool, expected, called, matched, wrong, missing, extra,"
            " misplaced, points_lost FROM tool_scores ORDER BY tool",
        )
        arguments = _query(
            engine, "SELECT tool, argument, wrong, points_lost FROM tool_argument_scores"
        )
        with engine.connect() as conn:
            worst = most_often_wrong(conn, DAY1.date(), DAY1.date())
            documented = [conn.execute(text(sql)).all() for sql in _documented_queries()]
    finally:
        engine.dispose()
    assert tools == [
        ("a", 1, 1, 0, 1, 0, 0, 0, 0.5),  # paired, its one argument wrong: half the score
        ("b", 1, 0, 0, 0, 1, 0, 0, 0.25),  # the rest shared by the calls without a partner
        ("c", 0, 1, 0, 0, 0, 1, 0, 0.25),
    ]
    assert arguments == [("a", "x", 1, 0.5)]
    assert sorted(tuple(r[:2]) for r in documented[0]) == [("acc", "a"), ("acc", "b"), ("acc", "c")]
    assert [tuple(r) for r in documented[1]] == []  # no get_weather here
    assert [(s.tool, s.failures, s.wrong_arguments) for s in worst] == [
        ("a", 1, (("x", 1),)),
        ("b", 1, ()),
        ("c", 1, ()),
    ]


def _documented_queries() -> list[str]:
    """The example queries of docs/schema.md's per-tool views section."""
    docs = (Path(__file__).parents[3] / "docs" / "schema.md").read_text()
    block = docs.split("### `tool_argument_scores`")[1].split("```sql")[1].split("```")[0]
    return [sql for sql in block.split(";") if sql.strip()]

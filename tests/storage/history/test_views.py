"""The history views (migration 0004) give the same answers on SQLite and PostgreSQL.

The expected values are computed here in Python from the same data: percentiles with
``statistics.quantiles(method="inclusive")``, the same linear interpolation as percentile_cont.
"""

from __future__ import annotations

import datetime as dt
import random
import statistics
from typing import Any

import pytest
from sqlalchemy import Engine, text

from tests.collector.export.helpers import add_conversation, add_evaluation, migrated_engine
from toolscore.storage.history import outbox as exports
from toolscore.storage.plumbing.engine import create_engine

DAY1 = dt.datetime(2026, 11, 2, 23, 30, tzinfo=dt.UTC)
DAY2 = dt.datetime(2026, 11, 3, 0, 30, tzinfo=dt.UTC)


def _load(engine: Engine) -> None:
    """A fixed pseudo-random history: 23 conversations, 3 metrics, some rescored at version 2."""
    rng = random.Random(7)
    with engine.begin() as conn:
        exports.save_thresholds(conn, {"tool_call_f1": 0.5, "strict_acc": 0.9})
    for i in range(23):
        conv = f"c{i:02d}"
        day = DAY1 if i % 2 else DAY2
        add_conversation(engine, conv, first_seen_at=day)
        for metric, mtype in (
            ("tool_call_accuracy", None),
            ("tool_call_f1", None),
            ("strict_acc", "tool_call_accuracy"),
        ):
            score: float | None = round(rng.random(), 3) if i % 7 else None
            version = 1 + (i % 3 == 0)
            add_evaluation(
                engine,
                conv,
                metric,
                score,
                revision=1,
                metric_type=mtype,
                expectation_id="weather" if i < 15 else "flights",
                expectation_version=1,
                error=None if score is not None else "not scorable",
                created_at=day,
            )
            if version == 2:  # rescored later under a new expectation version
                add_evaluation(
                    engine,
                    conv,
                    metric,
                    round(rng.random(), 3),
                    revision=2,
                    metric_type=mtype,
                    expectation_id="weather" if i < 15 else "flights",
                    expectation_version=2,
                    created_at=day + dt.timedelta(days=5),
                )


def _query(engine: Engine, sql: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(text(sql)).mappings()]


def _rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: (round(float(v), 9) if isinstance(v, float) else v) for k, v in r.items()} for r in rows
    ]


def _views(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    return {
        "current": _rounded(
            _query(
                engine,
                """
            SELECT conversation_id, metric, revision, expectation_version, score, threshold,
                   passed, day
            FROM current_scores ORDER BY conversation_id, metric""",
            )
        ),
        "daily": _rounded(
            _query(
                engine,
                """
            SELECT day, expectation_id, metric, evaluations, scored, errors, mean_score,
                   p10, p50, p90, pass_rate
            FROM daily_scores ORDER BY day, expectation_id, metric""",
            )
        ),
        "regressions": _rounded(
            _query(
                engine,
                """
            SELECT expectation_id, metric, expectation_version, conversations, scored,
                   mean_score, previous_version, previous_mean_score, delta
            FROM expectation_version_regressions
            ORDER BY expectation_id, metric, expectation_version""",
            )
        ),
    }


def test_views_match_an_independent_computation(migrated_db_url: str) -> None:
    engine = create_engine(migrated_db_url)
    try:
        _load(engine)
        views = _views(engine)
        every = _query(engine, "SELECT * FROM evaluations")
    finally:
        engine.dispose()

    current = [e for e in every if e["is_current"]]
    assert len(views["current"]) == len(current) == 23 * 3
    thresholds = {"tool_call_f1": 0.5, "strict_acc": 0.9}
    for row in views["current"]:
        assert row["threshold"] == thresholds.get(row["metric"], 1.0)
        if row["score"] is None:
            assert row["passed"] is None
        else:
            assert row["passed"] == (1.0 if row["score"] >= row["threshold"] else 0.0)
        assert row["revision"] == (2 if int(row["conversation_id"][1:]) % 3 == 0 else 1)

    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in views["current"]:
        exp = "weather" if int(row["conversation_id"][1:]) < 15 else "flights"
        groups.setdefault((row["day"], exp, row["metric"]), []).append(row)
    assert {(d["day"], d["expectation_id"], d["metric"]) for d in views["daily"]} == set(groups)
    assert {d["day"] for d in views["daily"]} == {"2026-11-02", "2026-11-03"}  # UTC days
    for d in views["daily"]:
        rows = groups[(d["day"], d["expectation_id"], d["metric"])]
        scores = sorted(r["score"] for r in rows if r["score"] is not None)
        assert (d["evaluations"], d["scored"], d["errors"]) == (
            len(rows),
            len(scores),
            len(rows) - len(scores),
        )
        assert d["mean_score"] == pytest.approx(statistics.fmean(scores))
        deciles = (
            statistics.quantiles(scores, n=10, method="inclusive")
            if len(scores) > 1
            else scores * 9
        )
        assert d["p10"] == pytest.approx(deciles[0])
        assert d["p50"] == pytest.approx(statistics.median(scores))
        assert d["p90"] == pytest.approx(deciles[8])
        passed = [r["passed"] for r in rows if r["passed"] is not None]
        assert d["pass_rate"] == pytest.approx(sum(passed) / len(passed))

    by_version: dict[tuple[str, str, int], list[float | None]] = {}
    for e in every:  # one row per conversation/version here: the newest revision of it
        by_version.setdefault(
            (e["expectation_id"], e["metric"], e["expectation_version"]), []
        ).append(e["score"])
    for r in views["regressions"]:
        scores = [
            s
            for s in by_version[(r["expectation_id"], r["metric"], r["expectation_version"])]
            if s is not None
        ]
        assert r["mean_score"] == pytest.approx(statistics.fmean(scores))
        if r["expectation_version"] == 1:
            assert r["previous_version"] is None and r["delta"] is None
        else:
            assert r["previous_version"] == 1
            assert r["delta"] == pytest.approx(r["mean_score"] - r["previous_mean_score"])


def test_sqlite_and_postgres_give_the_same_answers(sqlite_url: str, postgres_url: str) -> None:
    answers = []
    for url in (sqlite_url, postgres_url):
        engine = migrated_engine(url)
        try:
            _load(engine)
            answers.append(_views(engine))
        finally:
            engine.dispose()
    assert answers[0] == answers[1]
    assert answers[0]["daily"] and answers[0]["regressions"]


def test_rescoring_a_conversation_twice_under_one_version_counts_it_once(
    migrated_sqlite_url: str,
) -> None:
    engine = create_engine(migrated_sqlite_url)
    try:
        add_conversation(engine, "c")
        add_evaluation(engine, "c", score=0.0, revision=1)
        add_evaluation(engine, "c", score=1.0, revision=2)
        [row] = _query(
            engine, "SELECT conversations, mean_score FROM expectation_version_regressions"
        )
        [cur] = _query(engine, "SELECT revision, score FROM current_scores")
    finally:
        engine.dispose()
    assert (row["conversations"], row["mean_score"]) == (1, 1.0)
    assert (cur["revision"], cur["score"]) == (2, 1.0)


def test_downgrade_removes_the_views(sqlite_url: str) -> None:
    from toolscore.storage import migrate

    engine = migrated_engine(sqlite_url)
    try:
        migrate.downgrade(sqlite_url, "0003")
        names = _query(engine, "SELECT name FROM sqlite_master WHERE type = 'view'")
    finally:
        engine.dispose()
    assert names == []

"""History retention: whole finished conversations older than the cutoff are deleted from every
table that names them; their scores stay in the daily rollup, so ``daily_scores`` and
``toolscore report`` give the same rows for their days as before.

Real databases (a SQLite file and PostgreSQL), conversations scored by the real pipeline worker,
pruning by the code serve and ``toolscore prune`` run.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from sqlalchemy import Engine, select, text, update

from tests.collector.upkeep.test_retention import (
    CUTOFF,
    DAY,
    NS,
    REFERENCE,
    T_NEW,
    T_OLD,
    conversation,
    expect,
    report,
    score_all,
    store,
    stored_traces,
)
from tests.collector.upkeep.test_retention import (
    engine as engine,
)
from toolscore.collector.cli import main
from toolscore.storage.conversations.tables import (
    conversations,
    evaluations,
    tool_calls,
)
from toolscore.storage.history.deliveries import annotation_deliveries
from toolscore.storage.history.deliveries import enqueue_new as enqueue_annotations
from toolscore.storage.history.outbox import enqueue_new, evaluation_exports
from toolscore.storage.retention.conversation_pruning import prune_history
from toolscore.storage.retention.rollup import daily_score_rollup
from toolscore.storage.retention.span_pruning import PruneLimits
from toolscore.storage.telemetry.traces import traces_table

NAMES = ("old-a", "old-b", "old-c", "old-d", "old-claimed", "new-scored", "old-open", "old-error")


def _ids(engine: Engine, table: Any, column: str = "conversation_id") -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(select(table.c[column]).distinct()).scalars())


def _daily(engine: Engine) -> list[list[tuple[Any, ...]]]:
    """The rows of the views that must not change."""
    with engine.connect() as conn:
        return [
            [tuple(r) for r in conn.execute(text(f"SELECT * FROM {view} ORDER BY {order}"))]
            for view, order in (
                ("daily_scores", "day, expectation_id, metric"),
                ("tool_scores", "day, expectation_id, metric, tool"),
                ("tool_argument_scores", "day, expectation_id, metric, tool, argument"),
            )
        ]


def _scores(report_text: str) -> str:
    """The report's score table and its tools most often wrong (its worst-conversations list
    names retained conversations only)."""
    kept = report_text.split("\n\nWorst conversations")[0]
    assert "tool_call_accuracy" in kept and "tool_call_f1" in kept, report_text
    assert "Tools most often wrong" in kept and "get_time" in kept, report_text
    return kept


def _fill(engine: Engine) -> None:
    """Two days; on the old one scores of two expectation versions (1.0 and lower), a
    conversation that stays (claimed), an unmatched one, an open one; on the new one, one."""
    expect(engine, REFERENCE, *NAMES)
    store(engine, *conversation("old-a", "a1"), T_OLD)
    store(engine, *conversation("old-b", "a2"), T_OLD)
    store(engine, *conversation("old-unmatched", "a3"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    expect(engine, REFERENCE[:1], *NAMES)  # version 2: other scores, same day
    store(engine, *conversation("old-c", "a4"), T_OLD + 20 * NS)
    store(engine, *conversation("old-claimed", "a5"), T_OLD + 20 * NS)
    store(engine, *conversation("old-error", "a6"), T_OLD + 20 * NS)
    score_all(engine, T_OLD + 40 * NS)
    berlin = {"name": "get_weather", "args": {"city": "Berlin"}}
    expect(engine, [berlin, REFERENCE[1]], *NAMES)  # version 3: a wrong argument
    store(engine, *conversation("old-d", "a7"), T_OLD + 50 * NS)
    score_all(engine, T_OLD + 70 * NS)
    store(engine, *conversation("new-scored", "c1"), T_NEW)
    score_all(engine, T_NEW + 10 * NS)
    store(engine, *conversation("old-open", "b1"), T_OLD)  # never scored: open
    with engine.begin() as conn:
        c = conversations.c
        conn.execute(update(conversations).where(c.id == "old-claimed").values(claimed_by="w"))
        conn.execute(update(conversations).where(c.id == "old-error").values(status="error"))


def test_history_retention_deletes_exactly_the_old_finished_conversations(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(engine)
    with engine.begin() as conn:  # write-back on: old-b's scores wait in the outbox
        enqueue_new(conn, dt.datetime.now(dt.UTC))
        enqueue_annotations(conn, "phoenix=http://px:6006", dt.datetime.now(dt.UTC))
        x, e = evaluation_exports.c, evaluations.c
        old_b = select(e.id).where(e.conversation_id == "old-b").scalar_subquery()
        conn.execute(
            update(evaluation_exports)
            .where(x.evaluation_id.not_in(old_b))
            .values(exported_at=dt.datetime.now(dt.UTC))
        )
    daily, reported = _daily(engine), _scores(report(engine, capsys))
    assert len({r[0] for r in daily[0]}) == 2, daily
    assert any(r[0] == "2023-11-14" and r[7] != r[9] for r in daily[0]), "p10 < p90 old day"
    assert {r[4] for r in daily[2]} == {"city"}, "a wrong argument counted"

    result = prune_history(engine, CUTOFF, limits=PruneLimits(2, rows_per_batch=2, pause_s=0))

    kept = {"old-b", "old-claimed", "new-scored", "old-open"}
    assert _ids(engine, conversations, "id") == kept
    assert result.conversations == 5, "old-a, old-c, old-d, old-unmatched, old-error"
    # old-b's telemetry too: it is old enough, only its history waits for the write-back
    assert (result.spans, result.log_records) == (30, 6)
    assert _ids(engine, traces_table) == kept, "their traces' rows go with them"
    assert _ids(engine, evaluations) == kept - {"old-open"}
    assert _ids(engine, tool_calls) == kept - {"old-open"}
    assert stored_traces(engine)[0] == {"a5", "c1", "b1"}
    numbered = {t.lstrip("0") for t in _ids(engine, traces_table, "trace_id")}
    assert numbered == {"a2", "a5", "c1", "b1"}, "the deleted conversations' trace numbers go"
    assert _daily(engine) == daily, "daily_scores, tool_scores, tool_argument_scores identical"
    assert _scores(report(engine, capsys)) == reported, "toolscore report's scores identical"
    with engine.connect() as conn:
        rolled = conn.execute(select(daily_score_rollup)).mappings().all()
    assert sum(r["evaluations"] for r in rolled) == 8, "old-a, -c, -d, -error: 2 metrics each"

    with engine.begin() as conn:  # old-b exported: now it goes too
        conn.execute(update(evaluation_exports).values(exported_at=dt.datetime.now(dt.UTC)))
    assert prune_history(engine, CUTOFF).conversations == 1
    assert _ids(engine, conversations, "id") == kept - {"old-b"}
    assert _ids(engine, evaluation_exports, "evaluation_id") <= _ids(engine, evaluations, "id")
    # the annotation outbox's rows go with their evaluations (none left behind, pending for ever)
    left = _ids(engine, annotation_deliveries, "evaluation_id")
    assert left and left == _ids(engine, evaluations, "id")
    assert _daily(engine) == daily and _scores(report(engine, capsys)) == reported
    assert prune_history(engine, CUTOFF).conversations == 0


def test_show_of_a_deleted_conversation_says_so(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    expect(engine, REFERENCE, "conv")
    store(engine, *conversation("conv", "a1"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    url = engine.url.render_as_string(hide_password=False)
    assert main(["show", "--db", url, "never"]) == 1
    assert capsys.readouterr().err.strip().endswith("no conversation 'never'")
    prune_history(engine, CUTOFF)
    assert main(["show", "--db", url, "conv"]) == 1
    err = capsys.readouterr().err
    assert "history retention" in err and "2023-11-19 22:13:20 UTC" in err, err


def test_a_span_for_a_deleted_conversation_starts_a_new_one(engine: Engine) -> None:
    expect(engine, REFERENCE, "conv")
    store(engine, *conversation("conv", "a1"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    assert prune_history(engine, CUTOFF).conversations == 1
    later = T_OLD + 20 * DAY
    store(engine, *conversation("conv", "a1"), later)  # the same trace, sent again
    score_all(engine, later + 10 * NS)
    with engine.connect() as conn:
        row = conn.execute(select(conversations).where(conversations.c.id == "conv")).one()
        scores = conn.execute(
            text("SELECT day, metric, score FROM current_scores ORDER BY metric")
        ).all()
        days = conn.execute(text("SELECT day, evaluations FROM daily_scores ORDER BY day")).all()
    assert (row.status, row.revision, row.pruned_through_ns) == ("scored", 1, None)
    assert row.first_seen_at == dt.datetime.fromtimestamp(later / 1e9, dt.UTC)
    assert [tuple(s) for s in scores] == [
        ("2023-12-04", "tool_call_accuracy", 1.0), ("2023-12-04", "tool_call_f1", 1.0)
    ]  # fmt: skip
    assert [tuple(d) for d in days] == [("2023-11-14", 1)] * 2 + [("2023-12-04", 1)] * 2


def test_the_start_up_line_names_both_retentions() -> None:
    from toolscore.collector.upkeep.retention_runner import RetentionOptions, summary

    assert summary(RetentionOptions()) == "span retention 7d (pass every 60 s)"
    both = RetentionOptions(retention_s=7 * 86400, history_s=90 * 86400)
    assert summary(both) == "span retention 7d, history retention 90d (pass every 60 s)"
    alone = RetentionOptions(retention_s=None, history_s=3600, interval_s=30)
    assert summary(alone) == "spans kept forever, history retention 1h (pass every 30 s)"
    assert summary(RetentionOptions(retention_s=None)) == "spans kept forever"

"""Span retention: old telemetry of finished conversations is deleted, the history stays.

Real databases (a SQLite file and PostgreSQL), migrated like serve migrates them; conversations
scored by the real pipeline worker; pruning by the same code serve and ``toolscore prune`` run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text

from tests.collector.recording import DOC_FIXTURES, load_recording
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.claim import NS, Timing
from toolscore.collector.pipeline.rescoring import rescore
from toolscore.collector.pipeline.score import score_conversation
from toolscore.collector.pipeline.worker import PipelineWorker
from toolscore.collector.upkeep.retention_runner import parse_duration
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.history import rescore_runs as runs
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.retention.span_pruning import PruneLimits, prune
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import log_records_table, spans_table, store_telemetry

DAY = 86_400 * NS
T_OLD = 1_700_000_000 * NS  # 2023-11-14: received then
T_NEW = T_OLD + 10 * DAY
CUTOFF = T_OLD + 5 * DAY
NOW = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
REFERENCE = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]


@pytest.fixture
def engine(migrated_db_url: str) -> Iterator[Engine]:
    eng = create_engine(migrated_db_url)
    try:
        yield eng
    finally:
        eng.dispose()


def conversation(
    name: str, trace: str, *, start_shift_ns: int = 0, call_ids: str = ""
) -> tuple[list[SpanRecord], list[LogRecordData]]:
    """The OTel GenAI fixture (get_weather(Paris), get_time(Asia/Tokyo)) as conversation
    ``name`` in trace ``trace``; ``call_ids`` suffixes the tool call ids (another turn)."""
    spans, logs, _ = load_recording(DOC_FIXTURES / "otel-genai.json")
    trace_id = trace.rjust(32, "0")

    def attrs(values: Any) -> dict[str, Any]:
        out = dict(values)
        if "gen_ai.conversation.id" in out:
            out["gen_ai.conversation.id"] = name
        return out

    moved = [
        dataclasses.replace(
            s,
            trace_id=trace_id,
            attributes=attrs(s.attributes),
            start_ns=s.start_ns + start_shift_ns,
            end_ns=s.end_ns + start_shift_ns,
        )
        for s in spans
    ]
    moved_logs = [dataclasses.replace(r, trace_id=trace_id) for r in logs]
    if call_ids:  # the ids also travel in the model's messages
        moved = [_suffix_ids(s, call_ids) for s in moved]
        moved_logs = [dataclasses.replace(r, body=_replace(r.body, call_ids)) for r in moved_logs]
    return moved, moved_logs


def _replace(value: Any, suffix: str) -> Any:
    if isinstance(value, str):
        return value.replace("call_", "call_" + suffix) if "call_" in value else value
    if isinstance(value, dict):
        return {k: _replace(v, suffix) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, suffix) for v in value]
    return value


def _suffix_ids(span: SpanRecord, suffix: str) -> SpanRecord:
    return dataclasses.replace(span, attributes=_replace(dict(span.attributes), suffix))


def store(
    engine: Engine, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData], at_ns: int
) -> None:
    with engine.begin() as conn:
        store_telemetry(conn, prepare_telemetry(spans, logs, at_ns))
        assign_spans(
            conn,
            spans,
            received_at_ns=at_ns,
            config=AssignConfig(),
            log_trace_ids=[r.trace_id for r in logs if r.trace_id],
        )


def score_all(engine: Engine, now_ns: int) -> None:
    worker = PipelineWorker(
        engine, default_config(), timing=Timing(settle_s=5, idle_s=1), clock_ns=lambda: now_ns
    )
    while worker.run_once().claimed:
        pass


def traceless_log(body: str) -> LogRecordData:
    return LogRecordData(
        time_ns=1, observed_time_ns=1, trace_id=None, span_id=None, severity_number=9,
        severity_text="INFO", event_name="note", body=body, attributes={},
        resource_attributes={}, scope_name="", scope_version="",
    )  # fmt: skip


def stored_traces(engine: Engine) -> tuple[set[str], set[str | None]]:
    with engine.connect() as conn:
        spans = set(conn.execute(select(spans_table.c.trace_id)).scalars())
        logs = set(conn.execute(select(log_records_table.c.trace_id)).scalars())
    return {t.lstrip("0") for t in spans}, {t.lstrip("0") if t else t for t in logs}


def history(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Everything retention must keep, as comparable rows."""
    with engine.connect() as conn:
        return {
            "scores": sorted(
                tuple(r)
                for r in conn.execute(
                    text(
                        "SELECT conversation_id, metric, revision, score, expectation_id, "
                        "passed FROM current_scores"
                    )
                )
            ),
            "calls": sorted(
                (r.conversation_id, r.revision, r.position, r.name, str(r.arguments))
                for r in conn.execute(select(tool_calls))
            ),
            "daily": sorted(tuple(r) for r in conn.execute(text("SELECT * FROM daily_scores"))),
        }


def conversation_row(engine: Engine, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(conversations).where(conversations.c.id == name)).one()


def expect(engine: Engine, reference: list[dict[str, Any]], *names: str) -> None:
    with engine.connect() as conn:
        import_expectations(
            conn,
            [
                ExpectationData(id="weather", reference_tool_calls=reference,
                                match={"conversation_id": list(names)}),
            ],
            now=NOW,
        )  # fmt: skip


def report(engine: Engine, capsys: pytest.CaptureFixture[str]) -> str:
    """``toolscore report``'s text over the test's days."""
    from toolscore.collector.cli import main

    url = engine.url.render_as_string(hide_password=False)
    assert main(["report", "--db", url, "--since", "2023-11-01", "--until", "2023-12-31"]) == 0
    return capsys.readouterr().out


def test_retention_deletes_exactly_old_finished_conversations_telemetry(
    engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    expect(engine, REFERENCE, "old-scored", "new-scored", "old-claimed")
    old_spans, old_logs = conversation("old-scored", "a1")
    store(engine, old_spans, [*old_logs, traceless_log("old note")], T_OLD)
    store(engine, *conversation("old-unmatched", "a2"), T_OLD)
    store(engine, *conversation("old-claimed", "a3"), T_OLD)
    # received recently; the spans' own times are absurd (1970): arrival is what counts
    store(engine, *conversation("new-scored", "c1", start_shift_ns=-(10**18)), T_NEW)
    store(engine, [], [traceless_log("recent note")], T_NEW)
    score_all(engine, T_NEW + 10 * NS)
    store(engine, *conversation("old-open", "b1"), T_OLD)  # never scored: open
    with engine.begin() as conn:  # a scoring worker holds this one right now
        conn.execute(
            conversations.update()
            .where(conversations.c.id == "old-claimed")
            .values(claimed_by="another-worker")
        )
    before = history(engine)
    reported = report(engine, capsys)
    assert "tool_call_accuracy" in reported and "weather" in reported, reported
    assert conversation_row(engine, "old-unmatched").status == "unmatched"

    result = prune(engine, CUTOFF, limits=PruneLimits(rows_per_batch=2, pause_s=0))

    spans, logs = stored_traces(engine)
    assert spans == {"b1", "a3", "c1"}, "old-scored and old-unmatched deleted, nothing else"
    assert logs == {"b1", "a3", "c1", None}
    with engine.connect() as conn:
        notes = set(
            conn.execute(
                select(log_records_table.c.body).where(log_records_table.c.trace_id.is_(None))
            ).scalars()
        )
    assert notes == {"recent note"}
    assert (result.conversations, result.spans, result.log_records) == (2, 10, 3)
    assert history(engine) == before, "scores, calls and views unchanged"
    assert report(engine, capsys) == reported, "toolscore report unchanged"
    row = conversation_row(engine, "old-scored")
    assert (row.pruned_through_ns, row.pruned_calls) == (T_OLD, 2)
    assert row.pruned_at is not None and row.status == "scored" and row.revision == 1
    assert conversation_row(engine, "old-open").pruned_through_ns is None
    again = prune(engine, CUTOFF)
    assert (again.conversations, again.deleted) == (0, 0)


def test_rescore_works_from_the_stored_calls_once_the_spans_are_gone(engine: Engine) -> None:
    expect(engine, REFERENCE, "conv")
    store(engine, *conversation("conv", "a1"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    scores = _current(engine, "conv")
    assert scores == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    prune(engine, CUTOFF)
    assert stored_traces(engine)[0] == set()

    assert _run(engine) == {"unchanged": 1}, "same calls, same expectation: nothing to write"
    expect(engine, REFERENCE[:1], "conv")  # the expectation changes: one call expected
    assert _run(engine) == {"rescored": 1}
    row = conversation_row(engine, "conv")
    assert (row.revision, row.expectation_version) == (2, 2)
    assert _current(engine, "conv")["tool_call_f1"] == pytest.approx(2 / 3, abs=1e-4)
    assert _calls(engine, "conv", 2) == _calls(engine, "conv", 1) == ["get_weather", "get_time"]
    assert (row.pruned_calls, row.pruned_through_ns) == (2, T_OLD)


@pytest.mark.parametrize("replayed", [False, True], ids=["new-calls", "replayed-history"])
def test_a_span_for_a_pruned_conversation_is_scored_as_a_new_revision(
    engine: Engine, replayed: bool
) -> None:
    """The new revision's calls equal those of the same telemetry never pruned."""
    expect(engine, REFERENCE * 2, "conv", "control")
    later = T_OLD + 20 * DAY
    suffix = "" if replayed else "x2"  # same call ids: the model input replays the first turn
    store(engine, *conversation("conv", "a1"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    assert prune(engine, T_OLD + 5 * DAY).spans == 5
    store(engine, *conversation("conv", "a2", start_shift_ns=DAY, call_ids=suffix), later)
    score_all(engine, later + 10 * NS)
    # the same two turns never pruned
    store(engine, *conversation("control", "d1"), later)
    store(engine, *conversation("control", "d2", start_shift_ns=DAY, call_ids=suffix), later)
    score_all(engine, later + 10 * NS)

    row = conversation_row(engine, "conv")
    assert (row.status, row.revision) == ("scored", 2)
    control = conversation_row(engine, "control")
    assert _calls(engine, "conv", 2) == _calls(engine, "control", control.revision)
    assert len(_calls(engine, "conv", 2)) == (2 if replayed else 4)
    assert _current(engine, "conv") == _current(engine, "control")
    prune(engine, later + 5 * DAY)  # old again: pruned again, all its calls carried
    row = conversation_row(engine, "conv")
    assert (row.pruned_through_ns, row.pruned_calls) == (later, len(_calls(engine, "conv", 2)))


def test_durations() -> None:
    assert parse_duration("7d") == 7 * 86400
    assert parse_duration("90s") == 90
    assert parse_duration("1.5h") == 5400
    assert parse_duration("2w") == 14 * 86400
    assert parse_duration(" forever ") is None
    for bad in ("", "7", "7 days", "-1d", "0d", "d"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def _run(engine: Engine) -> dict[str, int]:
    the_run = runs.Run(f"r{NOW.timestamp()}-{id(engine)}-{_count(engine)}", NOW, None, None,
                       None, "h")  # fmt: skip
    with engine.begin() as conn:
        runs.create_run(conn, the_run)
    return dict(rescore(engine, default_config(), the_run, now=lambda: NOW).counts)


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(runs.rescore_runs)).scalar_one())


def _current(engine: Engine, name: str) -> dict[str, float | None]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(evaluations.c.metric, evaluations.c.score).where(
                evaluations.c.conversation_id == name, evaluations.c.is_current
            )
        ).all()
    return {m: s for m, s in rows}


def _calls(engine: Engine, name: str, revision: int) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(tool_calls.c.name)
                .where(tool_calls.c.conversation_id == name, tool_calls.c.revision == revision)
                .order_by(tool_calls.c.position)
            ).scalars()
        )


def test_score_conversation_reads_no_pruned_telemetry_while_deletion_runs(engine: Engine) -> None:
    """Between the mark and the end of the deletes a scoring sees the carried calls only."""
    from toolscore.storage.retention import spans as store_retention

    expect(engine, REFERENCE, "conv")
    store(engine, *conversation("conv", "a1"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    with engine.begin() as conn:
        marked = store_retention.mark(conn, ["conv"], CUTOFF)
    assert [m.conversation_id for m in marked] == ["conv"]
    assert len(stored_traces(engine)[0]) == 1, "marked, nothing deleted yet"
    outcome = score_conversation(engine, "conv", default_config(), now=NOW)
    assert outcome is not None and outcome.revision == 2
    assert _calls(engine, "conv", 2) == ["get_weather", "get_time"], "not counted twice"


def test_retention_is_described_as_given_in_days_hours_minutes() -> None:
    from toolscore.collector.upkeep.retention_runner import describe

    assert [describe(s) for s in (7 * 86400, 14 * 86400, 7200, 90, 1.5)] == [
        "7d", "14d", "2h", "90s", "1.5s"
    ]  # fmt: skip

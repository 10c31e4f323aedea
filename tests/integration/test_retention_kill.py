"""``toolscore prune --spans-older-than`` (the span retention pass serve runs) SIGKILLed in the
middle of deleting telemetry, on a SQLite file and on PostgreSQL.

The pass marks the old conversations, then deletes their spans and log records 2,000 rows per
transaction. Ten conversations of 4,005 spans take several transactions each, so the kill
leaves some of their telemetry deleted and some not. What must hold then: the schema whole
(current revision, SQLite's integrity check), the history of every conversation as before
(``show``: status, tool calls, evaluations; the ``conversations`` view), and ``show`` and the view
agreeing on every conversation's status and scores. The next pass resumes the work: every
old conversation's telemetry gone, each recorded as pruned, the history still as before."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from tests.collector.upkeep.test_retention import (
    REFERENCE,
    T_OLD,
    conversation,
    expect,
    score_all,
    store,
)
from toolscore.collector.cli import main
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.migrate import current_revision, head_revision
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import log_records_table, spans_table
from toolscore.storage.telemetry.traces import traces_table

BIG, FILLER = 10, 4_000  # conversations whose telemetry takes several delete transactions
SMALL = 400
NAMES = [f"big{i:02}" for i in range(BIG)] + [f"c{i:04}" for i in range(SMALL)]
SAMPLE = NAMES[:BIG] + NAMES[BIG :: SMALL // 4]  # shown before and after


def _conversation(name: str, trace: str, filler: int) -> tuple[list[SpanRecord], list[Any]]:
    spans, logs = conversation(name, trace)
    root = spans[0]
    extra = [
        dataclasses.replace(
            root,
            span_id=f"{0xF0000000 + i:016x}",
            parent_span_id=root.span_id,
            name="filler",
            attributes={},
        )
        for i in range(filler)
    ]
    return spans + extra, logs


def _toolscore(db_url: str, *args: str) -> str:
    """The command, run in this process (the prune that is killed runs in its own)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--db", db_url]) == 0
    return out.getvalue()


def _history(db_url: str) -> dict[str, Any]:
    """The view of every conversation and ``show`` of the sample, without the telemetry's part
    (the rebuilt messages, the marks of retention)."""
    listed = json.loads(
        _toolscore(db_url, "conversations", "--json", "--limit", str(len(NAMES) + 1))
    )
    shown = {}
    for name in SAMPLE:
        show = json.loads(_toolscore(db_url, "show", name, "--json", "--no-messages"))
        show.pop("messages", None)
        show["conversation"] = {
            k: v for k, v in show["conversation"].items() if not k.startswith("pruned_")
        }
        shown[name] = show
    return {"view": sorted(listed, key=lambda r: str(r["id"])), "show": shown}


def _agree(history: dict[str, Any]) -> None:
    """show and the view say the same status and scores of every sampled conversation."""
    view = {r["id"]: r for r in history["view"]}
    for name, show in history["show"].items():
        assert show["conversation"]["status"] == view[name]["status"] == "scored"
        scores = {e["metric"]: e["score"] for e in show["evaluations"]}
        assert view[name]["scores"] == scores, (name, view[name], scores)


def _telemetry(engine: Engine) -> dict[str, int]:
    """Spans left per conversation."""
    t = traces_table.c
    query = (
        select(t.conversation_id, func.count())
        .select_from(spans_table.join(traces_table, spans_table.c.trace_seq == t.seq))
        .group_by(t.conversation_id)
    )
    with engine.connect() as conn:
        return {str(c): int(n) for c, n in conn.execute(query)}


def _count(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _schema_whole(engine: Engine, db_url: str) -> None:
    assert current_revision(db_url) == head_revision()
    if db_url.startswith("sqlite"):
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"


def test_a_span_retention_pass_killed_midway_resumes_and_keeps_the_history(
    migrated_db_url: str, tmp_path: Path
) -> None:
    engine = create_engine(migrated_db_url)
    try:
        expect(engine, REFERENCE, *NAMES)
        for i, name in enumerate(NAMES):  # the big ones arrive first: their deletes come first
            spans, logs = _conversation(name, f"{i + 1:x}", FILLER if i < BIG else 0)
            store(engine, spans, logs, T_OLD + i)
        score_all(engine, T_OLD + 60 * 10**9)
        before = _history(migrated_db_url)
        _agree(before)
        total = _count(engine, spans_table)
        assert total == BIG * (FILLER + 5) + SMALL * 5

        log = tmp_path / "prune.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "toolscore", "prune", "--db", migrated_db_url,
                 "--spans-older-than", "1d"],
                stdout=err, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while _count(engine, spans_table) == total:  # killed once the first rows are deleted
            assert proc.poll() is None, f"prune ended first: {log.read_text()}"
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)

        left = _telemetry(engine)
        halves = [n for n in NAMES[:BIG] if 0 < left.get(n, 0) < FILLER + 5]
        print(
            f"\nkilled with {sum(left.values())} of {total} spans left; "
            f"{len(halves)} conversations with part of their telemetry deleted"
        )
        assert 0 < sum(left.values()) < total, "killed too late to tell"
        assert halves, "killed between two conversations: not the case this test is about"
        _schema_whole(engine, migrated_db_url)
        killed = _history(migrated_db_url)
        assert killed == before, "the kill changed a conversation's history"
        _agree(killed)

        _toolscore(migrated_db_url, "prune", "--spans-older-than", "1d")  # the next pass
        assert _telemetry(engine) == {}
        assert _count(engine, log_records_table) == 0
        with engine.connect() as conn:
            unfinished = conn.execute(
                select(func.count())
                .select_from(conversations)
                .where(conversations.c.pruned_at.is_(None))
            ).scalar_one()
        assert unfinished == 0, "a conversation was left marked but not recorded as pruned"
        _schema_whole(engine, migrated_db_url)
        after = _history(migrated_db_url)
        assert after == before
    finally:
        engine.dispose()

"""``toolscore prune --history-older-than`` SIGKILLed in the middle of a pass over many finished
conversations: no conversation is half deleted (a conversation row is there with its
evaluations, tool calls and traces, or none of them is), the daily scores (live rows plus the
rollup) are unchanged, and the next pass finishes the work, the daily scores still unchanged."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select, text

from tests.collector.upkeep.test_retention import (
    REFERENCE,
    T_OLD,
    conversation,
    expect,
    score_all,
    store,
)
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.traces import traces_table

CONVERSATIONS = 1_200  # a pass takes them 200 at a time: several transactions


def _daily(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM daily_scores")).all()
    return sorted(tuple(str(v) for v in r) for r in rows)


def _orphans(engine: Engine) -> dict[str, int]:
    live = select(conversations.c.id)
    with engine.connect() as conn:
        return {
            name: int(
                conn.execute(
                    select(func.count()).select_from(table).where(column.not_in(live))
                ).scalar_one()
            )
            for name, table, column in (
                ("evaluations", evaluations, evaluations.c.conversation_id),
                ("tool_calls", tool_calls, tool_calls.c.conversation_id),
                ("traces", traces_table, traces_table.c.conversation_id),
            )
        }


def _count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(conversations)).scalar_one())


def test_a_history_prune_killed_midway_deletes_no_conversation_by_half(
    migrated_db_url: str, tmp_path: Path
) -> None:
    engine = create_engine(migrated_db_url)
    try:
        names = [f"c{i:05}" for i in range(CONVERSATIONS)]
        expect(engine, REFERENCE, *names)
        for i in range(CONVERSATIONS):
            spans, logs = conversation(f"c{i:05}", f"{i + 1:x}")
            store(engine, spans, logs, T_OLD)
        score_all(engine, T_OLD + 60 * 10**9)
        daily = _daily(engine)
        assert _count(engine) == CONVERSATIONS and daily

        log = tmp_path / "prune.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "toolscore", "prune", "--db", migrated_db_url,
                 "--history-older-than", "1d"],
                stdout=err, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 120
        while _count(engine) == CONVERSATIONS:  # killed once the first ones are deleted
            assert proc.poll() is None, f"prune ended first: {log.read_text()}"
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        left = _count(engine)
        print(f"\nkilled with {left} of {CONVERSATIONS} conversations left")
        assert 0 < left < CONVERSATIONS, "killed too late to tell"
        assert _orphans(engine) == {"evaluations": 0, "tool_calls": 0, "traces": 0}
        assert _daily(engine) == daily, "the daily scores changed"

        done = subprocess.run(
            [sys.executable, "-m", "toolscore", "prune", "--db", migrated_db_url,
             "--history-older-than", "1d"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert _count(engine) == 0
        assert _orphans(engine) == {"evaluations": 0, "tool_calls": 0, "traces": 0}
        assert _daily(engine) == daily
    finally:
        engine.dispose()

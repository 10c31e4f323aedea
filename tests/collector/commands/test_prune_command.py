"""``toolscore prune``: counts, deletes, reports; the file gives its pages back (SQLite)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.collector.upkeep.test_retention import (
    NS,
    REFERENCE,
    T_OLD,
    conversation,
    expect,
    score_all,
    store,
)
from toolscore.collector.cli import main
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table


def _spans(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
    engine.dispose()
    return n


def _filled(url: str, conversations: int = 40) -> None:
    upgrade(url)
    engine = create_engine(url)
    expect(engine, REFERENCE, *[f"c{i}" for i in range(conversations)])
    for i in range(conversations):
        spans, logs = conversation(f"c{i}", f"a{i:x}")
        store(engine, spans, logs, T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    engine.dispose()


def test_dry_run_counts_then_prune_deletes_and_summarises(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _filled(db_url, 3)
    assert main(["prune", "--db", db_url, "--spans-older-than", "1d", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would delete 15 spans and 3 log records of 3 conversations"), out
    assert _spans(db_url) == 15
    assert main(["prune", "--db", db_url, "--spans-older-than", "1d"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("deleted 15 spans and 3 log records of 3 conversations"), out
    assert "MiB" in out
    assert _spans(db_url) == 0
    assert main(["prune", "--db", db_url, "--spans-older-than", "1d"]) == 0
    assert capsys.readouterr().out.startswith("deleted 0 spans")


def test_bad_duration_is_one_line_and_status_2(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prune", "--db", sqlite_url, "--spans-older-than", "7 days"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--spans-older-than" in err and "7d" in err


def test_new_sqlite_files_give_freed_pages_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "toolscore.db"
    url = f"sqlite:///{path}"
    _filled(url, 150)
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar_one() == 2  # INCREMENTAL
        assert conn.exec_driver_sql("PRAGMA page_size").scalar_one() == 8192
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        before = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
    assert main(["prune", "--db", url, "--spans-older-than", "1d"]) == 0
    with engine.connect() as conn:
        after = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        free = conn.exec_driver_sql("PRAGMA freelist_count").scalar_one()
    engine.dispose()
    assert free == 0 and after < before * 0.7, (before, after)
    assert os.path.getsize(path) < before * 8192


def test_prune_history_dry_run_counts_then_deletes_and_summarises(
    db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _filled(db_url, 3)
    args = ["prune", "--db", db_url, "--history-older-than", "1d"]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("would delete 3 conversations (6 evaluations, 6 tool calls)"), out
    assert _spans(db_url) == 15
    assert main(["prune", "--db", db_url, "--spans-older-than", "12h", *args[3:]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("deleted 15 spans and 3 log records of 3 conversations"), out
    assert out[1].startswith(
        "deleted 3 conversations (6 evaluations, 6 tool calls, 0 spans, 0 log records)"
    ), out
    assert _spans(db_url) == 0
    assert main(args) == 0
    assert capsys.readouterr().out.startswith("deleted 0 conversations")


def test_prune_history_shorter_than_spans_or_nothing_is_a_usage_error(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    given = ["prune", "--db", sqlite_url]
    assert main([*given, "--spans-older-than", "7d", "--history-older-than", "1d"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--history-older-than: 1d is shorter" in err, err
    assert main(given) == 2
    assert "--history-older-than" in capsys.readouterr().err

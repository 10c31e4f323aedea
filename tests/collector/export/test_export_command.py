"""``toolscore export``: evaluations as CSV or JSON lines, filtered by date and currency."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
from pathlib import Path

import pytest

from tests.collector.export.helpers import add_conversation, add_evaluation
from toolscore.collector.cli import main
from toolscore.storage.plumbing.engine import create_engine

NOV2 = dt.datetime(2026, 11, 2, 10, tzinfo=dt.UTC)
NOV5 = dt.datetime(2026, 11, 5, 10, tzinfo=dt.UTC)


@pytest.fixture
def url(migrated_sqlite_url: str) -> str:
    engine = create_engine(migrated_sqlite_url)
    try:
        add_conversation(engine, "c1")
        add_evaluation(engine, "c1", score=0.5, created_at=NOV2, details={"reasons": ['a, "b"\n']})
        add_evaluation(engine, "c1", score=1.0, revision=2, created_at=NOV5)
        add_conversation(engine, "c2")
        add_evaluation(engine, "c2", "tool_call_f1", None, error="no reference", created_at=NOV5)
    finally:
        engine.dispose()
    return migrated_sqlite_url


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_jsonl_has_every_revision_with_labels(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _run(["export", "--db", url, "--format", "jsonl"], capsys).splitlines()
    rows = [json.loads(line) for line in lines]
    assert [(r["conversation_id"], r["revision"], r["is_current"]) for r in rows] == [
        ("c1", 1, False),
        ("c1", 2, True),
        ("c2", 1, True),
    ]
    assert [r["label"] for r in rows] == ["fail", "pass", "error"]
    assert rows[0]["details"] == {"reasons": ['a, "b"\n']}
    assert rows[0]["created_at"].startswith("2026-11-02T10:00:00")
    assert rows[2]["score"] is None and rows[2]["error"] == "no reference"


def test_csv_round_trips_the_same_values(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    as_json = [
        json.loads(x)
        for x in _run(["export", "--db", url, "--format", "jsonl"], capsys).splitlines()
    ]
    table = list(csv.DictReader(io.StringIO(_run(["export", "--db", url], capsys))))
    assert len(table) == len(as_json) == 3
    for row, ref in zip(table, as_json, strict=True):
        assert json.loads(row["details"]) == ref["details"]
        assert row["score"] == ("" if ref["score"] is None else str(ref["score"]))
        assert row["is_current"] == str(ref["is_current"]).lower()
        assert row["conversation_id"] == ref["conversation_id"]


def test_since_and_current_only_filter(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    since = _run(["export", "--db", url, "--format", "jsonl", "--since", "2026-11-03"], capsys)
    assert [json.loads(x)["created_at"][:10] for x in since.splitlines()] == ["2026-11-05"] * 2
    cur = _run(["export", "--db", url, "--format", "jsonl", "--current-only"], capsys)
    assert all(json.loads(x)["is_current"] for x in cur.splitlines())
    assert len(cur.splitlines()) == 2


def test_output_file(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "scores.csv"
    assert main(["export", "--db", url, "--output", str(target)]) == 0
    assert "3 evaluations written" in capsys.readouterr().err
    assert len(list(csv.DictReader(target.open()))) == 3


def test_unwritable_output_is_a_clear_error(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--db", url, "--output", str(tmp_path / "no" / "dir.csv")]) == 1
    assert "cannot write" in capsys.readouterr().err

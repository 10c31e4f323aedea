"""An unmatched conversation records why no expectation matched, and the read commands show it.

Each case stores the OTel GenAI fixture's spans in a migrated database (SQLite file and
PostgreSQL), imports expectations that miss it in one particular way, scores it with the
pipeline's own code and reads ``conversations.unmatched_reason``; the commands run as processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select

from tests.collector.pipeline.test_score import NOW, expect, fixture_spans, store
from toolscore.collector.pipeline.score import score_conversation
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

OTHER = [{"name": "get_weather", "args": {"city": "Lyon"}}]


@pytest.fixture
def migrated(migrated_db_url: str) -> Iterator[tuple[Engine, str]]:
    eng = create_engine(migrated_db_url)
    try:
        yield eng, migrated_db_url
    finally:
        eng.dispose()


def _score(engine: Engine, conv_id: str) -> tuple[str, str | None]:
    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)
    assert outcome is not None
    with engine.connect() as conn:
        status, reason = conn.execute(
            select(conversations.c.status, conversations.c.unmatched_reason).where(
                conversations.c.id == conv_id
            )
        ).one()
    assert outcome.unmatched_reason == reason
    return status, reason


def _first_message() -> str:
    spans, _ = fixture_spans()
    first = reconstruct(spans).first_user_message
    assert first
    return first


def test_nothing_imported_says_so(migrated: tuple[Engine, str]) -> None:
    engine, _ = migrated
    conv_id = store(engine, fixture_spans()[0])
    assert _score(engine, conv_id) == (
        "unmatched",
        "no expectations are imported (toolscore refs import FILE)",
    )


def test_no_reference_id_and_no_rule_found_it(migrated: tuple[Engine, str]) -> None:
    engine, _ = migrated
    expect(
        engine, ExpectationData(id="other", reference_tool_calls=OTHER, match={"user_input": "hi"})
    )
    conv_id = store(engine, fixture_spans()[0])
    status, reason = _score(engine, conv_id)
    assert status == "unmatched"
    assert reason == (
        "no reference id on its spans (toolscore.reference.id); "
        "no expectation's match.conversation_id names it; "
        "no expectation's match.user_input equals its first user message"
    )


def test_a_reference_id_that_names_no_expectation(migrated: tuple[Engine, str]) -> None:
    engine, _ = migrated
    expect(engine, ExpectationData(id="weather", reference_tool_calls=OTHER))
    conv_id = store(engine, fixture_spans("wether")[0])
    status, reason = _score(engine, conv_id)
    assert status == "unmatched" and reason is not None
    assert reason.startswith("reference id 'wether' names no expectation; ")


def test_a_conversation_id_rule_dropped_by_a_newer_version(migrated: tuple[Engine, str]) -> None:
    engine, _ = migrated
    spans, predicted = fixture_spans()
    conv_id = store(engine, spans)
    expect(
        engine,
        ExpectationData(
            id="e1", reference_tool_calls=predicted, match={"conversation_id": conv_id}
        ),
    )
    expect(
        engine,
        ExpectationData(id="e1", reference_tool_calls=predicted, match={"conversation_id": "x"}),
    )
    status, reason = _score(engine, conv_id)
    assert status == "unmatched" and reason is not None
    assert (
        "expectation 'e1' version 1 matched it by match.conversation_id, but its latest "
        "version is version 2, whose match.conversation_id does not"
    ) in reason


def test_a_user_input_rule_dropped_by_a_newer_version(migrated: tuple[Engine, str]) -> None:
    engine, _ = migrated
    spans, predicted = fixture_spans()
    conv_id = store(engine, spans)
    first = _first_message()
    for match in ({"user_input": first.upper()}, {"user_input": "something else"}):
        expect(engine, ExpectationData(id="e2", reference_tool_calls=predicted, match=match))
    status, reason = _score(engine, conv_id)
    assert status == "unmatched" and reason is not None
    assert reason.endswith(
        "expectation 'e2' version 1 matched it by match.user_input, but its latest "
        "version is version 2, whose match.user_input does not"
    )


def test_the_reason_goes_once_it_matches(migrated: tuple[Engine, str]) -> None:
    engine, _ = migrated
    spans, predicted = fixture_spans("weather")
    conv_id = store(engine, spans)
    expect(engine, ExpectationData(id="other", reference_tool_calls=OTHER))
    assert _score(engine, conv_id)[0] == "unmatched"
    expect(engine, ExpectationData(id="weather", reference_tool_calls=predicted))
    assert _score(engine, conv_id) == ("scored", None)


def _toolscore(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSCORE_DB"}
    done = subprocess.run(
        [sys.executable, "-m", "toolscore", *args, "--db", db],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_show_and_conversations_print_the_reason(migrated: tuple[Engine, str]) -> None:
    engine, url = migrated
    expect(engine, ExpectationData(id="weather", reference_tool_calls=OTHER))
    conv_id = store(engine, fixture_spans("wether")[0])
    _, reason = _score(engine, conv_id)
    assert reason is not None

    shown = _toolscore("show", conv_id, "--no-messages", db=url).stdout
    assert f"  why unmatched   {reason}" in shown.splitlines()
    listed = _toolscore("conversations", db=url).stdout.splitlines()
    assert listed[0].split()[-2:] == ["WHY", "UNMATCHED"]
    assert "reference id 'wether' names no expectation;" in listed[2]
    as_json = json.loads(_toolscore("conversations", "--json", db=url).stdout)
    assert as_json[0]["unmatched_reason"] == reason
    shown_json = json.loads(_toolscore("show", conv_id, "--json", db=url).stdout)
    assert shown_json["conversation"]["unmatched_reason"] == reason

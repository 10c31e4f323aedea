"""The expectations repository: versioning on import, exact round-trip, and matching order.

Every test runs on a real SQLite file and on PostgreSQL (``db_url``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import IntegrityError

from toolscore.storage.expectations.repository import (
    EXPECTATIONS,
    MATCH_IDS,
    ExpectationData,
    find_by_conversation_id,
    find_by_id,
    find_by_user_input,
    get_latest,
    get_version,
    import_expectations,
    list_expectations,
    list_versions,
    match_expectation,
    normalize_user_input,
)
from toolscore.storage.plumbing.engine import create_engine

WEATHER = [{"name": "get_weather", "args": {"city": "Paris"}}]
TIME = [{"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}]


@pytest.fixture
def engine(migrated_db_url: str) -> Iterator[Engine]:
    engine = create_engine(migrated_db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        yield conn


def test_a_new_id_is_stored_as_version_1_and_latest(conn: Connection) -> None:
    report = import_expectations(conn, [ExpectationData("weather", WEATHER)])

    assert (report.created, report.updated, report.unchanged) == (1, 0, 0)
    row = get_latest(conn, "weather")
    assert row is not None
    assert (row.id, row.version, row.is_latest) == ("weather", 1, True)
    assert row.reference_tool_calls == WEATHER
    assert row.user_input is None and row.metrics is None and row.match is None
    assert row.created_at.tzinfo is not None


def test_reimporting_the_same_content_adds_no_version(conn: Connection) -> None:
    item = ExpectationData("weather", WEATHER, metrics=("acc",), match={"user_input": "Hi"})
    import_expectations(conn, [item])

    report = import_expectations(conn, [item])

    assert (report.created, report.updated, report.unchanged) == (0, 0, 1)
    assert report.entries[0].version == 1
    assert [r.version for r in list_versions(conn, "weather")] == [1]


def test_changed_content_creates_a_new_version_and_moves_latest(conn: Connection) -> None:
    import_expectations(conn, [ExpectationData("weather", WEATHER)])

    report = import_expectations(conn, [ExpectationData("weather", WEATHER + TIME)])

    assert (report.created, report.updated, report.unchanged) == (0, 1, 0)
    assert report.entries[0].version == 2
    versions = list_versions(conn, "weather")
    assert [(r.version, r.is_latest) for r in versions] == [(1, False), (2, True)]
    old = get_version(conn, "weather", 1)
    assert old is not None and old.reference_tool_calls == WEATHER
    latest = get_latest(conn, "weather")
    assert latest is not None and latest.version == 2
    assert latest.reference_tool_calls == WEATHER + TIME


@pytest.mark.parametrize(
    "change",
    [
        {"metrics": ("acc",)},
        {"user_input": "What's the weather?"},
        {"match": {"conversation_id": "c-1"}},
    ],
)
def test_any_scoring_or_matching_field_counts_as_a_change(
    conn: Connection, change: dict[str, object]
) -> None:
    import_expectations(conn, [ExpectationData("weather", WEATHER)])

    report = import_expectations(conn, [ExpectationData("weather", WEATHER, **change)])  # type: ignore[arg-type]

    assert report.updated == 1


def test_reordering_the_match_rule_is_not_a_change(conn: Connection) -> None:
    first = {"conversation_id": ["a", "b"], "user_input": "hi"}
    import_expectations(conn, [ExpectationData("w", WEATHER, match=first)])

    again = {"user_input": "hi", "conversation_id": ["b", "a"]}
    report = import_expectations(conn, [ExpectationData("w", WEATHER, match=again)])

    assert report.unchanged == 1


def test_one_import_mixes_created_updated_and_unchanged(conn: Connection) -> None:
    import_expectations(conn, [ExpectationData("a", WEATHER), ExpectationData("b", WEATHER)])

    report = import_expectations(
        conn,
        [ExpectationData("a", WEATHER), ExpectationData("b", TIME), ExpectationData("c", TIME)],
    )

    by_id = {e.id: (e.status, e.version) for e in report.entries}
    assert by_id == {"a": ("unchanged", 1), "b": ("updated", 2), "c": ("created", 1)}
    assert [r.id for r in list_expectations(conn)] == ["a", "b", "c"]


def test_duplicate_ids_in_one_import_write_nothing(conn: Connection) -> None:
    with pytest.raises(ValueError, match="duplicate expectation id 'a'"):
        import_expectations(conn, [ExpectationData("a", WEATHER), ExpectationData("a", TIME)])

    assert list_expectations(conn) == []


def test_an_import_that_fails_midway_leaves_the_database_as_it_was(conn: Connection) -> None:
    import_expectations(conn, [ExpectationData("a", WEATHER)])
    # A stray non-latest row makes inserting "b" version 1 collide after "a" was superseded.
    conn.execute(
        EXPECTATIONS.insert().values(
            id="b",
            version=1,
            is_latest=False,
            reference_tool_calls=[],
            content_hash="x",
            created_at=datetime.now(UTC),
        )
    )
    conn.commit()

    with pytest.raises(IntegrityError):
        import_expectations(conn, [ExpectationData("a", TIME), ExpectationData("b", TIME)])

    latest = get_latest(conn, "a")
    assert latest is not None and (latest.version, latest.reference_tool_calls) == (1, WEATHER)
    assert get_latest(conn, "b") is None


def test_values_json_cannot_hold_are_rejected_before_writing(conn: Connection) -> None:
    bad = ExpectationData("b", [{"name": "f", "args": {"x": float("nan")}}])

    with pytest.raises(ValueError):
        import_expectations(conn, [ExpectationData("a", TIME), bad])

    assert list_expectations(conn) == []


def test_import_joins_the_callers_transaction(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(select(1))  # autobegins a transaction
        import_expectations(conn, [ExpectationData("a", WEATHER)])
        conn.rollback()
    with engine.connect() as conn:
        assert get_latest(conn, "a") is None


def test_json_round_trips_exactly_key_order_and_number_types(conn: Connection) -> None:
    # Ragas compares nested values by repr: {"b": 2, "a": 1} != {"a": 1, "b": 2}, 1 != 1.0.
    calls = [{"name": "f", "args": {"z": {"b": 2, "a": 1}, "n": 1.0, "i": 1, "s": "1", "t": True}}]
    user_input = [{"type": "human", "content": "go"}, {"content": "ok", "type": "ai"}]
    import_expectations(conn, [ExpectationData("f", calls, user_input=user_input)])

    row = get_latest(conn, "f")

    assert row is not None
    args = row.reference_tool_calls[0]["args"]
    assert list(args) == ["z", "n", "i", "s", "t"]
    assert list(args["z"]) == ["b", "a"]
    assert [type(args[k]) for k in ("n", "i", "s", "t")] == [float, int, str, bool]
    assert [list(m) for m in row.user_input] == [["type", "content"], ["content", "type"]]


def test_only_one_latest_version_per_id(conn: Connection) -> None:
    for calls in (WEATHER, TIME, WEATHER):
        import_expectations(conn, [ExpectationData("w", calls)])

    latest_count = conn.execute(
        select(func.count()).where(EXPECTATIONS.c.id == "w", EXPECTATIONS.c.is_latest.is_(True))
    ).scalar_one()
    assert latest_count == 1
    assert [r.version for r in list_versions(conn, "w")] == [1, 2, 3]


def test_created_at_records_the_import_time_in_utc(conn: Connection) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    import_expectations(conn, [ExpectationData("a", WEATHER)], now=when)
    import_expectations(conn, [ExpectationData("a", TIME)], now=when + timedelta(days=1))

    first, second = list_versions(conn, "a")

    assert first.created_at == when
    assert second.created_at == when + timedelta(days=1)


# --- matching ------------------------------------------------------------------------------


def test_find_by_conversation_id_accepts_a_string_or_a_list(conn: Connection) -> None:
    import_expectations(
        conn,
        [
            ExpectationData("single", WEATHER, match={"conversation_id": "conv-1"}),
            ExpectationData("multi", TIME, match={"conversation_id": ["conv-2", "conv-3"]}),
        ],
    )

    found = {c: find_by_conversation_id(conn, c) for c in ("conv-1", "conv-2", "conv-3", "x")}

    assert {c: r.id if r else None for c, r in found.items()} == {
        "conv-1": "single",
        "conv-2": "multi",
        "conv-3": "multi",
        "x": None,
    }


def test_a_new_version_replaces_the_conversation_ids_it_matches(conn: Connection) -> None:
    import_expectations(conn, [ExpectationData("e", WEATHER, match={"conversation_id": "old"})])
    import_expectations(conn, [ExpectationData("e", WEATHER, match={"conversation_id": "new"})])

    assert find_by_conversation_id(conn, "old") is None
    found = find_by_conversation_id(conn, "new")
    assert found is not None and (found.id, found.version) == ("e", 2)
    # the side table keeps the history of every version
    assert conn.execute(select(func.count()).select_from(MATCH_IDS)).scalar_one() == 2


def test_find_by_user_input_compares_normalised_text(conn: Connection) -> None:
    match = {"user_input": "  What's the WEATHER\n in   Paris? "}
    import_expectations(conn, [ExpectationData("w", WEATHER, match=match)])

    found = find_by_user_input(conn, normalize_user_input("what's the weather in paris?"))

    assert found is not None and found.id == "w"
    assert found.match_user_input_norm == "what's the weather in paris?"
    assert find_by_user_input(conn, "what's the weather in rome?") is None


def test_find_by_id_returns_the_latest_version(conn: Connection) -> None:
    import_expectations(conn, [ExpectationData("w", WEATHER)])
    import_expectations(conn, [ExpectationData("w", TIME)])

    found = find_by_id(conn, "w")

    assert found is not None and found.version == 2
    assert find_by_id(conn, "nope") is None


@pytest.fixture
def three_rules(conn: Connection) -> Connection:
    import_expectations(
        conn,
        [
            ExpectationData("by-ref", WEATHER),
            ExpectationData("by-conv", WEATHER, match={"conversation_id": "conv-1"}),
            ExpectationData("by-text", WEATHER, match={"user_input": "Weather in Paris?"}),
        ],
    )
    return conn


def _matched(conn: Connection, ref: str | None, conv: str | None, text: str | None) -> str | None:
    row = match_expectation(conn, reference_id=ref, conversation_id=conv, first_user_message=text)
    return row.id if row is not None else None


def test_reference_attribute_wins_over_conversation_id_and_user_input(
    three_rules: Connection,
) -> None:
    assert _matched(three_rules, "by-ref", "conv-1", "weather in paris?") == "by-ref"


def test_conversation_id_wins_over_user_input(three_rules: Connection) -> None:
    assert _matched(three_rules, None, "conv-1", "weather in paris?") == "by-conv"


def test_user_input_matches_after_trim_fold_and_casefold(three_rules: Connection) -> None:
    assert _matched(three_rules, None, "conv-9", "\tWEATHER   in\nParis?  ") == "by-text"


def test_a_rule_that_finds_nothing_yields_to_the_next(three_rules: Connection) -> None:
    assert _matched(three_rules, "not-imported", "conv-1", None) == "by-conv"
    assert _matched(three_rules, "not-imported", "conv-9", "weather in paris?") == "by-text"


def test_no_rule_matches_gives_none(three_rules: Connection) -> None:
    assert _matched(three_rules, None, "conv-9", "something else") is None
    assert _matched(three_rules, None, None, None) is None
    assert _matched(three_rules, "", "", "   ") is None


def test_several_candidates_pick_the_smallest_id(conn: Connection) -> None:
    import_expectations(
        conn,
        [
            ExpectationData("b", WEATHER, match={"conversation_id": "c", "user_input": "hi"}),
            ExpectationData("a", TIME, match={"conversation_id": "c", "user_input": "hi"}),
        ],
    )

    assert _matched(conn, None, "c", None) == "a"
    assert _matched(conn, None, None, "HI") == "a"


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("  Hello   World ", "hello world"),
        ("a\t\nb\u00a0c", "a b c"),
        ("Straße", "strasse"),
        ("", ""),
    ],
)
def test_normalisation_trims_folds_whitespace_and_casefolds(raw: str, normalised: str) -> None:
    assert normalize_user_input(raw) == normalised


def test_matching_uses_the_collectors_normalisation() -> None:
    from toolscore.collector.reconstruction import conversation_keys

    assert normalize_user_input is conversation_keys.normalize_user_input

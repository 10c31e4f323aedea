"""``toolscore rescore``: new revisions after a change, idempotent otherwise, resumable."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from tests.collector.pipeline.e2e import (
    genai_agent_trace,
    import_refs,
    otlp_provider,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from toolscore.collector.cli import main
from toolscore.collector.commands import rescore as rescore_cmd
from toolscore.collector.pipeline import rescoring
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.history.rescore_runs import get_run
from toolscore.storage.plumbing.engine import create_engine

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
CONVS = [f"rs-{i}" for i in range(5)]


@pytest.fixture
def scored_db(sqlite_url: str) -> Iterator[str]:
    """Five conversations (weather + time calls) scored by a real server against [WEATHER]."""
    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    with pipeline_server(sqlite_url) as srv:
        provider = otlp_provider(srv, grpc=True)
        for conv in CONVS:
            genai_agent_trace(
                provider.get_tracer("app"),
                conv,
                [WEATHER, TIME],
                "weather?",
                {"toolscore.reference.id": "w"},
            )
        provider.force_flush()
        provider.shutdown()
        wait_scored(sqlite_url, CONVS)
    yield sqlite_url


def _current(url: str) -> dict[tuple[str, str], dict[str, Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(evaluations).where(evaluations.c.is_current.is_(True)))
            return {(r["conversation_id"], r["metric"]): dict(r) for r in rows.mappings()}
    finally:
        engine.dispose()


def _revisions(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(select(conversations.c.id, conversations.c.revision)).all())  # type: ignore[arg-type]
    finally:
        engine.dispose()


def _scores(rows: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], Any]:
    return {k: (v["score"], v["details"], v["expectation_version"]) for k, v in rows.items()}


def test_rescoring_with_nothing_changed_is_idempotent_and_writes_nothing(
    scored_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _current(scored_db)
    assert main(["rescore", "--db", scored_db]) == 0
    assert "5 unchanged" in capsys.readouterr().out
    assert main(["rescore", "--db", scored_db]) == 0
    assert _current(scored_db) == before  # same rows: same ids, revisions and scores
    assert set(_revisions(scored_db).values()) == {1}


def test_forced_rescore_writes_a_new_revision_with_equal_scores(scored_db: str) -> None:
    before = _current(scored_db)
    assert main(["rescore", "--db", scored_db, "--force"]) == 0
    after = _current(scored_db)
    assert set(_revisions(scored_db).values()) == {2}
    assert {r["revision"] for r in after.values()} == {2}
    assert _scores(after) == _scores(before)


def test_a_changed_expectation_gives_new_revisions_recording_its_version(
    scored_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import_refs(scored_db, ExpectationData(id="w", reference_tool_calls=[WEATHER, TIME]))
    assert main(["rescore", "--db", scored_db, "--expectation", "w"]) == 0
    assert "5 rescored" in capsys.readouterr().out
    after = _current(scored_db)
    expected = ragas_scores(ragas_sample("weather?", [[WEATHER, TIME]], [WEATHER, TIME]))
    for conv in CONVS:
        for metric, score in expected.items():
            row = after[(conv, metric)]
            assert (row["revision"], row["expectation_version"]) == (2, 2)
            assert row["score"] == pytest.approx(score)
            assert row["metric_config"]  # the metric configuration that produced it
    # another expectation filter leaves these conversations alone
    assert main(["rescore", "--db", scored_db, "--expectation", "other"]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_a_changed_scoring_configuration_is_recorded(scored_db: str, tmp_path: Path) -> None:
    config = tmp_path / "scoring.yaml"
    config.write_text("metrics:\n  loose: {type: tool_call_accuracy, order: subsequence}\n")
    assert main(["rescore", "--db", scored_db, "--config", str(config)]) == 0
    after = _current(scored_db)
    rows = [r for (c, m), r in after.items() if m == "loose"]
    assert len(rows) == 5 and all(r["revision"] == 2 for r in rows)
    assert all(r["metric_config"].get("order") == "subsequence" for r in rows)
    assert all(r["score"] == 1.0 for r in rows)  # the extra call is allowed by subsequence


def test_an_interrupted_run_resumes_where_it_stopped(
    scored_db: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import_refs(scored_db, ExpectationData(id="w", reference_tool_calls=[WEATHER, TIME]))
    monkeypatch.setattr(rescoring, "CHUNK", 2)

    class Interrupt:
        def __init__(self, stream: Any) -> None:
            pass

        def __call__(self, done: int, total: int) -> None:
            if done >= 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(rescore_cmd, "ProgressBar", Interrupt)
    assert main(["rescore", "--db", scored_db]) == 130
    err = capsys.readouterr().err
    run_id = err.split("--resume ")[1].split()[0]
    assert sorted(_revisions(scored_db).values()) == [1, 1, 1, 2, 2]

    monkeypatch.setattr(rescore_cmd, "ProgressBar", lambda stream: None)
    assert main(["rescore", "--db", scored_db, "--resume", run_id]) == 0
    out = capsys.readouterr().out
    assert "3 rescored (2 already done earlier in this run)" in out
    assert set(_revisions(scored_db).values()) == {2}  # each conversation rescored once
    engine = create_engine(scored_db)
    try:
        with engine.connect() as conn:
            run = get_run(conn, run_id)
    finally:
        engine.dispose()
    assert run is not None and run.finished_at is not None


def test_resume_refuses_a_different_configuration(
    scored_db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rescore", "--db", scored_db]) == 0
    run_id = capsys.readouterr().err.split("rescore run ")[1].split()[0]
    config = tmp_path / "scoring.yaml"
    config.write_text("metrics:\n  only_f1: {type: tool_call_f1}\n")
    assert main(["rescore", "--db", scored_db, "--resume", run_id, "--config", str(config)]) == 2
    assert "used another scoring configuration" in capsys.readouterr().err
    assert main(["rescore", "--db", scored_db, "--resume", "r-nope"]) == 2


def test_progress_bar_draws_only_on_a_terminal() -> None:
    import io

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    piped, tty = io.StringIO(), Tty()
    for stream in (piped, tty):
        bar = rescore_cmd.ProgressBar(stream, width=10)
        bar(0, 4)
        bar(2, 4)
        bar(4, 4)
    assert piped.getvalue() == ""
    assert tty.getvalue().split("\r")[1:] == [
        "rescoring [..........] 0/4 conversations",
        "rescoring [#####.....] 2/4 conversations",
        "rescoring [##########] 4/4 conversations\n",
    ]


SERVER_CONFIG = (
    "metrics:\n"
    "  loose: {type: tool_call_accuracy, order: subsequence}\n"
    "  tool_call_f1: {type: tool_call_f1}\n"
)


@pytest.fixture
def custom_scored_db(sqlite_url: str, tmp_path: Path) -> str:
    """Two conversations scored by a real server running its own metric instances."""
    config = tmp_path / "server.yaml"
    config.write_text(SERVER_CONFIG)
    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    with pipeline_server(sqlite_url, config_path=config) as srv:
        provider = otlp_provider(srv, grpc=True)
        for conv in CONVS[:2]:
            genai_agent_trace(
                provider.get_tracer("app"),
                conv,
                [WEATHER, TIME],
                "weather?",
                {"toolscore.reference.id": "w"},
            )
        provider.force_flush()
        provider.shutdown()
        wait_scored(sqlite_url, CONVS[:2])
    return sqlite_url


def test_without_config_it_rescores_with_the_instances_the_server_recorded(
    custom_scored_db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _current(custom_scored_db)
    assert main(["rescore", "--db", custom_scored_db, "--force"]) == 0
    err = capsys.readouterr().err
    assert "scoring with the metric instances the server recorded (loose, tool_call_f1)" in err
    after = _current(custom_scored_db)
    assert set(after) == set(before)  # same instances, none dropped, no default added
    for key, row in after.items():
        assert row["revision"] == 2
        assert row["metric_config"] == before[key]["metric_config"]
        assert row["score"] == before[key]["score"]


def test_config_flag_then_environment_win_over_what_was_recorded(
    custom_scored_db: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env_config = tmp_path / "env.yaml"
    env_config.write_text("metrics:\n  from_env: {type: tool_call_f1}\n")
    monkeypatch.setenv("TOOLSCORE_CONFIG", str(env_config))
    assert main(["rescore", "--db", custom_scored_db]) == 0
    assert f"scoring with TOOLSCORE_CONFIG={env_config}" in capsys.readouterr().err
    assert {m for _, m in _current(custom_scored_db)} == {"from_env"}
    flag_config = tmp_path / "flag.yaml"
    flag_config.write_text("metrics:\n  from_flag: {type: tool_call_f1}\n")
    assert main(["rescore", "--db", custom_scored_db, "--config", str(flag_config)]) == 0
    assert f"scoring with --config {flag_config}" in capsys.readouterr().err
    assert {m for _, m in _current(custom_scored_db)} == {"from_flag"}


def test_with_nothing_recorded_it_says_it_uses_the_defaults(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    assert main(["rescore", "--db", sqlite_url]) == 0
    assert "scoring with the Ragas defaults (no configuration given or recorded)" in (
        capsys.readouterr().err
    )


def test_rescore_applies_the_control_calls_policy_as_serve_does(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A handoff (transfer_to_*) left out by the server's default is counted when rescore runs
    with --control-calls include=handoff, and left out again with the default."""
    transfer = {"name": "transfer_to_billing", "args": {}}
    import_refs(sqlite_url, ExpectationData(id="h", reference_tool_calls=[WEATHER]))
    with pipeline_server(sqlite_url) as srv:
        provider = otlp_provider(srv)
        genai_agent_trace(
            provider.get_tracer("app"),
            "hand",
            [WEATHER, transfer],
            "w?",
            {"toolscore.reference.id": "h"},
        )
        provider.force_flush()
        provider.shutdown()
        wait_scored(sqlite_url, ["hand"])

    def accuracy() -> float:
        return float(_current(sqlite_url)[("hand", "tool_call_accuracy")]["score"])

    assert accuracy() == 1.0  # the handoff is not one of the user's calls
    assert main(["rescore", "--db", sqlite_url, "--control-calls", "include=handoff"]) == 0
    assert "1 rescored" in capsys.readouterr().out
    counted = ragas_scores(ragas_sample("w?", [[WEATHER, transfer]], [WEATHER]))
    assert accuracy() == counted["tool_call_accuracy"] < 1.0
    assert main(["rescore", "--db", sqlite_url, "--control-calls", "exclude=handoff"]) == 0
    assert "1 rescored" in capsys.readouterr().out and accuracy() == 1.0

"""The Langfuse annotation target against a fake that follows Langfuse's documented scores API
(tests/collector/export/langfuse_fake.py: Langfuse cannot run here), and the --annotate option."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update

from tests.collector.export.helpers import (
    add_conversation,
    add_evaluation,
    migrated_engine,
    trace_id_for,
)
from tests.collector.export.langfuse_fake import FakeLangfuse
from toolscore.collector.cli import build_parser
from toolscore.collector.configuration import ConfigError
from toolscore.collector.export.annotations.langfuse import LangfuseClient
from toolscore.collector.export.annotations.targets import AnnotationTarget, annotation_targets
from toolscore.collector.export.annotations.worker import AnnotationWorker, Pacing
from toolscore.collector.serve_config import load_serve_config
from toolscore.storage.history.deliveries import annotation_deliveries
from toolscore.storage.history.instance import instance_id

ROOT = "00f067aa0ba902b7"
KEYS = {"LANGFUSE_PUBLIC_KEY": "pk-lf-test", "LANGFUSE_SECRET_KEY": "sk-lf-test"}


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = migrated_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def langfuse() -> Iterator[FakeLangfuse]:
    fake = FakeLangfuse().start()
    yield fake
    fake.stop()


class Clock:
    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def later(self, seconds: float) -> None:
        self.now += dt.timedelta(seconds=seconds)


def _passes(
    engine: Engine, target: AnnotationTarget, clock: Clock, steps: int = 1
) -> list[dict[str, int]]:
    """``steps`` passes of a worker, each 400 s after the last (past any backoff)."""

    async def run() -> list[dict[str, int]]:
        worker = AnnotationWorker(engine, target, LangfuseClient(target), Pacing(), now=clock)
        await worker.open()
        try:
            results = []
            for _ in range(steps):
                results.append((await worker.run_pass())[0])
                clock.later(400)
            return results
        finally:
            await worker.close()

    return asyncio.run(run())


def _target(fake: FakeLangfuse, environ: dict[str, str] = KEYS) -> AnnotationTarget:
    [target] = annotation_targets([("langfuse", fake.url)], environ)
    return target


def _rows(engine: Engine) -> list[dict[str, object]]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(select(annotation_deliveries)).mappings()]


def test_scores_wait_for_the_trace_then_arrive_with_a_deterministic_id(
    engine: Engine, langfuse: FakeLangfuse
) -> None:
    add_conversation(engine, "conv-1")
    add_evaluation(engine, "conv-1", "tool_call_accuracy", 0.5, root_span_id=ROOT, expected_count=3)
    clock, target = Clock(), _target(langfuse)
    [first] = _passes(engine, target, clock)
    assert first == {"not_ingested_yet": 1}
    [row] = _rows(engine)
    assert row["done_at"] is None and row["attempts"] == 1 and "404" in str(row["last_error"])
    # retried only after its backoff
    assert _passes(engine, target, Clock()) == [{}]
    langfuse.ingested.add(trace_id_for("conv-1"))
    assert _passes(engine, target, clock) == [{"delivered": 1}]
    [score] = langfuse.scores.values()
    with engine.connect() as conn:
        instance = instance_id(conn)
    expected_id = str(
        uuid.uuid5(uuid.NAMESPACE_URL, f"toolscore:{instance}:conv-1:tool_call_accuracy")
    )
    assert score["id"] == expected_id
    assert (score["traceId"], score["observationId"]) == (trace_id_for("conv-1"), ROOT)
    assert (score["name"], score["value"], score["dataType"]) == (
        "tool_call_accuracy",
        0.5,
        "NUMERIC",
    )
    assert score["comment"].startswith("fail: ") and "2 predicted vs 3 expected" in score["comment"]
    assert _rows(engine)[0]["outcome"] == "delivered"


def test_a_re_score_and_a_resend_update_the_one_score(
    engine: Engine, langfuse: FakeLangfuse
) -> None:
    langfuse.ingested.add(trace_id_for("conv-r"))
    add_conversation(engine, "conv-r")
    first = add_evaluation(engine, "conv-r", score=0.0, revision=1)
    clock, target = Clock(), _target(langfuse)
    assert _passes(engine, target, clock) == [{"delivered": 1}]
    add_evaluation(engine, "conv-r", score=1.0, revision=2)
    with engine.begin() as conn:  # the first one is resent (a lost acknowledgement) meanwhile
        conn.execute(
            update(annotation_deliveries)
            .where(annotation_deliveries.c.evaluation_id == first)
            .values(done_at=None, outcome=None)
        )
    assert _passes(engine, target, clock) == [{"superseded": 1, "delivered": 1}]
    [score] = langfuse.scores.values()  # upserted by id: one score, the new value
    assert score["value"] == 1.0 and score["comment"].startswith("pass: ")
    assert sorted(str(r["outcome"]) for r in _rows(engine)) == ["delivered", "superseded"]


def test_unscored_evaluations_are_skipped_and_bad_keys_retried(
    engine: Engine, langfuse: FakeLangfuse
) -> None:
    langfuse.ingested.add(trace_id_for("conv-e"))
    add_conversation(engine, "conv-e")
    add_evaluation(engine, "conv-e", "tool_call_f1", None, error="reference is empty")
    add_evaluation(engine, "conv-e", "tool_call_accuracy", 1.0)
    clock = Clock()
    wrong = _target(langfuse, {**KEYS, "LANGFUSE_SECRET_KEY": "sk-wrong"})
    assert _passes(engine, wrong, clock) == [{"skipped": 1, "failed": 1}]
    failing = [r for r in _rows(engine) if r["done_at"] is None]
    assert len(failing) == 1 and "401" in str(failing[0]["last_error"])
    assert "check the credentials" in str(failing[0]["last_error"])
    assert "sk-wrong" not in str(failing[0]["last_error"])
    assert _passes(engine, _target(langfuse), clock) == [{"delivered": 1}]
    assert [s["name"] for s in langfuse.scores.values()] == ["tool_call_accuracy"]
    assert all(status in (200, 401) for status, _ in langfuse.requests)  # never a 400


def test_each_database_has_its_own_scores(tmp_path: Path, langfuse: FakeLangfuse) -> None:
    langfuse.ingested.add(trace_id_for("conv-same"))
    for n in (1, 2):
        engine = migrated_engine(f"sqlite:///{tmp_path / f'db{n}.sqlite'}")
        try:
            add_conversation(engine, "conv-same")
            add_evaluation(engine, "conv-same")
            assert _passes(engine, _target(langfuse), Clock()) == [{"delivered": 1}]
        finally:
            engine.dispose()
    assert len(langfuse.scores) == 2


# --- the option ----------------------------------------------------------------------------


def _annotate(argv: list[str], env: dict[str, str]) -> tuple[AnnotationTarget, ...]:
    return load_serve_config(build_parser().parse_args(["serve", *argv]), env).annotate


def test_annotate_from_flags_variable_and_file_with_each_backend_s_credentials(
    tmp_path: Path,
) -> None:
    flags = ["--annotate", "phoenix=http://px:6006/", "--annotate", "langfuse=https://lf.example"]
    phoenix, langfuse = _annotate(flags, {**KEYS, "PHOENIX_API_KEY": "px-key"})
    assert (phoenix.key, langfuse.key) == ("phoenix=http://px:6006", "langfuse=https://lf.example")
    assert dict(phoenix.headers) == {"authorization": "Bearer px-key"}
    assert dict(langfuse.headers)["authorization"].startswith("Basic ")
    assert "px-key" not in repr(phoenix)
    [only] = _annotate([], {"TOOLSCORE_ANNOTATE": "phoenix=http://a:6006"})
    assert only.headers == ()  # a Phoenix without authentication
    both = _annotate(
        [], {**KEYS, "TOOLSCORE_ANNOTATE": "phoenix=http://a:6006,langfuse=http://b:3000"}
    )
    assert [t.kind for t in both] == ["phoenix", "langfuse"]
    config = tmp_path / "toolscore.yaml"
    config.write_text("serve:\n  annotate: phoenix=http://f:6006\n")
    [from_file] = _annotate(["--config", str(config)], {})
    assert from_file.url == "http://f:6006"
    assert _annotate(["--no-export", *flags], KEYS) == ()


@pytest.mark.parametrize(
    ("item", "env", "message"),
    [
        ("langfuse=http://lf:3000", {}, "set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY"),
        (
            "jaeger=http://j:16686",
            {},
            "--annotate / TOOLSCORE_ANNOTATE: expected phoenix=URL or langfuse=URL",
        ),
        ("phoenix=px:6006", {}, "expected phoenix=http"),
        ("phoenix=http://u:p@px:6006", {}, "credentials go in the backend's variables"),
    ],
)
def test_bad_annotate_values_are_refused(item: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        _annotate(["--annotate", item], env)


def test_serve_delivers_and_counts_per_target(sqlite_url: str, langfuse: FakeLangfuse) -> None:
    import time

    from tests.integration.serve_harness import RunningServer, server_settings
    from toolscore.collector.export.extension import export_extension

    engine = migrated_engine(sqlite_url)
    add_conversation(engine, "conv-s")
    add_evaluation(engine, "conv-s")
    engine.dispose()
    target = _target(langfuse)
    key = {"target": target.key}
    with RunningServer(
        server_settings(sqlite_url), [export_extension(None, annotate=(target,))]
    ) as srv:
        registry = srv.app.metrics.registry
        assert (
            registry.get_sample_value("toolscore_annotations_total", {**key, "result": "delivered"})
            == 0
        )
        time.sleep(3)  # a pass or two: the trace is not in Langfuse yet
        waiting = registry.get_sample_value(
            "toolscore_annotations_total", {**key, "result": "not_ingested_yet"}
        )
        assert waiting and waiting >= 1
        assert registry.get_sample_value("toolscore_annotation_backlog", key) == 1
        langfuse.ingested.add(trace_id_for("conv-s"))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not registry.get_sample_value(
            "toolscore_annotations_total", {**key, "result": "delivered"}
        ):
            time.sleep(0.2)
        assert (
            registry.get_sample_value("toolscore_annotations_total", {**key, "result": "delivered"})
            == 1
        )
        assert registry.get_sample_value("toolscore_annotation_backlog", key) == 0
    assert len(langfuse.scores) == 1

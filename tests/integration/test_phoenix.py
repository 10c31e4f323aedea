"""Scores in a real Arize Phoenix (tests/integration/phoenix_server.py): the agent sends its spans
to Phoenix and to ``toolscore serve --export-endpoint PHOENIX --annotate phoenix=PHOENIX``, and
everything is checked through Phoenix's own REST API: annotations on the right spans, traces and
sessions, a re-score updating them, evaluation spans inside the evaluated trace and its project,
two databases losing no evaluation span, restarts of either side losing nothing, and the
write-back's backlog empty (Phoenix has no OTLP logs receiver)."""

from __future__ import annotations

import time
import urllib.error
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, wait_scored
from tests.integration.phoenix_server import PhoenixServer
from tests.integration.serve_harness import RunningServer
from toolscore.collector.cli import build_parser, main
from toolscore.collector.commands.serve import extensions
from toolscore.collector.serve_config import load_serve_config
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.history.deliveries import annotation_deliveries
from toolscore.storage.history.outbox import evaluation_exports
from toolscore.storage.plumbing.engine import create_engine

pytestmark = pytest.mark.timeout(900)

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
METRICS = ("tool_call_accuracy", "tool_call_f1")
T = TypeVar("T")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    server = PhoenixServer(tmp_path_factory.mktemp("phoenix")).start()
    yield server
    server.stop()


def toolscore_serve(db_url: str, phoenix: PhoenixServer, grpc: bool = False) -> RunningServer:
    """``toolscore serve`` configured by its own command line, on ephemeral ports; evaluation
    spans to Phoenix's OTLP/HTTP receiver, or with ``grpc`` to its gRPC one."""
    argv = ["serve", "--db", db_url, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"]
    argv += ["--settle", "1", "--root-idle", "0.3"]
    if grpc:
        argv += ["--export-endpoint", f"http://127.0.0.1:{phoenix.grpc_port}"]
    else:
        argv += ["--export-endpoint", phoenix.url, "--export-protocol", "http/protobuf"]
    argv += ["--annotate", f"phoenix={phoenix.url}"]
    config = load_serve_config(build_parser().parse_args(argv), {})
    return RunningServer(config.settings, extensions(config))


def agent(project: str, *exporters: Any) -> TracerProvider:
    """The agent's SDK: a project name for Phoenix, every span to each exporter."""
    resource = Resource.create(
        {"service.name": "weather-agent", "openinference.project.name": project}
    )
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def run_agent(provider: TracerProvider, conversations: dict[str, Sequence[dict[str, Any]]]) -> None:
    for conv, calls in conversations.items():
        attributes = {"toolscore.reference.id": "w", "session.id": conv}
        genai_agent_trace(provider.get_tracer("agent"), conv, calls, "weather?", attributes)


def eventually(
    check: Callable[[], T | None], what: str | Callable[[], str], timeout_s: float = 120.0
) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not within {timeout_s} s: {what if isinstance(what, str) else what()}"
            )
        time.sleep(0.5)


def current(db_url: str) -> dict[tuple[str, str], dict[str, Any]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(evaluations).where(evaluations.c.is_current.is_(True)))
            return {(r["conversation_id"], r["metric"]): dict(r) for r in rows.mappings()}
    finally:
        engine.dispose()


def backlog(db_url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the OTLP outbox's rows, the annotation outbox's rows)."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            exports = [dict(r) for r in conn.execute(select(evaluation_exports)).mappings()]
            notes = [dict(r) for r in conn.execute(select(annotation_deliveries)).mappings()]
        return exports, notes
    finally:
        engine.dispose()


def drained(db_url: str, count: int) -> bool:
    exports, notes = backlog(db_url)
    return (
        len(exports) == count
        and len(notes) == count
        and all(r["exported_at"] is not None for r in exports)
        and all(r["done_at"] is not None for r in notes)
    )


def annotations(
    phoenix: PhoenixServer, project: str, kind: str, ids: Sequence[str]
) -> list[dict[str, Any]]:
    key = {"span": "span_ids", "trace": "trace_ids", "session": "session_ids"}[kind]
    query = "&".join(f"{key}={i}" for i in ids)
    found: list[dict[str, Any]] = phoenix.get(
        f"/v1/projects/{project}/{kind}_annotations?{query}&limit=1000"
    )["data"]
    return found


def spans(phoenix: PhoenixServer, project: str) -> list[dict[str, Any]]:
    """The project's spans ([] while Phoenix has no such project)."""
    try:
        found: list[dict[str, Any]] = phoenix.get(f"/v1/projects/{project}/spans?limit=1000")[
            "data"
        ]
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise
    return found


def matches(
    notes: list[dict[str, Any]],
    scores: dict[tuple[str, str], dict[str, Any]],
    key: str,
    id_of: Callable[[dict[str, Any]], str],
) -> bool:
    """Each current evaluation is exactly one annotation on its span/trace/session, same score."""
    want = {(id_of(row), metric): row["score"] for (_c, metric), row in scores.items()}
    got = {
        (n[key], n["name"]): n["result"]["score"] for n in notes if n["identifier"] == "toolscore"
    }
    return got == want and len(notes) == len(want)


def test_scores_become_phoenix_annotations_and_a_re_score_updates_them(
    phoenix: PhoenixServer, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'toolscore.db'}"
    project = f"weather-{uuid.uuid4().hex[:6]}"
    import_refs(db, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    with toolscore_serve(db, phoenix) as srv:
        provider = agent(
            project,
            OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces"),
            OTLPSpanExporter(endpoint=f"{srv.http_url}/v1/traces"),
        )
        run_agent(provider, {"good": [WEATHER], "bad": [TIME]})
        provider.shutdown()
        wait_scored(db, ["good", "bad"], timeout_s=60)
        scores = current(db)
        assert scores[("good", "tool_call_accuracy")]["score"] == 1.0
        assert scores[("bad", "tool_call_accuracy")]["score"] == 0.0
        eventually(lambda: drained(db, 4), "the write-back's backlog empty")
        roots = sorted({r["root_span_id"] for r in scores.values()})
        traces = sorted({r["trace_id"] for r in scores.values()})

        # the span, trace and session annotations, one per evaluation, with its score
        span_notes = annotations(phoenix, project, "span", roots)
        assert matches(span_notes, scores, "span_id", lambda r: r["root_span_id"]), span_notes
        by_root = {(n["span_id"], n["name"]): n for n in span_notes}
        bad = by_root[(scores[("bad", "tool_call_accuracy")]["root_span_id"], "tool_call_accuracy")]
        assert bad["annotator_kind"] == "CODE"
        assert (
            bad["result"]["label"] == "fail"
            and "1 predicted vs 1 expected" in bad["result"]["explanation"]
        )
        assert bad["metadata"]["toolscore.evaluation.revision"] == 1
        trace_notes = annotations(phoenix, project, "trace", traces)
        assert matches(trace_notes, scores, "trace_id", lambda r: r["trace_id"]), trace_notes
        session_notes = annotations(phoenix, project, "session", ["good", "bad"])
        assert matches(session_notes, scores, "session_id", lambda r: r["conversation_id"]), (
            session_notes
        )

        # the evaluation spans: in the agent's project, children of the root, inside its time
        all_spans = spans(phoenix, project)
        evaluators = [s for s in all_spans if s["span_kind"] == "EVALUATOR"]
        assert sorted(s["name"] for s in evaluators) == sorted(
            f"evaluation {m}" for m in METRICS for _ in "ab"
        )
        by_id = {s["context"]["span_id"]: s for s in all_spans}
        for s in evaluators:
            root = by_id[s["parent_id"]]
            assert root["parent_id"] is None and root["name"] == "invoke_agent weather"
            assert root["start_time"] <= s["start_time"] <= s["end_time"] <= root["end_time"]

        # the logs half is skipped once, not failing for ever
        exports, _ = backlog(db)
        assert all(r["skipped_signals"] == "logs" and r["attempts"] == 0 for r in exports)
        registry = srv.app.metrics.registry
        assert registry.get_sample_value("toolscore_export_skipped_total", {"signal": "logs"}) == 4
        assert (
            registry.get_sample_value("toolscore_export_evaluations_total", {"result": "failed"})
            == 0
        )

        # a re-score (the expectation changed) updates the same annotations
        import_refs(db, ExpectationData(id="w", reference_tool_calls=[TIME]))
        assert main(["rescore", "--db", db]) == 0
        rescored = current(db)
        assert rescored[("bad", "tool_call_accuracy")]["score"] == 1.0
        assert rescored[("good", "tool_call_accuracy")]["score"] == 0.0
        eventually(lambda: drained(db, 8), "the re-score's backlog empty")
        eventually(
            lambda: matches(
                annotations(phoenix, project, "span", roots),
                rescored,
                "span_id",
                lambda r: r["root_span_id"],
            ),
            "span annotations updated to the new revision",
            timeout_s=30,
        )
        updated = {
            (n["span_id"], n["name"]): n for n in annotations(phoenix, project, "span", roots)
        }
        assert updated[(bad["span_id"], "tool_call_accuracy")]["id"] == bad["id"]  # upserted
        assert (
            updated[(bad["span_id"], "tool_call_accuracy")]["metadata"][
                "toolscore.evaluation.revision"
            ]
            == 2
        )
        assert matches(
            annotations(phoenix, project, "trace", traces),
            rescored,
            "trace_id",
            lambda r: r["trace_id"],
        )


def test_two_databases_and_restarts_of_either_side_lose_nothing(
    phoenix: PhoenixServer, tmp_path: Path
) -> None:
    """Both databases number their evaluations from 1; the agent's spans reach Phoenix after
    toolscore's (a lagging Collector leg); toolscore A and then Phoenix restart meanwhile. A
    sends its spans over gRPC (Phoenix answers UNIMPLEMENTED for logs there), B over HTTP."""
    project = f"lagging-{uuid.uuid4().hex[:6]}"
    dbs = [f"sqlite:///{tmp_path / f'toolscore-{n}.db'}" for n in ("a", "b")]
    for db in dbs:
        import_refs(db, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    held = InMemorySpanExporter()  # the agent's spans on their way to Phoenix
    with toolscore_serve(dbs[1], phoenix) as b:
        with toolscore_serve(dbs[0], phoenix, grpc=True) as a:
            for srv, conv in ((a, "conv-a"), (b, "conv-b")):
                provider = agent(
                    project, held, OTLPSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
                )
                run_agent(provider, {conv: [WEATHER, TIME]})
                provider.force_flush()  # not shutdown: that would stop ``held`` too
            wait_scored(dbs[0], ["conv-a"], timeout_s=60)
            wait_scored(dbs[1], ["conv-b"], timeout_s=60)
            # the evaluation spans arrive first; the annotations wait (404) for the agent's spans
            eventually(
                lambda: (
                    len([s for s in spans(phoenix, project) if s["span_kind"] == "EVALUATOR"]) == 4
                ),
                "both databases' evaluation spans in the agent's project",
            )
            eventually(lambda: all(n["attempts"] >= 1 for n in backlog(dbs[0])[1]), "404s")
        # toolscore A is down with its annotations undelivered
        assert all(n["done_at"] is None for n in backlog(dbs[0])[1])
        exporter = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces")
        assert exporter.export(held.get_finished_spans()).name == "SUCCESS"  # the lagging leg
        exporter.shutdown()
        eventually(
            lambda: len(spans(phoenix, project)) == 4 + 2 * 5, "the agent's spans in Phoenix"
        )
        phoenix.restart()  # while B runs
        with toolscore_serve(dbs[0], phoenix, grpc=True):  # A again
            for db in dbs:
                eventually(lambda db=db: drained(db, 2), f"{db}'s backlog empty", timeout_s=400)
    for db in dbs:  # the logs half skipped, not failing
        assert all(r["skipped_signals"] == "logs" for r in backlog(db)[0])
    scores = {**current(dbs[0]), **current(dbs[1])}
    all_spans = spans(phoenix, project)
    evaluators = [s for s in all_spans if s["span_kind"] == "EVALUATOR"]
    assert len({s["context"]["span_id"] for s in evaluators}) == 4  # none lost to a shared id
    assert phoenix.get("/v1/projects/default/spans?limit=1000")["data"] == []  # none moved away
    roots = [r["root_span_id"] for r in scores.values()]
    assert matches(
        annotations(phoenix, project, "span", roots), scores, "span_id", lambda r: r["root_span_id"]
    )
    assert matches(
        annotations(phoenix, project, "trace", [r["trace_id"] for r in scores.values()]),
        scores,
        "trace_id",
        lambda r: r["trace_id"],
    )

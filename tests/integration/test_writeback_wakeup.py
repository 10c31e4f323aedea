"""The write-back is woken by the pipeline: an evaluation reaches the OTLP sink right after the
scoring round that wrote it, not at the export worker's next poll.

The poll interval is set to a minute, so without the wake-up the sink would get nothing within
the test's deadline (the worker's first pass runs at start, before anything was scored, and it
then sleeps for the whole interval).
"""

from __future__ import annotations

import time

import pytest

from tests.collector.export.sink import GrpcSink, attrs
from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, otlp_provider, wait_scored
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.export.extension import export_extension
from toolscore.collector.export.settings import resolve_export_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.storage.expectations.repository import ExpectationData

POLL_S = 60.0
# Generous for a small, busy machine, and still far below POLL_S.
DEADLINE_S = 10.0
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}


def _sent_to_sink(sink: GrpcSink, conv_id: str) -> int:
    spans = [
        s
        for _r, _s, s in sink.received.spans()
        if attrs(s.attributes)["toolscore.conversation.id"] == conv_id
    ]
    logs = [
        r
        for _r, _s, r in sink.received.log_records()
        if attrs(r.attributes)["toolscore.conversation.id"] == conv_id
    ]
    return min(len(spans), len(logs))


@pytest.mark.parametrize("separate_process", [False, True], ids=["in-process", "child-process"])
def test_evaluations_reach_the_sink_long_before_the_poll_interval(
    sqlite_url: str, separate_process: bool
) -> None:
    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    sink = GrpcSink().start()
    try:
        export = resolve_export_settings(
            endpoint=sink.endpoint,
            protocol="grpc",
            timeout_s=5.0,
            environ={},
            poll_interval_s=POLL_S,
        )
        assert export is not None
        pipeline = pipeline_extension(
            PipelineOptions(settle_s=0.5, root_idle_s=0.2, separate_process=separate_process)
        )
        with RunningServer(
            server_settings(sqlite_url), [pipeline, export_extension(export)]
        ) as srv:
            provider = otlp_provider(srv, grpc=True)
            # Two conversations one after the other: the second one is scored while the worker
            # sleeps in its poll after having exported the first.
            for conv_id in ("wake-1", "wake-2"):
                genai_agent_trace(
                    provider.get_tracer("app"),
                    conv_id,
                    [WEATHER],
                    "weather?",
                    {"toolscore.reference.id": "w"},
                )
                provider.force_flush()
                wait_scored(sqlite_url, [conv_id])
                scored_at = time.monotonic()
                while _sent_to_sink(sink, conv_id) < 2:  # 2 metrics: accuracy and F1
                    assert time.monotonic() - scored_at < DEADLINE_S, (
                        f"{conv_id}: evaluations not exported {DEADLINE_S}s after scoring "
                        f"(poll interval {POLL_S}s): the export worker was not woken"
                    )
                    time.sleep(0.02)
            provider.shutdown()
    finally:
        sink.stop()

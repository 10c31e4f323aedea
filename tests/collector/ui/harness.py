"""A real ``serve`` (pipeline + web UI on ephemeral ports) fed by the OTel SDK's OTLP exporter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, otlp_provider, wait_scored
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.settings import Listen
from toolscore.collector.ui.extension import ui_extension
from toolscore.collector.ui.server import UiServer
from toolscore.storage.expectations.repository import ExpectationData


@dataclass
class Running:
    srv: RunningServer
    ui: UiServer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ui.port}"


@contextlib.contextmanager
def running_ui(db_url: str, **settings: Any) -> Iterator[Running]:
    found: list[UiServer] = []
    options = PipelineOptions(settle_s=0.5, root_idle_s=0.2)
    extensions = [
        pipeline_extension(options),
        ui_extension(Listen("127.0.0.1", 0), found.append),
    ]
    with RunningServer(server_settings(db_url, **settings), extensions) as srv:
        yield Running(srv, found[0])


def send(
    running: Running,
    conversations: Mapping[str, tuple[str, Sequence[Mapping[str, Any]]]],
) -> None:
    """``{conversation id: (first user message, calls)}`` as GenAI agent traces over OTLP."""
    provider = otlp_provider(running.srv)
    tracer = provider.get_tracer("ui-test")
    for cid, (question, calls) in conversations.items():
        genai_agent_trace(tracer, cid, calls, question=question)
    provider.force_flush()
    provider.shutdown()


def expect(db_url: str, eid: str, conversation_ids: Sequence[str], calls: list[Any]) -> None:
    import_refs(
        db_url,
        ExpectationData(
            id=eid,
            reference_tool_calls=calls,
            match={"conversation_id": list(conversation_ids)},
        ),
    )


__all__ = ["Running", "expect", "running_ui", "send", "wait_scored"]

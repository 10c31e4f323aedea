"""Test harness: a real ``toolscore serve`` app on ephemeral ports, run in a background thread
(its own event loop) so that synchronous OTel SDK exporters can call it from the test thread."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import func, select

from toolscore.collector.app import App
from toolscore.collector.components import ExtensionFactory
from toolscore.collector.settings import Listen, Settings
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import log_records_table, spans_table


class RunningServer:
    """``with RunningServer(settings) as srv:`` -> ``srv.grpc_port``, ``srv.http_url`` ..."""

    def __init__(self, settings: Settings, extensions: Sequence[ExtensionFactory] = ()) -> None:
        self.settings = settings
        self.app = App(settings, extensions)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            await self.app.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            await self.app.stop()
            return
        self._ready.set()
        await self._stop.wait()
        await self.app.stop()

    def __enter__(self) -> RunningServer:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._thread.is_alive():
            assert self._stop is not None
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)

    @property
    def grpc_port(self) -> int:
        assert self.app.grpc_port is not None
        return self.app.grpc_port

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        scheme = "https" if self.settings.tls else "http"
        return f"{scheme}://127.0.0.1:{self.app.http_port}"


def server_settings(db_url: str, **overrides: Any) -> Settings:
    base = Settings(
        db_url=db_url,
        grpc=Listen("127.0.0.1", 0),
        http=Listen("127.0.0.1", 0),
        shutdown_grace_s=5.0,
    )
    return dataclasses.replace(base, **overrides)


def count_rows(db_url: str, table: Any = spans_table) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar_one())
    finally:
        engine.dispose()


def count_logs(db_url: str) -> int:
    return count_rows(db_url, log_records_table)


def agent_spans(
    tools: int = 6, content: str = "What is the weather in Paris?"
) -> list[ReadableSpan]:
    """One agent trace made by the real OTel SDK: an agent span, a chat span, tool spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test.agent", "1.0")
    with tracer.start_as_current_span(
        "invoke_agent weather", attributes={"gen_ai.conversation.id": "conv-1"}
    ):
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={"gen_ai.input.messages": content, "gen_ai.usage.input_tokens": 42},
        ):
            pass
        for i in range(tools - 2):
            with tracer.start_as_current_span(
                "execute_tool get_weather",
                attributes={
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.arguments": f'{{"city": "Paris", "i": {i}}}',
                    "score": 0.5,
                    "ok": True,
                    "tags": ("a", "b"),
                },
            ):
                pass
    provider.shutdown()
    return list(exporter.get_finished_spans())

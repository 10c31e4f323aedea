"""Plugs the write-back into ``serve``: the thresholds writer and the outbox worker components."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter

from toolscore.collector.components import AppContext, Component, Extension, ExtensionFactory
from toolscore.collector.export.otlp import EvaluationEmitter, create_exporters
from toolscore.collector.export.settings import ExportSettings
from toolscore.collector.export.worker import ExportWorker, PassResult, ThresholdWriter
from toolscore.storage.database import Engine


def export_extension(
    settings: ExportSettings | None,
    thresholds: Mapping[str, float] | None = None,
    version: str | None = None,
) -> ExtensionFactory:
    def build(ctx: AppContext) -> Extension:
        components: list[Component] = []
        if thresholds:  # stored first, so the first export pass already labels with them
            components.append(ThresholdWriter(ctx.engine, thresholds))
        if settings is None:  # said on the start-up line: "write-back off"
            return Extension(components=components)
        on = "write-back on: " + ", ".join(
            f"{signal} to {settings.endpoint_of(signal)} ({settings.protocol_of(signal)})"
            for signal in settings.signals
        )
        counter = Counter(
            "toolscore_export_evaluations",
            "Evaluations written back over OTLP, by result (exported, failed attempts).",
            ["result"],
            registry=ctx.metrics.registry,
        )

        skipped = Counter(
            "toolscore_export_skipped",
            "Evaluations not sent on a signal because the target does not implement it "
            "(e.g. Phoenix and OTLP logs), by signal.",
            ["signal"],
            registry=ctx.metrics.registry,
        )
        for signal in settings.signals:
            skipped.labels(signal)

        def observe(result: PassResult) -> None:
            counter.labels("exported").inc(result.exported)
            counter.labels("failed").inc(result.failed)
            for signal, count in result.skipped.items():
                skipped.labels(signal).inc(count)

        worker = build_export_worker(ctx.engine, settings, version=version or _version())
        worker.on_pass = observe
        ctx.evaluations_written.subscribe(worker.notify)  # woken by the pipeline, not the timer
        components.append(worker)
        return Extension(components=components, summary={"write-back": on})

    return build


def build_export_worker(
    engine: Engine, settings: ExportSettings, *, version: str = "0"
) -> ExportWorker:
    """An :class:`ExportWorker` sending through the SDK's OTLP exporters per ``settings``."""
    span_exporter, log_exporter = create_exporters(settings)
    emitter = EvaluationEmitter(
        span_exporter, log_exporter, version=version, thresholds=settings.thresholds
    )
    return ExportWorker(engine, emitter, settings)


def _version() -> str:
    """toolscore's version, for the ``service.version`` and scope version of what we emit."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolscore")
    except PackageNotFoundError:  # running from a source tree that was not installed
        return "0"

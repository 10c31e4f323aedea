"""Plugs the write-back into ``serve``: the thresholds writer and the outbox worker components."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client import Counter, Gauge

from toolscore.collector.components import AppContext, Component, Extension, ExtensionFactory
from toolscore.collector.export.annotations.langfuse import LangfuseClient
from toolscore.collector.export.annotations.phoenix import PhoenixClient
from toolscore.collector.export.annotations.targets import AnnotationTarget
from toolscore.collector.export.annotations.worker import RESULTS, AnnotationWorker
from toolscore.collector.export.otlp import EvaluationEmitter, create_exporters
from toolscore.collector.export.settings import ExportSettings
from toolscore.collector.export.worker import ExportWorker, PassResult, ThresholdWriter
from toolscore.storage.database import Engine


def export_extension(
    settings: ExportSettings | None,
    thresholds: Mapping[str, float] | None = None,
    version: str | None = None,
    *,
    annotate: Sequence[AnnotationTarget] = (),
) -> ExtensionFactory:
    def build(ctx: AppContext) -> Extension:
        components: list[Component] = []
        if thresholds:  # stored first, so the first export pass already labels with them
            components.append(ThresholdWriter(ctx.engine, thresholds))
        annotations = ""
        if annotate:
            components += annotation_workers(ctx, annotate)
            annotations = "annotations to " + ", ".join(t.key for t in annotate)
        if settings is None:  # said on the start-up line: "write-back off"
            summary = {"write-back": f"write-back on: {annotations}"} if annotations else {}
            return Extension(components=components, summary=summary)
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
        on += f", {annotations}" if annotations else ""
        return Extension(components=components, summary={"write-back": on})

    return build


def annotation_workers(
    ctx: AppContext, targets: Sequence[AnnotationTarget]
) -> list[AnnotationWorker]:
    """A worker per ``--annotate`` target, counted in /metrics by target and result."""
    results = Counter(
        "toolscore_annotations",
        "Evaluations sent to an annotation target (--annotate), by target and result: "
        "delivered, superseded (a newer revision went instead), skipped (the backend cannot "
        "hold it), not_ingested_yet and failed (retried), not_found (given up), rejected.",
        ["target", "result"],
        registry=ctx.metrics.registry,
    )
    backlog = Gauge(
        "toolscore_annotation_backlog",
        "Evaluations waiting to be sent to an annotation target, by target.",
        ["target"],
        registry=ctx.metrics.registry,
    )
    workers = []
    for target in targets:
        for result in RESULTS:
            results.labels(target.key, result)
        client = PhoenixClient(target) if target.kind == "phoenix" else LangfuseClient(target)

        def observe(counts: Mapping[str, int], pending: int, key: str = target.key) -> None:
            for result, count in counts.items():
                results.labels(key, result).inc(count)
            backlog.labels(key).set(pending)

        worker = AnnotationWorker(ctx.engine, target, client, on_pass=observe)
        ctx.evaluations_written.subscribe(worker.notify)
        workers.append(worker)
    return workers


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

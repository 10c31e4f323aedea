"""Plugs the pipeline into ``serve``: the ingest hook, the worker component and its metrics."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter, Histogram

from toolscore.collector.components import AppContext, Extension, ExtensionFactory
from toolscore.collector.pipeline.assign import AssignConfig
from toolscore.collector.pipeline.child import ScoringProcess
from toolscore.collector.pipeline.claim import DEFAULT_BIG_SPANS, SizeLimits, Timing
from toolscore.collector.pipeline.hook import ConversationHook
from toolscore.collector.pipeline.options import PipelineOptions, available_cores, processes_for
from toolscore.collector.pipeline.pacing import ScoringLagGate
from toolscore.collector.pipeline.worker import PipelineWorker
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    DEFAULT_REFERENCE_KEY,
)
from toolscore.scorer import ScoringConfig, default_config
from toolscore.storage.conversations.tables import STATUS_UNMATCHED
from toolscore.storage.plumbing.dialect import backend_name, scoring_round_size


class PipelineMetrics:
    """``/metrics`` counters of the pipeline, registered on the app's registry."""

    def __init__(self, registry: object) -> None:
        self.conversations = Counter(
            "toolscore_pipeline_conversations",
            "Conversation scorings by outcome (scored, unmatched, error).",
            ["status"],
            registry=registry,  # type: ignore[arg-type]
        )
        self.latency = Histogram(
            "toolscore_pipeline_scoring_latency_seconds",
            "Time from a conversation's last span to its evaluation rows.",
            buckets=(0.5, 1, 2, 3, 5, 7, 10, 15, 30, 60, 120),
            registry=registry,  # type: ignore[arg-type]
        )

    def observe(self, statuses: Sequence[str], latencies: Sequence[float]) -> None:
        for status in statuses:
            self.conversations.labels(status).inc()
        for seconds in latencies:
            self.latency.observe(seconds)


def pipeline_extension(options: PipelineOptions) -> ExtensionFactory:
    def build(ctx: AppContext) -> Extension:
        if not options.enabled:
            return Extension()
        config: ScoringConfig = ctx.scoring_config or default_config()
        timing = Timing(settle_s=options.settle_s, idle_s=options.root_idle_s)
        limits = SizeLimits(
            big_spans=min(DEFAULT_BIG_SPANS, options.max_conversation_spans),
            max_spans=options.max_conversation_spans,
        )
        metrics = PipelineMetrics(ctx.metrics.registry)
        process = None
        if options.separate_process:
            process = ScoringProcess(
                ctx.settings.db_url,
                ctx.settings.config_path,
                options.control_calls,
                log_level=ctx.settings.log_level,
                log_format=ctx.settings.log_format,
                autocheckpoint=not ctx.server_checkpoints,
            )
        written = ctx.evaluations_written

        def observe(statuses: Sequence[str], latencies: Sequence[float]) -> None:
            # Runs after the round committed, in the worker's thread (or on the event loop when
            # scoring in a child process). Unmatched conversations write no evaluation rows.
            metrics.observe(statuses, latencies)
            if any(status != STATUS_UNMATCHED for status in statuses):
                written.emit()

        backend = backend_name(ctx.settings.db_url)
        processes = processes_for(options, available_cores())
        round_size = scoring_round_size(backend)
        gate = ScoringLagGate(
            ctx.metrics.registry,
            behind_s=options.backpressure_lag_s,
            max_hold_s=options.backpressure_max_hold_s,
        )
        # Several workers claim disjoint conversations from the database, each with its own id.
        workers = [
            PipelineWorker(
                ctx.engine,
                config,
                timing=timing,
                batch_size=round_size,
                observer=observe,
                process=process,
                control_calls=options.control_calls,
                limits=limits,
                on_round=gate.report,
            )
            for _ in range(processes if process is not None else 1)
        ]

        def notify(due_ns: int) -> None:
            for worker in workers:
                worker.notify(due_ns)

        assign = AssignConfig(
            conversation_keys=options.conversation_keys or DEFAULT_CONVERSATION_KEYS,
            reference_key=options.reference_key or DEFAULT_REFERENCE_KEY,
            replay_window_s=options.replay_window_s,
        )
        hook = ConversationHook(assign, timing, notify=notify)
        keys = (*assign.conversation_keys, assign.reference_key)
        where = (
            f"scoring in {len(workers)} process{'es' if len(workers) > 1 else ''}"
            if process is not None
            else "scoring in the server process"
        )
        return Extension(
            hooks=[hook],
            components=workers,
            key_attributes=keys,
            summary={"scoring": where},
            ack_gates=[gate] if options.backpressure_lag_s > 0 else [],
        )

    return build

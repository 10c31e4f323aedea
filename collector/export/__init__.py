"""Write-back of evaluations to the user's OpenTelemetry pipeline (OTLP spans and log events).

Public API: :func:`resolve_export_settings`, :class:`ExportSettings`, :func:`create_exporters`,
:class:`EvaluationEmitter`, :class:`ExportWorker` (async component), :func:`export_pass`,
:func:`build_export_worker`, and :func:`is_toolscore_evaluation` for the receiver's loop filter.
"""

from __future__ import annotations

from sqlalchemy import Engine

from collector.export.attributes import DEFAULT_PASS_THRESHOLD, is_toolscore_evaluation
from collector.export.otlp import EvaluationEmitter, create_exporters
from collector.export.settings import (
    ExportConfigError,
    ExportSettings,
    parse_thresholds,
    resolve_export_settings,
)
from collector.export.worker import ExportWorker, PassResult, export_pass


def build_export_worker(
    engine: Engine, settings: ExportSettings, *, version: str = "0"
) -> ExportWorker:
    """An :class:`ExportWorker` sending through the SDK's OTLP exporters per ``settings``."""
    span_exporter, log_exporter = create_exporters(settings)
    emitter = EvaluationEmitter(
        span_exporter, log_exporter, version=version, thresholds=settings.thresholds
    )
    return ExportWorker(engine, emitter, settings)


__all__ = [
    "DEFAULT_PASS_THRESHOLD",
    "EvaluationEmitter",
    "ExportConfigError",
    "ExportSettings",
    "ExportWorker",
    "PassResult",
    "build_export_worker",
    "create_exporters",
    "export_pass",
    "is_toolscore_evaluation",
    "parse_thresholds",
    "resolve_export_settings",
]

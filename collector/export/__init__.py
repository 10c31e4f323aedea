"""Write-back of evaluations to the user's OpenTelemetry pipeline (OTLP spans and log events).

Kept light on purpose (the CLI and the ingest path import it): the modules are

- ``attributes``: attribute names, pass/fail label, explanation text, and the loop-back
  predicates :func:`is_toolscore_evaluation` / ``is_toolscore_evaluation_log``;
- ``settings``: ``settings.resolve_export_settings`` (flags + environment);
- ``options``: the ``serve`` flags (``--export-endpoint``, ``--pass-threshold``, ...);
- ``otlp``: ``EvaluationEmitter`` (SDK spans and log records, exported with the OTLP exporters);
- ``worker``: ``export_pass`` and the ``ExportWorker`` component (the outbox loop);
- ``extension``: ``export_extension`` plugging the worker into ``serve``.
"""

from __future__ import annotations

from toolscore.collector.export.attributes import (
    DEFAULT_PASS_THRESHOLD,
    is_toolscore_evaluation,
    is_toolscore_evaluation_log,
)

__all__ = ["DEFAULT_PASS_THRESHOLD", "is_toolscore_evaluation", "is_toolscore_evaluation_log"]

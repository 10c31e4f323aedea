"""Everything ``toolscore serve`` is configured with: every part's options, read once.

``serve_options()`` lists every ``serve`` flag (the parser, docs/configuration.md and
``tests/collector/test_configuration.py`` are checked against it); ``load_serve_config``
resolves them (flags > environment > defaults) into the frozen :class:`ServeConfig` that is
passed down. Adding a flag: docs/architecture.md, "Configuration".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolscore.collector.configuration import Option
from toolscore.collector.settings import OPTIONS, Settings

if TYPE_CHECKING:
    from toolscore.collector.export.settings import ExportSettings
    from toolscore.collector.pipeline.options import PipelineOptions
    from toolscore.collector.upkeep.retention_runner import RetentionOptions


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """Everything ``toolscore serve`` was configured with, read and checked once at start-up."""

    settings: Settings
    pipeline: PipelineOptions
    export: ExportSettings | None  # None: no write-back
    thresholds: Mapping[str, float]  # --pass-threshold
    retention: RetentionOptions  # --span-retention


def load_serve_config(args: argparse.Namespace | None, environ: Mapping[str, str]) -> ServeConfig:
    """Every ``serve`` option (flags > ``environ`` > defaults); raises ConfigError."""
    from toolscore.collector.export.options import settings_from
    from toolscore.collector.pipeline.options import options_from
    from toolscore.collector.upkeep.retention_runner import options_from as retention_from

    settings = Settings.from_args(args, environ)
    pipeline = options_from(args, environ)
    export, thresholds = settings_from(args, environ)
    return ServeConfig(settings, pipeline, export, thresholds, retention_from(args, environ))


def serve_options() -> tuple[Option, ...]:
    """Every ``serve`` option, in ``--help`` order."""
    from toolscore.collector.export.settings import OPTIONS as EXPORT
    from toolscore.collector.pipeline.options import OPTIONS as PIPELINE
    from toolscore.collector.upkeep.retention_runner import OPTIONS as RETENTION

    return OPTIONS + PIPELINE + EXPORT + RETENTION

"""Everything ``toolscore serve`` is configured with: every part's options, read once.

``serve_options()`` lists every ``serve`` flag (the parser, docs/configuration.md and
``tests/collector/test_configuration.py`` are checked against it); ``load_serve_config``
resolves them (flags > environment > the ``serve:`` section of the ``--config`` file >
defaults) into the frozen :class:`ServeConfig` that is passed down. Adding a flag:
docs/architecture.md, "Configuration".
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolscore.collector.configuration import FileSection, Option, read_section, resolve_one
from toolscore.collector.settings import CONFIG, OPTIONS, Listen, Settings

SECTION = "serve"  # the configuration file's section of server options

if TYPE_CHECKING:
    from toolscore.collector.export.annotations.targets import AnnotationTarget
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
    ui: Listen | None = None  # --ui (None: no web UI)
    annotate: tuple[AnnotationTarget, ...] = ()  # --annotate


def load_serve_config(args: argparse.Namespace | None, environ: Mapping[str, str]) -> ServeConfig:
    """Every ``serve`` option (flags > ``environ`` > file > defaults); raises ConfigError."""
    from toolscore.collector.export.options import annotation_targets_from, settings_from
    from toolscore.collector.pipeline.options import options_from
    from toolscore.collector.ui.options import ui_listen
    from toolscore.collector.upkeep.retention_runner import options_from as retention_from

    file = serve_section(args, environ)
    settings = Settings.from_args(args, environ, file)
    pipeline = options_from(args, environ, file)
    export, thresholds = settings_from(args, environ, file)
    retention = retention_from(args, environ, file)
    ui = ui_listen(args, environ, file)
    annotate = annotation_targets_from(args, environ, file)
    return ServeConfig(settings, pipeline, export, thresholds, retention, ui, annotate)


def serve_section(
    args: argparse.Namespace | None, environ: Mapping[str, str]
) -> FileSection | None:
    """The ``serve:`` section of the file named by ``--config`` / ``TOOLSCORE_CONFIG`` (which
    the file itself cannot set), read once; None without a file."""
    path = resolve_one(CONFIG, args, environ)
    if path is None:
        return None
    if not path.is_file():
        raise CONFIG.error(f"no such file {path}")
    return read_section(path, SECTION, (o for o in serve_options() if o is not CONFIG))


def serve_options() -> tuple[Option, ...]:
    """Every ``serve`` option, in ``--help`` order."""
    from toolscore.collector.export.settings import OPTIONS as EXPORT
    from toolscore.collector.pipeline.options import OPTIONS as PIPELINE
    from toolscore.collector.ui.options import OPTIONS as UI
    from toolscore.collector.upkeep.retention_runner import OPTIONS as RETENTION

    return OPTIONS + PIPELINE + EXPORT + RETENTION + UI

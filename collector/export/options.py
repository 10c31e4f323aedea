"""The ``serve`` flags of the write-back, resolved once at start-up (light: no SDK import).

The flags and their variables are declared in :data:`toolscore.collector.export.settings.OPTIONS`;
the standard ``OTEL_EXPORTER_OTLP_*`` variables refine them (docs/writeback.md). Without an
endpoint, nothing is exported.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import replace

from toolscore.collector.configuration import FileSection, add_options, resolve
from toolscore.collector.export.annotations.targets import (
    ANNOTATE,
    AnnotationTarget,
    annotation_targets,
)
from toolscore.collector.export.settings import (
    LOGS_ENDPOINT,
    NO_EXPORT,
    OPTIONS,
    TRACES_ENDPOINT,
    ExportSettings,
    resolve_export_settings,
)

OWN_ONLY = (TRACES_ENDPOINT, LOGS_ENDPOINT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def settings_from(
    args: argparse.Namespace | None, environ: Mapping[str, str], file: FileSection | None = None
) -> tuple[ExportSettings | None, dict[str, float]]:
    """The write-back settings (``None`` when it is off) and the ``--pass-threshold`` values.

    Raises ``ConfigError`` naming the bad flag and variable.
    """
    # the per-signal endpoints as toolscore's own settings only: their OTEL_ variables (which
    # agents sharing the environment may set) refine a write-back, never turn one on
    own = tuple(replace(o, more_env=()) if o in OWN_ONLY else o for o in OPTIONS)
    values = resolve(own, args, environ, file)
    thresholds = dict(values.pop("thresholds") or ())
    values.pop("annotate")  # annotation_targets_from
    if values.pop("disabled"):
        return None, thresholds
    headers = values.pop("headers") or ()
    settings = resolve_export_settings(
        **values, headers=headers, thresholds=thresholds, environ=environ
    )
    return settings, thresholds


def annotation_targets_from(
    args: argparse.Namespace | None, environ: Mapping[str, str], file: FileSection | None = None
) -> tuple[AnnotationTarget, ...]:
    """The ``--annotate`` targets with their credentials (none with ``--no-export``)."""
    values = resolve((ANNOTATE, NO_EXPORT), args, environ, file)
    if values["disabled"]:
        return ()
    return annotation_targets(values["annotate"] or (), environ)

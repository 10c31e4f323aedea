"""The ``serve`` flags of the write-back, resolved once at start-up (light: no SDK import).

Configuration comes from the flags and the environment passed down by ``serve`` (standard
``OTEL_EXPORTER_OTLP_*`` variables). Without an endpoint, nothing is exported.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from toolscore.collector.export.settings import (
    COMPRESSIONS,
    ENV_HEADERS_FILE,
    PROTOCOLS,
    ExportSettings,
    parse_thresholds,
    resolve_export_settings,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--export-endpoint",
        metavar="URL",
        help="write evaluations back as OTLP spans and gen_ai.evaluation.result events to this "
        "collector/backend, e.g. http://localhost:4317 (env TOOLSCORE_EXPORT_ENDPOINT; "
        "default: no write-back; the OTEL_EXPORTER_OTLP_* variables then refine it)",
    )
    add(
        "--export-protocol",
        choices=PROTOCOLS,
        help="OTLP protocol of the write-back (env OTEL_EXPORTER_OTLP_PROTOCOL; default grpc)",
    )
    add(
        "--export-header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="header sent with every export, e.g. authorization=Bearer%%20T; repeatable "
        "(env OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS / _LOGS_HEADERS; "
        "flags show in ps: prefer --export-headers-file for secrets)",
    )
    add(
        "--export-headers-file",
        metavar="PATH",
        help="export headers from a file of key=value lines (values literal, # comments); "
        "flags win over it per key, it wins over the environment "
        f"(env {ENV_HEADERS_FILE})",
    )
    add(
        "--export-compression",
        choices=COMPRESSIONS,
        help="(env OTEL_EXPORTER_OTLP_COMPRESSION; default none)",
    )
    add(
        "--export-timeout",
        type=float,
        metavar="SECONDS",
        help="per export call, SDK retries included (env OTEL_EXPORTER_OTLP_TIMEOUT in ms; 10)",
    )
    add(
        "--pass-threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="score at or above which METRIC (instance name or type) passes; stored in the "
        "database for the views and reports; repeatable (default 1.0)",
    )
    add("--no-export", action="store_true", help="disable the write-back even if configured")


def settings_from(
    args: argparse.Namespace, environ: Mapping[str, str]
) -> tuple[ExportSettings | None, dict[str, float]]:
    """The write-back settings (``None`` when it is off) and the ``--pass-threshold`` values.

    Raises ``ExportConfigError`` naming the bad flag or variable.
    """
    thresholds = parse_thresholds(getattr(args, "pass_threshold", None) or [])
    if getattr(args, "no_export", False):
        return None, thresholds
    settings = resolve_export_settings(
        endpoint=getattr(args, "export_endpoint", None),
        protocol=getattr(args, "export_protocol", None),
        headers=getattr(args, "export_header", None) or (),
        headers_file=getattr(args, "export_headers_file", None),
        compression=getattr(args, "export_compression", None),
        timeout_s=getattr(args, "export_timeout", None),
        thresholds=thresholds,
        environ=environ,
    )
    return settings, thresholds

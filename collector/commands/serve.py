"""``toolscore serve``: the OTLP receiver (gRPC + HTTP) with durable storage.

To plug in another part of the service: declare its flags as ``Option``s (see
:mod:`toolscore.collector.configuration`), add them to ``serve_options`` and its resolved,
frozen settings to ``ServeConfig`` (:mod:`toolscore.collector.serve_config`), and its extension
factory to :func:`extensions` (see :mod:`toolscore.collector.app`).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from toolscore.collector.configuration import add_options
from toolscore.collector.serve_config import ServeConfig, load_serve_config, serve_options

if TYPE_CHECKING:
    from toolscore.collector.components import ExtensionFactory


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="receive OTLP traces and logs (gRPC and HTTP) and store them",
        description="Receive OTLP traces and logs over gRPC and HTTP and store them durably. "
        "Every flag has an environment variable; flags win over variables, which win over "
        "the defaults (docs/configuration.md).",
    )
    add_options(parser, serve_options())
    parser.set_defaults(handler=handle)


def extensions(config: ServeConfig) -> list[ExtensionFactory]:
    """The parts plugged into the receiver (pipeline worker, exporters, ...)."""
    from toolscore.collector.export.extension import export_extension
    from toolscore.collector.pipeline.extension import pipeline_extension
    from toolscore.collector.ui.extension import ui_extension
    from toolscore.collector.upkeep.retention_runner import retention_extension
    from toolscore.collector.upkeep.status import status_extension

    return [
        pipeline_extension(config.pipeline),
        export_extension(config.export, dict(config.thresholds), annotate=config.annotate),
        retention_extension(config.retention),
        status_extension(log_every_s=config.settings.log_interval_s),
        ui_extension(config.ui),
    ]


def handle(args: argparse.Namespace) -> int:
    """Read and check every setting, then serve; errors become exit statuses in cli.py."""
    import asyncio
    import logging

    from toolscore.collector.app import StartupError, serve
    from toolscore.collector.logformat import configure as configure_logging

    config = load_serve_config(args, os.environ)
    configure_logging(config.settings.log_level, config.settings.log_format)
    try:
        asyncio.run(serve(config.settings, extensions(config)))
    except StartupError as exc:
        if config.settings.log_format != "json":
            raise  # cli.run prints it and exits 1
        # a shipper reads every line as JSON
        logging.getLogger("toolscore.serve").error("toolscore serve: %s", exc)
        return exc.status
    return 0

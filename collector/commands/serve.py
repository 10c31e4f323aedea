"""``toolscore serve``: the OTLP receiver (gRPC + HTTP) with durable storage.

To plug in another part of the service: declare its flags as ``Option``s (see
:mod:`toolscore.collector.configuration`), add them to ``serve_options`` and its resolved,
frozen settings to ``ServeConfig`` (:mod:`toolscore.collector.settings`), and its extension
factory to :func:`extensions` (see :mod:`toolscore.collector.app`).
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from toolscore.collector.configuration import add_options
from toolscore.collector.settings import ServeConfig, load_serve_config, serve_options

if TYPE_CHECKING:
    from toolscore.collector.app import ExtensionFactory


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
    from toolscore.collector.status import status_extension

    return [
        pipeline_extension(config.pipeline),
        export_extension(config.export, dict(config.thresholds)),
        status_extension(log_every_s=config.settings.log_interval_s),
    ]


def handle(args: argparse.Namespace) -> int:
    """Read and check every setting, then serve; errors become exit statuses in cli.py."""
    import asyncio
    import logging

    from toolscore.collector.app import serve

    config = load_serve_config(args, os.environ)
    logging.basicConfig(
        level=config.settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per migration is noise
    asyncio.run(serve(config.settings, extensions(config)))
    return 0

"""``toolscore serve``: the OTLP receiver (gRPC + HTTP) with durable storage.

To plug in another part of the service: add its flags in :func:`register` and its extension
factory in :func:`extensions` (see :mod:`toolscore.collector.app`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolscore.collector.commands.common import add_db_argument

if TYPE_CHECKING:
    from toolscore.collector.app import ExtensionFactory
    from toolscore.collector.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="receive OTLP traces and logs (gRPC and HTTP) and store them",
        description="Receive OTLP traces and logs over gRPC and HTTP and store them durably.",
    )
    add_db_argument(parser)
    add = parser.add_argument
    add(
        "--grpc",
        metavar="HOST:PORT",
        help="OTLP/gRPC listener, or 'off' "
        "(env TOOLSCORE_GRPC; default 127.0.0.1:4317; port 0 picks a free port)",
    )
    add(
        "--http",
        metavar="HOST:PORT",
        help="OTLP/HTTP listener, or 'off' (env TOOLSCORE_HTTP; default 127.0.0.1:4318)",
    )
    add("--config", metavar="FILE", help="scoring configuration file (env TOOLSCORE_CONFIG)")
    add(
        "--no-upgrade",
        action="store_true",
        help="do not migrate the database at start (env TOOLSCORE_UPGRADE=0)",
    )
    add(
        "--tls-cert",
        metavar="FILE",
        help="TLS certificate (PEM) for both listeners (env TOOLSCORE_TLS_CERT; needs --tls-key)",
    )
    add("--tls-key", metavar="FILE", help="TLS private key (PEM) (env TOOLSCORE_TLS_KEY)")
    add(
        "--auth-token",
        metavar="TOKEN",
        help="require 'Authorization: Bearer TOKEN' on every "
        "export and /metrics request (env TOOLSCORE_AUTH_TOKEN, preferred: flags show in ps)",
    )
    add(
        "--max-request-bytes",
        type=int,
        metavar="N",
        help="largest request body after "
        "decompression (env TOOLSCORE_MAX_REQUEST_BYTES; default 64 MiB)",
    )
    add(
        "--max-attribute-bytes",
        type=int,
        metavar="N",
        help="longer string/bytes attribute "
        "values are truncated (env TOOLSCORE_MAX_ATTRIBUTE_BYTES; default 65536)",
    )
    add(
        "--max-queued-spans",
        type=int,
        metavar="N",
        help="spans and log records waiting to be "
        "stored before clients are told to retry (env TOOLSCORE_MAX_QUEUED_SPANS; default 100000)",
    )
    add(
        "--max-batch-spans",
        type=int,
        metavar="N",
        help="most spans per database transaction (env TOOLSCORE_MAX_BATCH_SPANS; default 20000)",
    )
    add(
        "--max-concurrent-requests",
        type=int,
        metavar="N",
        help="export requests handled at once, gRPC and HTTP together; more are told to retry "
        "(env TOOLSCORE_MAX_CONCURRENT_REQUESTS; default 64)",
    )
    add(
        "--retry-after",
        type=float,
        metavar="SECONDS",
        help="retry delay suggested to clients when busy (env TOOLSCORE_RETRY_AFTER; default 1)",
    )
    add(
        "--shutdown-grace",
        type=float,
        metavar="SECONDS",
        help="time in-flight requests get to "
        "finish on shutdown (env TOOLSCORE_SHUTDOWN_GRACE; default 10)",
    )
    add(
        "--log-level",
        metavar="LEVEL",
        help="DEBUG, INFO, WARNING or ERROR (env TOOLSCORE_LOG_LEVEL; default INFO)",
    )
    add(
        "--log-format",
        choices=("text", "json"),
        help="text, or json: one JSON object per line (time, level, logger, message and "
        "structured fields) for log shippers (env TOOLSCORE_LOG_FORMAT; default text)",
    )
    _add_deadline_arguments(parser)
    parser.add_argument(
        "--log-interval",
        type=float,
        metavar="SECONDS",
        help="one INFO line per period with what was received, scored, unmatched and failed, "
        "and the backlog; none when idle (env TOOLSCORE_LOG_INTERVAL; default 60)",
    )
    from toolscore.collector.pipeline.options import add_arguments as add_pipeline_arguments

    add_pipeline_arguments(parser)  # --settle, --root-idle, --conversation-key, ...
    from toolscore.collector.export.options import add_arguments as add_export_arguments

    add_export_arguments(parser)  # --export-endpoint, --export-protocol, --pass-threshold, ...
    parser.set_defaults(handler=handle)


def _add_deadline_arguments(parser: argparse.ArgumentParser) -> None:
    """Deadlines on database calls and the health watchdog (see storage/engine.py)."""
    add = parser.add_argument
    add(
        "--db-connect-timeout",
        type=float,
        metavar="SECONDS",
        help="PostgreSQL: give up a connection attempt after this long (libpq connect_timeout, "
        "whole seconds, at least 2) (env TOOLSCORE_DB_CONNECT_TIMEOUT; default 10)",
    )
    add(
        "--db-statement-timeout",
        type=float,
        metavar="SECONDS",
        help="PostgreSQL: the server cancels a statement running longer (statement_timeout) "
        "(env TOOLSCORE_DB_STATEMENT_TIMEOUT; default 15)",
    )
    add(
        "--db-lock-timeout",
        type=float,
        metavar="SECONDS",
        help="longest wait for a lock: PostgreSQL lock_timeout, SQLite busy timeout "
        "(env TOOLSCORE_DB_LOCK_TIMEOUT; default 10)",
    )
    add(
        "--db-idle-in-transaction-timeout",
        type=float,
        metavar="SECONDS",
        help="PostgreSQL: the server ends a session idle this long inside a transaction, "
        "releasing its locks (env TOOLSCORE_DB_IDLE_IN_TRANSACTION_TIMEOUT; default 60)",
    )
    add(
        "--db-call-deadline",
        type=float,
        metavar="SECONDS",
        help="PostgreSQL: a database call with no reply for this long is abandoned, its "
        "connection shut down and replaced; must exceed --db-statement-timeout "
        "(env TOOLSCORE_DB_CALL_DEADLINE; default 20)",
    )
    add(
        "--health-stuck-after",
        type=float,
        metavar="SECONDS",
        help="/health answers 503 (gRPC health NOT_SERVING) while the ingest writer's database "
        "work or a database probe has run longer than this "
        "(env TOOLSCORE_HEALTH_STUCK_AFTER; default 10)",
    )


def extensions(
    args: argparse.Namespace, environ: Mapping[str, str], settings: Settings
) -> list[ExtensionFactory]:
    """The parts plugged into the receiver (pipeline worker, exporters, ...)."""
    from toolscore.collector.app import StartupError
    from toolscore.collector.pipeline.extension import pipeline_extension
    from toolscore.collector.pipeline.options import PipelineOptionError, options_from

    try:
        pipeline = pipeline_extension(options_from(args, environ))
    except PipelineOptionError as exc:
        raise StartupError(str(exc)) from exc
    from toolscore.collector.export.extension import export_extension
    from toolscore.collector.export.options import settings_from
    from toolscore.collector.export.settings import ExportConfigError

    try:
        write_back = export_extension(*settings_from(args, environ))
    except ExportConfigError as exc:
        raise StartupError(str(exc)) from exc
    from toolscore.collector.status import status_extension

    return [pipeline, write_back, status_extension(log_every_s=settings.log_interval_s)]


def handle(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from toolscore.collector.app import StartupError, serve
    from toolscore.collector.logformat import configure as configure_logging
    from toolscore.collector.settings import Settings, SettingsError

    try:
        settings = Settings.from_args(args, os.environ)
    except SettingsError as exc:
        print(f"toolscore serve: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        asyncio.run(serve(settings, extensions(args, os.environ, settings)))
    except StartupError as exc:
        if settings.log_format == "json":  # a shipper reads every line as JSON
            logging.getLogger("toolscore.serve").error("toolscore serve: %s", exc)
        else:
            print(f"toolscore serve: {exc}", file=sys.stderr)
        return 1
    return 0

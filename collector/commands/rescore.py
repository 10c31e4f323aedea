"""``toolscore rescore [--expectation ID] [--since DATE] [--config FILE] [--resume RUN]``.

Re-scores stored conversations after an expectation or the scoring configuration changed; the
work is :mod:`toolscore.collector.rescoring`'s. Ctrl-C loses at most the chunk in flight and
prints the ``--resume RUN`` that continues the run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import uuid
from collections.abc import Mapping
from typing import IO, Any

from toolscore.collector.commands.common import add_db_argument, resolve_db_url
from toolscore.collector.commands.report import parse_date
from toolscore.collector.configuration import add_options
from toolscore.collector.pipeline.options import (
    CONTROL_CALLS_OPTIONS,
    control_calls_from,
)
from toolscore.collector.rescoring import config_hash, rescore, resolve_config


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rescore",
        help="re-score stored conversations (after an expectation or the scoring config changed)",
    )
    add_db_argument(parser)
    parser.add_argument("--expectation", metavar="ID", help="only conversations of expectation ID")
    parser.add_argument(
        "--since", type=parse_date, metavar="DATE", help="only conversations active since DATE"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="scoring configuration file (env TOOLSCORE_CONFIG; default: the metric instances "
        "the server recorded in the database, else the Ragas defaults)",
    )
    add_options(parser, CONTROL_CALLS_OPTIONS)
    parser.add_argument("--resume", metavar="RUN", help="continue an interrupted run")
    parser.add_argument(
        "--force", action="store_true", help="write a new revision even when nothing changed"
    )
    parser.set_defaults(handler=run)


class ProgressBar:
    """``[#####.....] 12/40`` redrawn in place on a terminal; silent when not a TTY."""

    def __init__(self, stream: IO[str], width: int = 30) -> None:
        self._stream = stream
        self._width = width
        self._on = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self._on:
            return
        filled = self._width * done // total if total else self._width
        bar = "#" * filled + "." * (self._width - filled)
        self._stream.write(f"\rrescoring [{bar}] {done}/{total} conversations")
        if done >= total:
            self._stream.write("\n")
        self._stream.flush()


def run(args: argparse.Namespace) -> int:
    from toolscore.storage import rescore as runs
    from toolscore.storage.database import open_database
    from toolscore.storage.engine import DatabaseUrlError, redact

    control = control_calls_from(args, os.environ)  # a bad value: ConfigError, exit status 2
    url = resolve_db_url(args, os.environ)
    try:
        engine = open_database(url)
    except DatabaseUrlError as exc:
        print(f"toolscore rescore: {exc}", file=sys.stderr)
        return 2

    def recorded() -> Mapping[str, Any]:
        with engine.connect() as conn:
            return runs.recorded_metric_configs(conn)

    try:
        config, source = resolve_config(args.config, os.environ, recorded)
    except Exception as exc:
        engine.dispose()
        print(f"toolscore rescore: scoring configuration: {exc}", file=sys.stderr)
        return 2
    print(f"scoring with {source}", file=sys.stderr)
    digest = config_hash(config)
    try:
        with engine.begin() as conn:
            if args.resume:
                the_run = runs.get_run(conn, args.resume)
                if the_run is None:
                    print(f"toolscore rescore: no run {args.resume!r}", file=sys.stderr)
                    return 2
                if the_run.config_hash != digest:
                    print(
                        f"toolscore rescore: run {the_run.id} used another scoring "
                        "configuration; pass the same --config, or start a new run",
                        file=sys.stderr,
                    )
                    return 2
            else:
                since = dt.datetime.combine(args.since, dt.time(), dt.UTC) if args.since else None
                the_run = runs.Run(
                    id=f"r-{dt.datetime.now(dt.UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}",
                    started_at=dt.datetime.now(dt.UTC),
                    finished_at=None,
                    expectation_id=args.expectation,
                    since=since,
                    config_hash=digest,
                )
                runs.create_run(conn, the_run)
        print(f"rescore run {the_run.id}", file=sys.stderr)
        try:
            summary = rescore(
                engine,
                config,
                the_run,
                force=args.force,
                progress=ProgressBar(sys.stderr),
                control_calls=control,
            )
        except KeyboardInterrupt:
            print(
                f"\ninterrupted; resume with: toolscore rescore --resume {the_run.id}",
                file=sys.stderr,
            )
            return 130
    except Exception as exc:
        print(f"toolscore rescore: {redact(url)}: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    parts = [f"{n} {k}" for k, n in sorted(summary.counts.items())] or ["nothing to do"]
    skipped = f" ({summary.skipped} already done earlier in this run)" if summary.skipped else ""
    print(f"run {summary.run_id}: {summary.total} conversations: {', '.join(parts)}{skipped}")
    return 0

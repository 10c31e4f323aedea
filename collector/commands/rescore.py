"""``toolscore rescore [--expectation ID] [--since DATE] [--config FILE] [--resume RUN]``.

Re-scores stored conversations after an expectation or the scoring configuration changed; the
work is :mod:`toolscore.collector.pipeline.rescoring`'s. Ctrl-C loses at most the chunk in flight
and
prints the ``--resume RUN`` that continues the run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import IO, Any

from toolscore.collector.commands.common import (
    add_db_argument,
    database_errors,
    database_url,
    open_database,
)
from toolscore.collector.commands.report import parse_date
from toolscore.collector.configuration import add_options, resolve_one
from toolscore.collector.errors import UsageError
from toolscore.collector.pipeline.options import CONTROL_CALLS_OPTIONS, control_calls_from
from toolscore.collector.pipeline.rescoring import RunError, rescore, resolve_config, start_run
from toolscore.collector.settings import CONFIG as SERVE_CONFIG


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
    add_options(parser, [CONFIG, *CONTROL_CALLS_OPTIONS])
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


# The scoring configuration is --config, else TOOLSCORE_CONFIG, else what the server recorded.
CONFIG = replace(
    SERVE_CONFIG,
    parse=str,
    shown_default="the metric instances the server recorded in the database, else the Ragas "
    "defaults",
)


def _given(args: argparse.Namespace) -> str:
    """Which of the two names the configuration file came from (for the message)."""
    return CONFIG.flag if args.config else str(CONFIG.variable)


def run(args: argparse.Namespace) -> int:
    from toolscore.storage.history import rescore_runs as runs

    control = control_calls_from(args, os.environ)  # a bad value: ConfigError, exit status 2
    url = database_url(args)
    engine = open_database(args)
    try:

        def recorded() -> Mapping[str, Any]:
            with database_errors(url), engine.connect() as conn:
                return runs.recorded_metric_configs(conn)

        try:
            config, source = resolve_config(
                resolve_one(CONFIG, args, os.environ), _given(args), recorded
            )
        except (OSError, ValueError) as exc:
            raise UsageError(f"scoring configuration: {exc}") from None
        print(f"scoring with {source}", file=sys.stderr)
        with database_errors(url), engine.begin() as conn:
            try:
                the_run = start_run(
                    conn,
                    config,
                    resume=args.resume,
                    expectation_id=args.expectation,
                    since=args.since,
                )
            except RunError as exc:
                raise UsageError(str(exc)) from None
        print(f"rescore run {the_run.id}", file=sys.stderr)
        try:
            with database_errors(url):
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
    finally:
        engine.dispose()
    parts = [f"{n} {k}" for k, n in sorted(summary.counts.items())] or ["nothing to do"]
    skipped = f" ({summary.skipped} already done earlier in this run)" if summary.skipped else ""
    print(f"run {summary.run_id}: {summary.total} conversations: {', '.join(parts)}{skipped}")
    return 0

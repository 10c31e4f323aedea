"""``toolscore report [--since DATE] [--until DATE] [--html FILE]``: the score history."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
from typing import Any

from toolscore.collector.commands.common import (
    add_db_argument,
    database_errors,
    database_url,
    open_database,
)
from toolscore.collector.errors import Failure, UsageError

DEFAULT_DAYS = 30


def parse_date(text: str) -> dt.date:
    """``YYYY-MM-DD`` (or a full ISO timestamp, of which the date is used)."""
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid date {text!r}: expected YYYY-MM-DD") from exc


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="summarise the score history (terminal, and optionally a self-contained HTML file)",
    )
    add_db_argument(parser)
    parser.add_argument(
        "--since",
        type=parse_date,
        metavar="DATE",
        help=f"first UTC day to include (default: {DEFAULT_DAYS} days before --until)",
    )
    parser.add_argument(
        "--until", type=parse_date, metavar="DATE", help="last UTC day to include (default: today)"
    )
    parser.add_argument("--expectation", metavar="ID", help="only this expectation")
    parser.add_argument("--html", metavar="FILE", help="also write an HTML report to FILE")
    parser.add_argument(
        "--worst", type=int, default=10, metavar="N", help="worst conversations to list (10)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from toolscore.collector.views.report import load_report, render_html, render_text

    until: dt.date = args.until or dt.datetime.now(dt.UTC).date()
    since: dt.date = args.since or (until - dt.timedelta(days=DEFAULT_DAYS))
    if since > until:
        raise UsageError(f"--since {since} is after --until {until}")
    url = database_url(args)
    engine = open_database(args)
    doing = "cannot read the history (is the database migrated? run `toolscore db upgrade`)"
    try:
        with database_errors(url, doing), engine.connect() as conn:
            report = load_report(
                conn, since, until, expectation_id=args.expectation, worst_limit=args.worst
            )
    finally:
        engine.dispose()
    width = shutil.get_terminal_size((100, 24)).columns
    sys.stdout.write(render_text(report, width=width))
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(report))
        except OSError as exc:
            raise Failure(f"cannot write {args.html}: {exc}") from None
        print(f"HTML report written to {args.html}", file=sys.stderr)
    return 0

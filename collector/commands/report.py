"""``toolscore report [--since DATE] [--until DATE] [--html FILE]``: the score history."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
from typing import Any

from toolscore.collector.commands.common import add_db_argument, resolve_db_url
from toolscore.collector.safe_text import safe_message

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
    from toolscore.collector.report import load_report, render_html, render_text
    from toolscore.storage.database import open_database
    from toolscore.storage.engine import DatabaseUrlError, redact

    until: dt.date = args.until or dt.datetime.now(dt.UTC).date()
    since: dt.date = args.since or (until - dt.timedelta(days=DEFAULT_DAYS))
    if since > until:
        print(f"toolscore report: --since {since} is after --until {until}", file=sys.stderr)
        return 2
    url = resolve_db_url(args, os.environ)
    try:
        engine = open_database(url, must_exist=True)
    except DatabaseUrlError as exc:
        print(safe_message(f"toolscore report: {exc}"), file=sys.stderr)
        return 2
    try:
        with engine.connect() as conn:
            report = load_report(
                conn, since, until, expectation_id=args.expectation, worst_limit=args.worst
            )
    except Exception as exc:
        print(
            safe_message(f"toolscore report: cannot read the history from {redact(url)}: {exc}")
            + "\n(is the database migrated? run `toolscore db upgrade`)",
            file=sys.stderr,
        )
        return 1
    finally:
        engine.dispose()
    width = shutil.get_terminal_size((100, 24)).columns
    sys.stdout.write(render_text(report, width=width))
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(report))
        except OSError as exc:
            message = f"toolscore report: cannot write {args.html}: {exc}"
            print(safe_message(message), file=sys.stderr)
            return 1
        print(f"HTML report written to {args.html}", file=sys.stderr)
    return 0

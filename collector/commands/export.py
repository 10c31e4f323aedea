"""``toolscore export --format csv|jsonl``: evaluations for notebooks and spreadsheets.

Ids, errors and details are untrusted (span-derived). CSV is for spreadsheets and terminals: a
text cell has its control and bidi characters escaped (``\\x1b``, ``\\n``: one record per line)
and gets a ``'`` prefix when a spreadsheet would run it as a formula (``=HYPERLINK(...)``); the
JSON columns and JSON lines escape those characters as ``\\uXXXX`` and so keep the exact values
(``toolscore.collector.views.safe_text``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterator, Mapping
from typing import IO, Any

from toolscore.collector.commands.common import (
    add_db_argument,
    database_errors,
    database_url,
    open_database,
)
from toolscore.collector.commands.report import parse_date
from toolscore.collector.errors import Failure
from toolscore.collector.views.evaluation_rows import FIELDS, evaluation_rows
from toolscore.collector.views.safe_text import csv_cell, json_safe, safe_message, terminal_safe


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export", help="write evaluations (the score history) as CSV or JSON lines"
    )
    add_db_argument(parser)
    parser.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="(csv)")
    parser.add_argument(
        "--since", type=parse_date, metavar="DATE", help="evaluations created on or after DATE"
    )
    parser.add_argument("--expectation", metavar="ID", help="only this expectation")
    parser.add_argument(
        "--current-only",
        action="store_true",
        help="only each conversation's current scores (not superseded revisions)",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (default: stdout)")
    parser.set_defaults(handler=run)


def write_csv(rows: Iterator[Mapping[str, Any]], out: IO[str]) -> int:
    writer = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    n = 0
    for row in rows:
        flat = {k: csv_cell(terminal_safe(v)) if isinstance(v, str) else v for k, v in row.items()}
        for key in ("metric_config", "details"):
            flat[key] = json_safe(row[key], sort_keys=True)
        flat["is_current"] = "true" if row["is_current"] else "false"
        writer.writerow(flat)
        n += 1
    return n


def write_jsonl(rows: Iterator[Mapping[str, Any]], out: IO[str]) -> int:
    n = 0
    for row in rows:
        out.write(json_safe(row, default=str) + "\n")
        n += 1
    return n


class _Output:
    """The output stream, whose write errors name it (not the database being read)."""

    def __init__(self, stream: IO[str], where: str) -> None:
        self._stream, self._where = stream, where

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise  # the reader went away: cli.py ends quietly
        except OSError as exc:
            raise Failure(f"cannot write {self._where}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    url = database_url(args)
    engine = open_database(args)
    out: IO[str] = sys.stdout
    try:
        if args.output:
            try:
                out = open(args.output, "w", encoding="utf-8", newline="")  # noqa: SIM115
            except OSError as exc:
                raise Failure(f"cannot write {args.output}: {exc}") from None
        with database_errors(url, "cannot read"), engine.connect() as conn:
            rows = evaluation_rows(
                conn,
                since=args.since,
                expectation=args.expectation,
                current_only=args.current_only,
            )
            sink: Any = _Output(out, args.output or "stdout")  # writes like an IO[str]
            n = (write_csv if args.format == "csv" else write_jsonl)(rows, sink)
    finally:
        if out is not sys.stdout:
            out.close()
        engine.dispose()
    if args.output:
        print(safe_message(f"{n} evaluations written to {args.output}"), file=sys.stderr)
    return 0

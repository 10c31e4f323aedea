"""``toolscore db upgrade`` and ``toolscore db current``: manage the database schema."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from toolscore.collector.commands.common import add_db_argument, database_errors, database_url


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("db", help="manage the database schema (migrations)")
    sub = parser.add_subparsers(dest="db_command", metavar="ACTION")
    up = sub.add_parser("upgrade", help="apply every pending migration")
    add_db_argument(up)
    up.add_argument("--revision", default="head", help="target revision (default: head)")
    up.set_defaults(handler=_upgrade)
    cur = sub.add_parser("current", help="print the database's revision and the newest one")
    add_db_argument(cur)
    cur.set_defaults(handler=_current)
    parser.set_defaults(handler=lambda _args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _upgrade(args: argparse.Namespace) -> int:
    from toolscore.storage.migrate import current_revision, upgrade
    from toolscore.storage.plumbing.engine import redact

    url = database_url(args)
    progress, handler = logging.getLogger("toolscore.migrate"), _progress_handler()
    progress.addHandler(handler)
    progress.setLevel(logging.INFO)
    try:
        with database_errors(url):
            upgrade(url, args.revision)
            rev = current_revision(url)
    finally:
        progress.removeHandler(handler)
    print(f"database {redact(url)} is at revision {rev}")
    return 0


def _progress_handler() -> logging.Handler:
    """A long migration's steps (``toolscore.migrate`` INFO lines) on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("toolscore db upgrade: %(message)s"))
    return handler


def _current(args: argparse.Namespace) -> int:
    from toolscore.storage.migrate import current_revision, head_revision
    from toolscore.storage.plumbing.engine import redact

    url = database_url(args)
    with database_errors(url):
        rev = current_revision(url)
    head = head_revision()
    state = "up to date" if rev == head else f"behind (newest is {head})"
    print(f"database {redact(url)} is at revision {rev or 'none'}: {state}")
    return 0 if rev == head else 1

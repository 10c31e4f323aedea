"""``toolscore refs import|list|show|promote|suggest``: manage the reference expectations
conversations are scored against.

Expectation ids, calls and match rules come from imported files: the text output escapes their
control and bidi characters (``toolscore.collector.views.safe_text``), the JSON output as
``\\uXXXX``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolscore.collector.commands.common import (
    add_db_argument,
    database_errors,
    database_url,
    open_database,
)
from toolscore.collector.errors import Failure, UsageError
from toolscore.collector.views.safe_text import json_safe, safe_lines, terminal_safe
from toolscore.collector.views.table import clip, format_call, format_time, render_table

if TYPE_CHECKING:
    from toolscore.storage.database import Engine
    from toolscore.storage.expectations.repository import ExpectationRow


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("refs", help="import, list and show reference expectations")
    sub = parser.add_subparsers(dest="refs_command", metavar="ACTION")

    imp = sub.add_parser(
        "import",
        help="import expectations from a YAML, JSON or Ragas JSONL file (all or nothing)",
    )
    imp.add_argument("file", type=Path, metavar="FILE")
    imp.add_argument(
        "--format",
        choices=("yaml", "json", "jsonl"),
        default=None,
        help="file format (default: from the suffix: .yaml/.yml, .json, .jsonl/.ndjson)",
    )
    imp.add_argument(
        "--config",
        type=Path,
        default=None,
        metavar="PATH",
        help="scoring config: reject expectations naming a metric instance it does not define",
    )
    add_db_argument(imp)
    imp.set_defaults(handler=_import)

    lst = sub.add_parser("list", help="the latest version of every expectation")
    add_db_argument(lst)
    lst.add_argument("--json", action="store_true", help="JSON output for scripts")
    lst.set_defaults(handler=_list)

    show = sub.add_parser("show", help="one expectation in full")
    show.add_argument("id", metavar="ID")
    show.add_argument("--version", type=int, default=None, help="a version (default: latest)")
    add_db_argument(show)
    show.add_argument("--json", action="store_true", help="JSON output for scripts")
    show.set_defaults(handler=_show)

    _register_promote(sub)
    _register_suggest(sub)
    parser.set_defaults(handler=lambda _args: _usage(parser))


def _register_promote(sub: Any) -> None:
    from toolscore.collector.expectations.promote import MATCH_BY

    promote = sub.add_parser(
        "promote",
        help="print what a conversation called as an expectation (refs import YAML), or import it",
    )
    promote.add_argument("conversation_id", metavar="CONVERSATION_ID")
    promote.add_argument("--id", default=None, help="expectation id (default: promoted-<id>)")
    promote.add_argument(
        "--match",
        choices=MATCH_BY,
        default="conversation_id",
        help="how conversations find it: this conversation's id, its first user message "
        "exactly, or a regex of that message to edit (default: conversation_id)",
    )
    promote.add_argument("--import", dest="do_import", action="store_true", help="import it now")
    promote.add_argument(
        "--force", action="store_true", help="promote a conversation rebuilt with warnings"
    )
    add_db_argument(promote)
    promote.set_defaults(handler=_promote)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _metric_names(config_path: Path) -> list[str]:
    from toolscore.scorer import load_config

    try:
        return list(load_config(config_path).instances)
    except ValueError as exc:  # scorer.ConfigError names the file and the path
        raise UsageError(str(exc)) from None


def _import(args: argparse.Namespace) -> int:
    from toolscore.collector.expectations.files import RefsFileError, load_refs_file
    from toolscore.storage.expectations.repository import import_expectations

    metric_names = None if args.config is None else _metric_names(args.config)
    try:
        items = load_refs_file(args.file, fmt=args.format, metric_names=metric_names)
    except RefsFileError as exc:
        problems = "".join(f"\n  {problem}" for problem in exc.problems)
        raise UsageError(f"{args.file} rejected, nothing imported:{problems}") from None
    engine = open_database(args, upgrade=True)
    try:
        url = database_url(args)
        with database_errors(url, "import failed, nothing imported"), engine.connect() as conn:
            report = import_expectations(conn, items)
    finally:
        engine.dispose()
    for entry in report.entries:
        if entry.status != "unchanged":
            print(terminal_safe(f"{entry.status:9} {entry.id} v{entry.version}"))
    print(
        f"{terminal_safe(args.file)}: {report.created} created, {report.updated} updated, "
        f"{report.unchanged} unchanged"
    )
    return 0


def _promote(args: argparse.Namespace) -> int:
    from toolscore.collector.expectations.promote import (
        PromoteError,
        expectations_yaml,
        promote,
    )
    from toolscore.storage.expectations.repository import import_expectations

    engine = open_database(args, "conversations", hint="run `toolscore serve` first")
    try:
        with database_errors(database_url(args), "promote failed"), engine.connect() as conn:
            try:
                found = promote(
                    conn,
                    args.conversation_id,
                    expectation_id=args.id,
                    match_by=args.match,
                    force=args.force,
                )
            except PromoteError as exc:
                raise Failure("".join([str(exc), *(f"\n  {p}" for p in exc.problems)])) from None
            report = None
            if args.do_import:
                report = import_expectations(conn, [found.expectation])
                conn.commit()
    finally:
        engine.dispose()
    for warning in found.warnings:
        print(terminal_safe(f"warning (forced): {warning}"), file=sys.stderr)
    if report is None:
        sys.stdout.write(expectations_yaml([found.expectation]))
        return 0
    entry = report.entries[0]
    print(terminal_safe(f"{entry.status:9} {entry.id} v{entry.version}"))
    return 0


def _register_suggest(sub: Any) -> None:
    suggest = sub.add_parser(
        "suggest",
        help="the most frequent unmatched first messages or tool sequences: candidates for "
        "new expectations",
    )
    suggest.add_argument(
        "--by",
        choices=("message", "tools"),
        default="message",
        help="group unmatched conversations by first user message (folded as matching folds "
        "it) or by their sequence of tool names (default: message)",
    )
    suggest.add_argument("--limit", type=int, default=10, help="candidates shown (default 10)")
    suggest.add_argument(
        "--scan",
        type=int,
        default=10_000,
        help="unmatched conversations read, most recent first (default 10000)",
    )
    add_db_argument(suggest)
    suggest.add_argument("--json", action="store_true", help="JSON output for scripts")
    suggest.set_defaults(handler=_suggest)


def _suggest(args: argparse.Namespace) -> int:
    from toolscore.storage.conversations.coverage import (
        unmatched_messages,
        unmatched_tool_sequences,
    )

    if args.limit < 1 or args.scan < 1:
        raise UsageError("--limit and --scan must be at least 1")
    read = unmatched_messages if args.by == "message" else unmatched_tool_sequences
    engine = open_database(args, "conversations", hint="run `toolscore serve` first")
    try:
        with engine.connect() as conn:
            found = read(conn, limit=args.limit, scan=args.scan)
    finally:
        engine.dispose()
    if args.json:
        rows = [
            {"candidate": c.text, "conversations": c.conversations, "example": c.example}
            for c in found
        ]
        print(json_safe(rows, indent=2))
        return 0
    if not found:
        print("no unmatched conversations")
        return 0
    table = [[str(c.conversations), clip(c.text, 80), c.example] for c in found]
    print(render_table(["CONVERSATIONS", "CANDIDATE", "EXAMPLE"], table))
    print("promote one: toolscore refs promote EXAMPLE --match regex", file=sys.stderr)
    return 0


def _open(args: argparse.Namespace) -> Engine:
    """An engine on a database that has the expectations table."""
    return open_database(
        args,
        "expectations",
        hint="run `toolscore db upgrade` or `toolscore refs import FILE`",
    )


def _call_count(reference: Any) -> int:
    if not isinstance(reference, list):
        return 0
    return sum(len(c) if isinstance(c, list) else 1 for c in reference)


def describe_match(match: Any) -> str:
    """A match rule on one line: ``conversation_id=a,b user_input="hi"``, or ``-``."""
    if not match:
        return "-"
    parts = []
    cid = match.get("conversation_id")
    if cid is not None:
        parts.append("conversation_id=" + (",".join(cid) if isinstance(cid, list) else str(cid)))
    for key in ("user_input", "attributes", "priority"):
        if match.get(key) is not None:
            parts.append(f"{key}=" + json.dumps(match[key], ensure_ascii=False))
    return " ".join(parts)


def describe_metrics(metrics: Sequence[str] | None) -> str:
    return "(all)" if metrics is None else ",".join(metrics)


def row_json(row: ExpectationRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "version": row.version,
        "is_latest": row.is_latest,
        "created_at": row.created_at.isoformat(),
        "reference_tool_calls": row.reference_tool_calls,
        "user_input": row.user_input,
        "metrics": list(row.metrics) if row.metrics is not None else None,
        "match": row.match,
        "content_hash": row.content_hash,
    }


def _list(args: argparse.Namespace) -> int:
    from toolscore.storage.expectations.repository import list_expectations

    engine = _open(args)
    try:
        with engine.connect() as conn:
            rows = list_expectations(conn)
    finally:
        engine.dispose()
    if args.json:
        print(json_safe([row_json(r) for r in rows], indent=2))
        return 0
    if not rows:
        print("no expectations: import some with `toolscore refs import FILE`")
        return 0
    table = [
        [
            r.id,
            str(r.version),
            str(_call_count(r.reference_tool_calls)),
            describe_metrics(r.metrics),
            describe_match(r.match),
            format_time(r.created_at),
        ]
        for r in rows
    ]
    print(render_table(["ID", "VERSION", "CALLS", "METRICS", "MATCH", "UPDATED"], table))
    return 0


def _show(args: argparse.Namespace) -> int:
    from toolscore.storage.expectations.repository import get_latest, get_version, list_versions

    engine = _open(args)
    try:
        with engine.connect() as conn:
            if args.version is None:
                row = get_latest(conn, args.id)
            else:
                row = get_version(conn, args.id, args.version)
            versions = list_versions(conn, args.id) if row is not None else []
    finally:
        engine.dispose()
    if row is None:
        which = f" version {args.version}" if args.version is not None else ""
        raise Failure(f"no expectation {args.id!r}{which}")
    if args.json:
        print(json_safe(row_json(row), indent=2))
        return 0
    print(safe_lines(render_expectation(row, [v.version for v in versions])))
    return 0


def render_reference(reference: Any, indent: str = "  ") -> list[str]:
    """Numbered reference calls; a group (calls in any order) shows as ``any order:``."""
    if not isinstance(reference, list) or not reference:
        return [f"{indent}(no tool calls expected)"]
    lines = []
    for number, call in enumerate(reference, start=1):
        if isinstance(call, list):
            lines.append(f"{indent}{number}. any order:")
            lines.extend(
                f"{indent}     - {format_call(c.get('name'), c.get('args'))}" for c in call
            )
        else:
            lines.append(f"{indent}{number}. {format_call(call.get('name'), call.get('args'))}")
    return lines


def render_expectation(row: ExpectationRow, versions: Sequence[int]) -> list[str]:
    latest = " (latest)" if row.is_latest else ""
    lines = [
        f"expectation {row.id}  version {row.version}{latest}",
        f"  imported      {format_time(row.created_at)}",
        f"  versions      {', '.join(str(v) for v in versions)}",
        f"  metrics       {describe_metrics(row.metrics)}",
        f"  match         {describe_match(row.match)}",
        f"  content hash  {row.content_hash[:16]}",
    ]
    if row.user_input is not None:
        lines.append("user input:")
        if isinstance(row.user_input, str):
            lines.append(f"  {clip(row.user_input, 100)}")
        else:
            for message in row.user_input:
                content = clip(str(message.get("content") or ""), 90)
                lines.append(f"  {message.get('type', '?'):6} {content}")
                for call in message.get("tool_calls") or ():
                    lines.append(f"         -> {format_call(call.get('name'), call.get('args'))}")
    lines.append(f"reference tool calls ({_call_count(row.reference_tool_calls)}):")
    lines.extend(render_reference(row.reference_tool_calls))
    return lines

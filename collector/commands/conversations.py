"""``toolscore conversations`` and ``toolscore show CONVERSATION``: read-only views for humans.

Both read the pipeline's tables (``conversations``, ``evaluations``, ``tool_calls``) and the
expectation version each conversation was scored against; ``show`` also rebuilds the messages from
the stored spans. ``--json`` prints the same data for scripts.

Every value shown comes from spans (untrusted): the text output escapes control and bidi
characters (``toolscore.collector.views.safe_text``), the JSON output escapes them as ``\\uXXXX``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from toolscore.collector.commands.common import add_db_argument, open_database
from toolscore.collector.commands.show_losses import render_losses
from toolscore.collector.configuration import add_options
from toolscore.collector.errors import Failure, UsageError
from toolscore.collector.export.attributes import LABEL_NOT_EVALUATED
from toolscore.collector.pipeline.options import (
    CONTROL_CALLS_OPTIONS,
    control_calls_from,
)
from toolscore.collector.views.conversation import (
    iso,
    load_conversation,
    recent_conversations,
    why_unmatched,
)
from toolscore.collector.views.safe_text import json_safe, safe_lines
from toolscore.collector.views.spans import render_rules, render_spans
from toolscore.collector.views.table import (
    clip,
    format_call,
    format_score,
    format_time,
    render_table,
)

if TYPE_CHECKING:
    from toolscore.storage.database import Engine
    from toolscore.storage.retention.rollup import HistoryState

STATUSES = ("open", "scored", "unmatched", "error")


def register(subparsers: Any) -> None:
    conv = subparsers.add_parser(
        "conversations", help="recent conversations with their status and current scores"
    )
    conv.add_argument("--limit", type=int, default=20, metavar="N", help="how many (default 20)")
    conv.add_argument("--status", choices=STATUSES, default=None, help="only this status")
    add_db_argument(conv)
    conv.add_argument("--json", action="store_true", help="JSON output for scripts")
    conv.set_defaults(handler=_conversations)

    show = subparsers.add_parser(
        "show", help="one conversation: messages, tool calls next to the reference, scores"
    )
    show.add_argument("conversation", metavar="CONVERSATION", help="conversation id")
    show.add_argument(
        "--revision",
        type=int,
        default=None,
        metavar="N",
        help="an earlier scoring of the conversation (default: the current one)",
    )
    show.add_argument(
        "--no-messages", action="store_true", help="skip rebuilding the messages from the spans"
    )
    show.add_argument(
        "--spans",
        action="store_true",
        help="list the stored spans: the calls each asked for or ran, and those not used",
    )
    add_options(show, CONTROL_CALLS_OPTIONS)  # rebuild the messages as serve scored them
    add_db_argument(show)
    show.add_argument("--json", action="store_true", help="JSON output for scripts")
    show.set_defaults(handler=_show)


def _open(args: argparse.Namespace) -> Engine:
    """An engine on a database with the pipeline's tables."""
    return open_database(args, "conversations")


def _expectation_label(row: Mapping[Any, Any]) -> str:
    if row["expectation_id"] is None:
        return "-"
    return f"{row['expectation_id']}@{row['expectation_version']}"


# --- toolscore conversations -------------------------------------------------------------------


def _conversations(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise UsageError("--limit must be at least 1")
    engine = _open(args)
    try:
        with engine.connect() as conn:
            rows, metrics, by_conversation = recent_conversations(conn, args.limit, args.status)
    finally:
        engine.dispose()

    if args.json:
        out = [
            {
                "id": r["id"],
                "status": r["status"],
                "first_seen_at": iso(r["first_seen_at"]),
                "last_span_at": iso(r["last_span_at"]),
                "revision": r["revision"],
                "scored_at": iso(r["scored_at"]),
                "expectation_id": r["expectation_id"],
                "expectation_version": r["expectation_version"],
                "error": r["error"],
                "unmatched_reason": why_unmatched(r),
                "warning": r.get("warning"),
                "scores": {m: s for m, (s, _e) in by_conversation.get(r["id"], {}).items()},
            }
            for r in rows
        ]
        print(json_safe(out, indent=2))
        return 0
    if not rows:
        which = f" with status {args.status}" if args.status else ""
        print(f"no conversations{which} yet")
        return 0

    def cell(cid: str, metric: str) -> str:
        score, error = by_conversation.get(cid, {}).get(metric, (None, None))
        return "error" if score is None and error else format_score(score)

    table = [
        [
            r["id"],
            r["status"],
            format_time(r["last_span_at"]),
            _expectation_label(r),
            *(cell(r["id"], m) for m in metrics),
        ]
        for r in rows
    ]
    headers = ["CONVERSATION", "STATUS", "LAST ACTIVITY", "EXPECTATION", *metrics]
    if any(r.get("warning") for r in rows):  # scores given, marked: `show` has the whole text
        headers.append("WARNING")
        for line, r in zip(table, rows, strict=True):
            line.append(clip(r["warning"], 60) if r.get("warning") else "")
    if any(why_unmatched(r) for r in rows):  # the reason last: it is the widest column
        headers.append("WHY UNMATCHED")
        for line, r in zip(table, rows, strict=True):
            line.append(why_unmatched(r) or "")
        print(render_table(headers, table, max_width=100))  # the whole of it: `show` has it all
        return 0
    print(render_table(headers, table))
    return 0


# --- toolscore show ----------------------------------------------------------------------------


def _show(args: argparse.Namespace) -> int:
    from toolscore.storage.retention.rollup import state as history_state

    control = control_calls_from(args, os.environ)  # a bad value: ConfigError, exit status 2
    engine = _open(args)
    try:
        with engine.connect() as conn:
            data = load_conversation(
                conn,
                args.conversation,
                revision=args.revision,
                messages=not args.no_messages,
                control_calls=control,
                spans=args.spans,
            )
            pruned = history_state(conn) if data is None else None
    finally:
        engine.dispose()
    if data is None:
        raise Failure(_missing(args.conversation, pruned))
    if args.revision is not None and not data["tool_calls"] and not data["evaluations"]:
        raise Failure(f"conversation {args.conversation!r} has no revision {args.revision}")
    if args.json:
        print(json_safe(data, indent=2, default=str))
    else:
        print(safe_lines(render_conversation(data)))
    return 0


def _missing(conversation: str, pruned: HistoryState | None) -> str:
    if pruned is None:
        return f"no conversation {conversation!r}"
    before = pruned.cutoff.strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"no conversation {conversation!r}: history retention deletes finished conversations "
        f"whose last span arrived before {before}, so it was deleted or never existed (the "
        "scores of deleted conversations stay in `toolscore report` and the daily_scores view)"
    )


def _flat_reference(reference: Any) -> list[str]:
    if not isinstance(reference, list):
        return []
    out: list[str] = []
    for number, item in enumerate(reference, start=1):
        if isinstance(item, list):  # a group: any order inside it
            out.extend(
                f"[group {number}] {format_call(c.get('name'), c.get('args'))}" for c in item
            )
        elif isinstance(item, dict):
            out.append(format_call(item.get("name"), item.get("args")))
    return out


def _predicted(call: Mapping[str, Any]) -> str:
    if call["arguments"] is None and call["arguments_raw"] is None:
        return f"{call['name']}(<arguments not recorded>)"
    if call["arguments_ok"] or call["arguments_raw"] is None:
        return format_call(call["name"], call["arguments"])
    return f"{call['name']}(<undecoded: {call['arguments_raw']}>)"


def render_conversation(data: Mapping[str, Any]) -> list[str]:
    pruned = data["conversation"].get("pruned_through_ns") is not None
    lines = _render_header(data["conversation"], data["expectation"])
    lines += _render_messages(data, pruned)
    lines += _render_calls(data)
    if "spans" in data:
        lines += render_spans(data["spans"], pruned)
        lines += render_rules(data.get("call_rules"))
    past = data.get("revision")
    lines += ["", "scores:" if past is None else f"scores (revision {past}):"]
    if not data["evaluations"]:
        lines.append("  (not scored)")
    for evaluation in data["evaluations"]:
        lines.extend(_render_evaluation(evaluation))
    return lines


def _render_header(conv: Mapping[str, Any], shown: Mapping[str, Any]) -> list[str]:
    """The conversation's own fields: status, times, expectation, error, warning, pruning."""
    scored = f", scored {format_time(_parse(conv['scored_at']))}" if conv["scored_at"] else ""
    matched = "-" if shown["id"] is None else f"{shown['id']}@{shown['version']}"
    lines = [
        f"conversation {conv['id']}",
        f"  status          {conv['status']} (revision {conv['revision']}{scored})",
        f"  first seen      {format_time(_parse(conv['first_seen_at']))}",
        f"  last activity   {format_time(_parse(conv['last_span_at']))}",
        f"  last trace      {conv['last_trace_id']}",
        f"  expectation     {matched}",
    ]
    if conv.get("reference_id"):
        lines.append(f"  reference attr  {conv['reference_id']}")
    if conv.get("first_user_message"):
        lines.append(f"  first message   {clip(conv['first_user_message'], 90)}")
    if conv.get("error"):
        lines.append(f"  error           {conv['error']}")
    if conv["status"] == "unmatched" and conv.get("unmatched_reason"):
        lines.append(f"  why unmatched   {conv['unmatched_reason']}")
    if conv.get("warning"):
        lines.append(f"  warning         {conv['warning']}")
    if conv.get("pruned_through_ns") is not None:
        when = dt_from_ns(conv["pruned_through_ns"])
        lines.append(f"  spans pruned    received up to {format_time(when)} (span retention)")
    return lines


def _render_messages(data: Mapping[str, Any], pruned: bool) -> list[str]:
    """The rebuilt messages, when asked for (``messages`` in ``data``)."""
    messages = data.get("messages")
    if messages is None:
        if "messages" not in data:
            return []
        if pruned:
            gone = "messages: pruned (span retention deleted the spans; calls and scores kept)"
            return ["", gone]
        return ["", "messages: (no spans stored for this conversation)"]
    title = "messages received after the pruning" if pruned else "messages"
    lines = ["", f"{title} ({len(messages)}):"]
    for message in messages:
        kind = str(message.get("type", "?"))
        content = clip(str(message.get("content") or ""), 90)
        lines.append(f"  {kind:6} {content}".rstrip())
        for call in message.get("tool_calls") or ():
            lines.append(f"         -> {format_call(call.get('name'), call.get('args'))}")
    return lines


def _render_calls(data: Mapping[str, Any]) -> list[str]:
    """Predicted and reference calls side by side, with the convention that read each."""
    predicted = [_predicted(c) for c in data["tool_calls"]]
    expected = _flat_reference(data["reference_tool_calls"])
    revision = data["tool_calls"][0]["revision"] if data["tool_calls"] else None
    title = "tool calls" + (f" (revision {revision})" if revision is not None else "")
    lines = ["", f"{title}:"]
    if not predicted and not expected:
        return [*lines, "  (none)"]
    conventions = [c["convention"] for c in data["tool_calls"]]
    rows = []
    for i in range(max(len(predicted), len(expected))):
        rows.append(
            [
                str(i + 1),
                predicted[i] if i < len(predicted) else "-",
                expected[i] if i < len(expected) else "-",
                conventions[i] if i < len(conventions) else "",
            ]
        )
    reference_title = "REFERENCE" if data["reference_tool_calls"] is not None else "(no reference)"
    table = render_table(["#", "PREDICTED", reference_title, "CONVENTION"], rows, max_width=60)
    lines.extend("  " + line for line in table.splitlines())
    return lines


def _render_evaluation(evaluation: Mapping[str, Any]) -> list[str]:
    details = evaluation["details"] if isinstance(evaluation["details"], Mapping) else {}
    unscored = details.get("label") == LABEL_NOT_EVALUATED  # collector/pipeline/not_evaluated.py
    shown = LABEL_NOT_EVALUATED if unscored else format_score(evaluation["score"])
    head = f"  {evaluation['metric']}  {shown}"
    if evaluation["metric_type"] != evaluation["metric"]:
        head += f"  ({evaluation['metric_type']})"
    lines = [head]
    if evaluation["error"]:
        lines.append(f"    error: {evaluation['error']}")
    if unscored and details.get("reason"):
        lines.append(f"    {details['reason']}")
    extras = [
        f"{key}={details[key]:.4g}"
        for key in ("precision", "recall")
        if isinstance(details.get(key), int | float)
    ]
    if extras:
        lines.append("    " + "  ".join(extras))
    reasons: Sequence[Any] = details.get("reasons") or ()
    lines.extend(f"    - {reason}" for reason in reasons)
    lines.extend(render_losses(details))
    return lines


def dt_from_ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None

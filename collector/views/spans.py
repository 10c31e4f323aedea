"""``toolscore show --spans``: which span each rebuilt call came from, and which spans were not
used (docs/cli.md). Values come from spans (untrusted): the caller escapes the text output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolscore.collector.views.table import clip, render_table

if TYPE_CHECKING:  # the CLI parser imports commands: reconstruction loads when show runs
    from toolscore.collector.reconstruction.rebuild import Reconstruction
    from toolscore.storage.records import SpanRecord


def span_rows(spans: Sequence[SpanRecord], rec: Reconstruction) -> list[dict[str, Any]]:
    """One row per stored span, in time order: the convention that read it, the calls it asked
    for (a model call's output) or ran (a tool span), and whether anything was taken from it."""
    asked: dict[str, list[int]] = {}
    ran: dict[str, list[int]] = {}
    for call in rec.tool_calls:
        number = call.position + 1  # as the tool-call table numbers them
        if call.requested_in:
            asked.setdefault(call.requested_in, []).append(number)
        if call.span_id and call.span_id != call.requested_in:
            ran.setdefault(call.span_id, []).append(number)
    rows = []
    for span in sorted(spans, key=lambda s: (s.start_ns, s.span_id)):
        sid = span.span_id
        used = sid in rec.used_spans or sid in asked or sid in ran
        rows.append(
            {
                "span_id": sid,
                "trace_id": span.trace_id,
                "name": span.name,
                "scope": span.scope_name,
                "convention": rec.readers.get(sid),
                "calls_asked": asked.get(sid, []),
                "calls_ran": ran.get(sid, []),
                "used": used,
            }
        )
    return rows


def call_rules(rec: Reconstruction) -> list[dict[str, Any]]:
    """How each rebuilt call was produced: the rule, and what confirmed or completed it."""
    return [{"call": c.position + 1, "name": c.name, "rule": c.rule or "-"} for c in rec.tool_calls]


def render_rules(rows: Sequence[Mapping[str, Any]] | None) -> list[str]:
    if not rows:
        return []
    table = [[f"#{r['call']}", clip(r["name"], 30), r["rule"]] for r in rows]
    body = render_table(["CALL", "NAME", "HOW IT WAS REBUILT"], table, max_width=90)
    return ["", "calls, as rebuilt:"] + ["  " + line for line in body.splitlines()]


def render_spans(rows: Sequence[Mapping[str, Any]] | None, pruned: bool) -> list[str]:
    if rows is None:
        if pruned:
            return ["", "spans: pruned (span retention deleted them; calls and scores kept)"]
        return ["", "spans: (none stored for this conversation)"]
    unused = sum(1 for r in rows if not r["used"])
    lines = ["", f"spans ({len(rows)}, {unused} not used):"]
    if pruned:
        lines.append("  (spans received before the pruning are gone: their calls have no span)")
    table = [
        [
            r["span_id"],
            clip(r["name"], 40),
            r["convention"] or "-",
            _use(r),
        ]
        for r in rows
    ]
    body = render_table(["SPAN", "NAME", "READ BY", "USED FOR"], table, max_width=60)
    return lines + ["  " + line for line in body.splitlines()]


def _use(row: Mapping[str, Any]) -> str:
    parts = []
    if row["calls_asked"]:
        parts.append("asked for call " + ", ".join(f"#{n}" for n in row["calls_asked"]))
    if row["calls_ran"]:
        parts.append("ran call " + ", ".join(f"#{n}" for n in row["calls_ran"]))
    if parts:
        return "; ".join(parts)
    if row["used"]:
        return "messages"
    return "not used" if row["convention"] is None else "not used (nothing read from it)"

"""The terminal summary: one line per expectation and metric, the tools most often wrong, then
the worst conversations.

Ids, metric names and explanations are untrusted: every line is escaped for the terminal
(``toolscore.collector.views.safe_text``), cells before their widths are measured.
"""

from __future__ import annotations

from toolscore.collector.views.report.data import Report, Series
from toolscore.collector.views.safe_text import safe_lines, terminal_safe
from toolscore.storage.history.tool_scores import ToolScore

SPARK = "▁▂▃▄▅▆▇█"
TREND_FLAT = 0.005  # |trend| below this reads as flat


def sparkline(series: Series) -> str:
    """Daily means as block characters on a fixed 0..1 scale (gaps as spaces)."""
    out = []
    for p in series.points:
        if p.mean is None:
            out.append(" ")
        else:
            out.append(SPARK[min(len(SPARK) - 1, int(p.mean * len(SPARK)))])
    return "".join(out)


def trend_text(trend: float | None) -> str:
    if trend is None:
        return "n/a"
    if abs(trend) < TREND_FLAT:
        return "→ flat"
    return f"{'↑' if trend > 0 else '↓'} {trend:+.3f}"


def _num(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value * 100:.1f}%" if percent else f"{value:.3f}"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def tool_lines(tool: ToolScore) -> list[str]:
    """``  search (acc): 3 wrong, 1 missing of 12 expected, 11 called; 1.25 points lost`` and
    the arguments most often wrong."""
    parts = [
        f"{n} {label}"
        for n, label in (
            (tool.wrong, "wrong"),
            (tool.missing, "missing"),
            (tool.extra, "extra"),
            (tool.misplaced, "misplaced"),
        )
        if n
    ]
    lines = [
        f"  {tool.tool} ({tool.metric}): {', '.join(parts)} of {tool.expected} expected, "
        f"{tool.called} called; {tool.points_lost:.2f} points lost"
    ]
    if tool.wrong_arguments:
        shown = ", ".join(f"{a} ×{n}" for a, n in tool.wrong_arguments)
        lines.append(f"          wrong arguments: {shown}")
    return lines


def render_text(report: Report, width: int = 100) -> str:
    lines = [
        f"toolscore report: {report.since.isoformat()} .. {report.until.isoformat()} "
        "(UTC days of the conversations; current scores)",
        "",
    ]
    if not report.series:
        lines.append("No scored conversations in this period.")
        lines += coverage_lines(report)
        return safe_lines(lines + _warned(report, width)) + "\n"
    header = ("expectation", "metric", "evals", "scored", "mean", "pass", "trend", "daily mean")
    rows = [
        (
            terminal_safe(s.expectation_id),
            terminal_safe(s.metric),
            str(s.evaluations),
            str(s.scored),
            _num(s.mean),
            _num(s.pass_rate, percent=True),
            trend_text(s.trend),
            sparkline(s),
        )
        for s in report.series
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    right = {2, 3, 4, 5}
    for r in (header, *rows):
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    if report.tools:
        lines += ["", "Tools most often wrong (wrong arguments, missing, extra, misplaced calls):"]
        for tool in report.tools:
            lines += [_cut(terminal_safe(line), width) for line in tool_lines(tool)]
    if report.worst:
        lines += ["", "Worst conversations (failing or not scored):"]
        for w in report.worst:
            score = "error" if w.score is None else f"{w.score:.3f}"
            score = "not_evaluated" if w.not_evaluated else score
            head = f"  {score:>6}  {w.conversation_id}  {w.expectation_id}/{w.metric}  {w.day}"
            lines.append(_cut(terminal_safe(head), width))
            lines.append(_cut(terminal_safe(f"          {w.explanation}"), width))
    lines += [_cut(line, width) for line in coverage_lines(report)]
    return safe_lines(lines + _warned(report, width)) + "\n"


def coverage_lines(report: Report) -> list[str]:
    """How much of the period's traffic found an expectation, per service and agent."""
    if not report.coverage:
        return []
    header = ("service", "agent", "seen", "matched", "unmatched", "share", "top unmatched reason")
    rows = [
        (
            terminal_safe(c.service),
            terminal_safe(c.agent),
            str(c.seen),
            str(c.matched),
            str(c.unmatched),
            f"{c.matched / c.seen:.0%}" if c.seen else "-",
            terminal_safe(f"{c.reasons[0][1]}x {c.reasons[0][0]}") if c.reasons else "",
        )
        for c in report.coverage
    ]
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = ["", "Coverage (conversations active in the period, by service and agent):"]
    for r in (header, *rows):
        cells = [
            c.rjust(w) if 2 <= i <= 5 else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    return lines


def _warned(report: Report, width: int) -> list[str]:
    if not report.warned_total:
        return []
    lines = ["", f"Conversations with warnings ({report.warned_total}; scores given, marked):"]
    for v in report.warned:
        lines.append(_cut(terminal_safe(f"  {v.conversation_id}  {v.warning}"), width))
    return lines

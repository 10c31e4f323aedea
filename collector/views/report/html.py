"""The HTML report: one self-contained page (inline CSS and SVG; no script, font or image URL).

Every untrusted text (ids, metric names, explanations) goes through :func:`escape`: HTML-escaped,
and its control and bidi characters shown escaped as on the terminal, so a bidi override cannot
reorder what the reader sees.
"""

from __future__ import annotations

import datetime as dt
import math
from html import escape as _html_escape

from toolscore.collector.views.report.data import Report, Series
from toolscore.collector.views.report.text import trend_text
from toolscore.collector.views.safe_text import terminal_safe
from toolscore.storage.history.tool_scores import ToolScore

# The charts' drawing units; each chart is scaled to the page's full width (viewBox).
W, H = 1000, 300
LEFT, RIGHT, TOP = 48, 16, 14
PLOT_BOTTOM = 196  # scores from TOP (1.0) to PLOT_BOTTOM (0.0)
COUNT_TOP, COUNT_BOTTOM = 214, 256  # the daily counts' bars
AXIS_Y = 278  # the dates
MIN_LABEL_GAP = 78  # drawing units between two date labels
THRESHOLD = "#cf222e"


def escape(value: str) -> str:
    """``value`` as HTML text or attribute value, its control and bidi characters visible."""
    return _html_escape(terminal_safe(value), quote=True)


CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 24px; color: #1f2328;
  background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.muted { color: #59636e; font-size: 13px; }
table { border-collapse: collapse; font-size: 14px; margin-top: 8px; }
th, td { padding: 5px 10px; border-bottom: 1px solid #d1d9e0; text-align: left;
  vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart { display: block; width: 100%; margin: 8px 0 20px; }
.chart h3 { font-size: 14px; margin: 0 0 2px; }
.chart svg { display: block; width: 100%; height: auto; }
svg text { font-size: 12px; fill: #59636e; }
.fail { color: #cf222e; } .pass { color: #1a7f37; } .err { color: #9a6700; }
code { font-size: 12px; } td.day { white-space: nowrap; }
"""


def _days(since: dt.date, until: dt.date) -> list[dt.date]:
    return [since + dt.timedelta(days=i) for i in range((until - since).days + 1)]


def _slot(since: dt.date, until: dt.date) -> float:
    """The width of one day on the chart (each day is a slot; points sit in its middle)."""
    return (W - LEFT - RIGHT) / ((until - since).days + 1)


def _x(day: str, since: dt.date, until: dt.date) -> float:
    offset = (dt.date.fromisoformat(day) - since).days
    return LEFT + _slot(since, until) * (offset + 0.5)


def _y(value: float) -> float:
    return TOP + (PLOT_BOTTOM - TOP) * (1.0 - value)


def _axes(since: dt.date, until: dt.date) -> list[str]:
    """Score grid lines and their labels, and the dates along the bottom."""
    parts = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _y(tick)
        parts.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d1d9e0"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    days = _days(since, until)
    every = max(1, math.ceil(MIN_LABEL_GAP / _slot(since, until)))
    for i, day in enumerate(days):
        if i % every:
            continue
        x = _x(day.isoformat(), since, until)
        label = day.isoformat() if i == 0 or day.day == 1 else day.strftime("%m-%d")
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{COUNT_BOTTOM}" y2="{COUNT_BOTTOM + 4}" '
            f'stroke="#59636e"/><text x="{x:.1f}" y="{AXIS_Y}" text-anchor="middle" '
            f'class="date">{label}</text>'
        )
    parts.append(
        f'<text x="{LEFT - 6}" y="{COUNT_BOTTOM:.1f}" text-anchor="end">n</text>'
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{COUNT_BOTTOM}" y2="{COUNT_BOTTOM}" '
        'stroke="#d1d9e0"/>'
    )
    return parts


def _counts(series: Series, since: dt.date, until: dt.date) -> list[str]:
    """The conversations scored each day, as bars with their number."""
    most = max((p.evaluations for p in series.points), default=0)
    if not most:
        return []
    width = min(28.0, _slot(since, until) * 0.6)
    parts = []
    for p in series.points:
        height = (COUNT_BOTTOM - COUNT_TOP) * p.evaluations / most
        x = _x(p.day, since, until)
        tip = f"{p.day}: {p.evaluations} evaluations, {p.scored} scored"
        parts.append(
            f'<rect x="{x - width / 2:.1f}" y="{COUNT_BOTTOM - height:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" fill="#8c959f" class="count"><title>{escape(tip)}</title>'
            "</rect>"
        )
        if _slot(since, until) >= 22:  # room for the number above its bar
            parts.append(
                f'<text x="{x:.1f}" y="{COUNT_BOTTOM - height - 3:.1f}" '
                f'text-anchor="middle" class="count">{p.evaluations}</text>'
            )
    return parts


def _threshold(series: Series) -> list[str]:
    if series.threshold is None or not 0.0 <= series.threshold <= 1.0:
        return []
    y = _y(series.threshold)
    return [
        f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{THRESHOLD}" '
        'stroke-width="1.5" stroke-dasharray="6 4" class="threshold"/>'
        f'<text x="{W - RIGHT}" y="{max(TOP + 10, y - 5):.1f}" text-anchor="end" '
        f'style="fill:{THRESHOLD}">pass ≥ {series.threshold:g}</text>'
    ]


def chart_svg(series: Series, since: dt.date, until: dt.date) -> str:
    """Daily mean (line and dots) with the p10..p90 band on a 0..1 axis, the pass threshold,
    the daily counts as bars, and the dates along the bottom, over the whole period."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 {W} {H}" '
        f'role="img" aria-label="{escape(series.metric)} over time">',
        f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
        *_axes(since, until),
    ]
    band = [p for p in series.points if p.p10 is not None and p.p90 is not None]
    if len(band) > 1:
        upper = [f"{_x(p.day, since, until):.1f},{_y(p.p90 or 0):.1f}" for p in band]
        lower = [f"{_x(p.day, since, until):.1f},{_y(p.p10 or 0):.1f}" for p in reversed(band)]
        parts.append(
            f'<polygon points="{" ".join(upper + lower)}" fill="#0969da" fill-opacity="0.15"/>'
        )
    parts += _threshold(series)
    means = [p for p in series.points if p.mean is not None]
    if len(means) > 1:
        pts = " ".join(f"{_x(p.day, since, until):.1f},{_y(p.mean or 0):.1f}" for p in means)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#0969da" stroke-width="2"/>')
    for p in means:
        tip = f"{p.day}: mean {p.mean:.3f} over {p.scored} scored"
        parts.append(
            f'<circle cx="{_x(p.day, since, until):.1f}" cy="{_y(p.mean or 0):.1f}" r="3.5" '
            f'fill="#0969da"><title>{escape(tip)}</title></circle>'
        )
    parts += _counts(series, since, until)
    parts.append("</svg>")
    return "".join(parts)


def _num(value: float | None, percent: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value * 100:.1f}%" if percent else f"{value:.3f}"


def render_html(report: Report, *, title: str = "toolscore report") -> str:
    period = f"{report.since.isoformat()} to {report.until.isoformat()}"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">Current scores of conversations from {period} (UTC days). '
        "Pass means score ≥ the metric's threshold.</p>",
    ]
    if not report.series:
        out.append("<p>No scored conversations in this period.</p>")
        return "\n".join([*out, *coverage_table(report), "</body></html>"])
    out.append(
        '<h2>Summary</h2><table id="summary"><thead><tr><th>Expectation</th>'
        '<th>Metric</th><th class="num">Evaluations</th><th class="num">Scored</th>'
        '<th class="num">Mean</th><th class="num">Pass rate</th><th>Trend</th>'
        "</tr></thead><tbody>"
    )
    for s in report.series:
        out.append(
            f"<tr><td>{escape(s.expectation_id)}</td><td>{escape(s.metric)}</td>"
            f'<td class="num">{s.evaluations}</td><td class="num">{s.scored}</td>'
            f'<td class="num">{_num(s.mean)}</td>'
            f'<td class="num">{_num(s.pass_rate, percent=True)}</td>'
            f"<td>{escape(trend_text(s.trend))}</td></tr>"
        )
    out.append("</tbody></table><h2>Score over time</h2>")
    out.append(
        '<p class="muted">Line: daily mean; band: 10th to 90th percentile; dashed: the pass '
        "threshold; bars: evaluations per day.</p>"
    )
    for s in report.series:
        out.append(
            f'<div class="chart"><h3>{escape(s.expectation_id)} · {escape(s.metric)}</h3>'
            f"{chart_svg(s, report.since, report.until)}</div>"
        )
    out += _tools_table(report.tools)
    out.append("<h2>Worst conversations</h2>")
    if not report.worst:
        out.append("<p>Every scored conversation passed.</p>")
    else:
        out.append(
            '<table id="worst"><thead><tr><th class="num">Score</th><th>Conversation</th>'
            "<th>Expectation · metric</th><th>Day</th><th>Explanation</th></tr></thead><tbody>"
        )
        for w in report.worst:
            if w.not_evaluated:
                score = '<span class="err">not_evaluated</span>'
            elif w.score is None:
                score = '<span class="err">error</span>'
            else:
                score = f'<span class="fail">{w.score:.3f}</span>'
            out.append(
                f'<tr><td class="num">{score}</td><td><code>{escape(w.conversation_id)}</code>'
                f'<br><span class="muted">trace {escape(w.trace_id)}</span></td>'
                f"<td>{escape(w.expectation_id)} · {escape(w.metric)}</td>"
                f'<td class="day">{escape(w.day)}</td><td>{escape(w.explanation)}</td></tr>'
            )
        out.append("</tbody></table>")
    if report.warned_total:
        out.append(f"<h2>Conversations with warnings ({report.warned_total})</h2>")
        out.append("<p>Scores given, marked: their rebuilt calls may be wrong.</p><ul>")
        out += [
            f"<li><code>{escape(v.conversation_id)}</code> {escape(v.warning)}</li>"
            for v in report.warned
        ]
        out.append("</ul>")
    out += coverage_table(report)
    out.append("</body></html>")
    return "\n".join(out)


def coverage_table(report: Report) -> list[str]:
    """How much of the period's traffic found an expectation, per service and agent."""
    if not report.coverage:
        return []
    heads = ["Seen", "Matched", "Unmatched", "Share matched"]
    out = [
        "<h2>Coverage</h2>",
        '<p class="muted">Conversations active in the period, by service and agent.</p>',
        '<table id="coverage"><thead><tr><th>Service</th><th>Agent</th>'
        + "".join(f'<th class="num">{h}</th>' for h in heads)
        + "<th>Unmatched: why</th></tr></thead><tbody>",
    ]
    for c in report.coverage:
        share = f"{c.matched / c.seen:.0%}" if c.seen else "-"
        why = "; ".join(f"{n}× {reason}" for reason, n in c.reasons)
        out.append(
            f"<tr><td>{escape(c.service)}</td><td>{escape(c.agent)}</td>"
            + "".join(f'<td class="num">{n}</td>' for n in (c.seen, c.matched, c.unmatched))
            + f'<td class="num">{share}</td><td>{escape(why)}</td></tr>'
        )
    out.append("</tbody></table>")
    return out


def _tools_table(tools: tuple[ToolScore, ...]) -> list[str]:
    """The tools most often wrong (from the ``tool_scores`` view), with their wrong arguments."""
    out = ["<h2>Tools most often wrong</h2>"]
    if not tools:
        return [*out, "<p>No tool lost points in this period.</p>"]
    heads = ["Expected", "Called", "Wrong", "Missing", "Extra", "Misplaced", "Points lost"]
    out.append(
        '<table id="tools"><thead><tr><th>Tool</th><th>Metric</th>'
        + "".join(f'<th class="num">{h}</th>' for h in heads)
        + "<th>Wrong arguments</th></tr></thead><tbody>"
    )
    for t in tools:
        counts = (t.expected, t.called, t.wrong, t.missing, t.extra, t.misplaced)
        arguments = ", ".join(f"{a} ×{n}" for a, n in t.wrong_arguments)
        out.append(
            f"<tr><td><code>{escape(t.tool)}</code></td><td>{escape(t.metric)}</td>"
            + "".join(f'<td class="num">{n}</td>' for n in counts)
            + f'<td class="num">{t.points_lost:.2f}</td><td>{escape(arguments)}</td></tr>'
        )
    out.append("</tbody></table>")
    return out

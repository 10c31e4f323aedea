"""The HTML report: one self-contained page (inline CSS and SVG; no script, font or image URL).

Every untrusted text (ids, metric names, explanations) goes through :func:`escape`: HTML-escaped,
and its control and bidi characters shown escaped as on the terminal, so a bidi override cannot
reorder what the reader sees.
"""

from __future__ import annotations

import datetime as dt
from html import escape as _html_escape

from toolscore.collector.report.data import Report, Series
from toolscore.collector.report.text import trend_text
from toolscore.collector.safe_text import terminal_safe

W, H = 640, 220


def escape(value: str) -> str:
    """``value`` as HTML text or attribute value, its control and bidi characters visible."""
    return _html_escape(terminal_safe(value), quote=True)


LEFT, RIGHT, TOP, BOTTOM = 44, 16, 14, 30

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 24px; color: #1f2328;
  background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.muted { color: #59636e; font-size: 13px; }
table { border-collapse: collapse; font-size: 14px; margin-top: 8px; }
th, td { padding: 5px 10px; border-bottom: 1px solid #d1d9e0; text-align: left;
  vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.chart { display: inline-block; margin: 8px 24px 8px 0; }
.chart h3 { font-size: 14px; margin: 0 0 2px; }
svg text { font-size: 11px; fill: #59636e; }
.fail { color: #cf222e; } .pass { color: #1a7f37; } .err { color: #9a6700; }
code { font-size: 12px; } td.day { white-space: nowrap; }
"""


def _x(day: str, since: dt.date, until: dt.date) -> float:
    span = max(1, (until - since).days)
    offset = (dt.date.fromisoformat(day) - since).days
    return LEFT + (W - LEFT - RIGHT) * offset / span


def _y(value: float) -> float:
    return TOP + (H - TOP - BOTTOM) * (1.0 - value)


def chart_svg(series: Series, since: dt.date, until: dt.date) -> str:
    """Daily mean (line and dots) with the p10..p90 band, on a 0..1 axis over the period."""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'viewBox="0 0 {W} {H}" role="img" aria-label="{escape(series.metric)} over time">',
        f'<rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _y(tick)
        parts.append(
            f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d1d9e0"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>'
        )
    for label, day in ((since.isoformat(), since), (until.isoformat(), until)):
        x = _x(day.isoformat(), since, until)
        anchor = "start" if day == since else "end"
        parts.append(f'<text x="{x:.1f}" y="{H - 8}" text-anchor="{anchor}">{label}</text>')
    band = [p for p in series.points if p.p10 is not None and p.p90 is not None]
    if len(band) > 1:
        upper = [f"{_x(p.day, since, until):.1f},{_y(p.p90 or 0):.1f}" for p in band]
        lower = [f"{_x(p.day, since, until):.1f},{_y(p.p10 or 0):.1f}" for p in reversed(band)]
        parts.append(
            f'<polygon points="{" ".join(upper + lower)}" fill="#0969da" fill-opacity="0.15"/>'
        )
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
        out.append("<p>No scored conversations in this period.</p></body></html>")
        return "\n".join(out)
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
    out.append('<p class="muted">Line: daily mean; band: 10th to 90th percentile.</p>')
    for s in report.series:
        out.append(
            f'<div class="chart"><h3>{escape(s.expectation_id)} · {escape(s.metric)}</h3>'
            f"{chart_svg(s, report.since, report.until)}</div>"
        )
    out.append("<h2>Worst conversations</h2>")
    if not report.worst:
        out.append("<p>Every scored conversation passed.</p>")
    else:
        out.append(
            '<table id="worst"><thead><tr><th class="num">Score</th><th>Conversation</th>'
            "<th>Expectation · metric</th><th>Day</th><th>Explanation</th></tr></thead><tbody>"
        )
        for w in report.worst:
            if w.score is None:
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
    out.append("</body></html>")
    return "\n".join(out)

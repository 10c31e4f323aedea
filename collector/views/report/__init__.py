"""``toolscore report``: the score history as a terminal summary and a self-contained HTML page.

:func:`load_report` reads the SQL views (``daily_scores``, ``current_scores``) into a
:class:`Report`; :func:`render_text` and :func:`render_html` present it.
"""

from __future__ import annotations

from toolscore.collector.views.report.data import (
    DailyPoint,
    Report,
    Series,
    WorstConversation,
    load_report,
)
from toolscore.collector.views.report.html import render_html
from toolscore.collector.views.report.text import render_text

__all__ = [
    "DailyPoint",
    "Report",
    "Series",
    "WorstConversation",
    "load_report",
    "render_html",
    "render_text",
]

"""Plain-text tables for the terminal (no dependency, stable output that scripts can diff).

Cells are untrusted (span-derived): :func:`render_table` escapes their control characters
(``toolscore.collector.views.safe_text``) before measuring them, so a cell can neither move the
cursor
nor break the table's lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from toolscore.collector.views.safe_text import json_safe, terminal_safe

ELLIPSIS = "…"


def clip(text: str, width: int) -> str:
    """``text`` on one line, at most ``width`` characters (an ellipsis marks the cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + ELLIPSIS


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], max_width: int = 48) -> str:
    """Columns left-aligned and padded to their widest cell, a dashed rule under the header."""
    cells = [[clip(terminal_safe(c), max_width) for c in row] for row in rows]
    headers = [terminal_safe(h) for h in headers]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def format_time(value: datetime | None) -> str:
    """UTC, to the second: ``2026-11-30 05:47:58Z``."""
    if value is None:
        return "-"
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def format_value(value: Any) -> str:
    """A JSON value as compact JSON (strings quoted, so ``"1"`` and ``1`` stay distinct; control
    characters as JSON escapes)."""
    return json_safe(value, separators=(", ", ": "))


def format_call(name: Any, args: Any) -> str:
    """``get_weather(city="Paris", days=3)``."""
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={format_value(v)}" for k, v in args.items())
    elif args is None:
        inner = ""
    else:
        inner = format_value(args)
    return f"{name}({inner})"


def format_score(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"

"""The evaluations ``toolscore export`` writes: every revision's rows (or only the current
ones) with their pass threshold and label, in id order, as JSON-able dicts.

The use case of ``collector/commands/export.py``, which parses the flags and writes the rows
as CSV or JSON lines.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

# Column order of the CSV and key order of each JSON line.
FIELDS = (
    "id",
    "conversation_id",
    "revision",
    "is_current",
    "created_at",
    "expectation_id",
    "expectation_version",
    "metric",
    "metric_type",
    "score",
    "label",
    "threshold",
    "error",
    "predicted_count",
    "expected_count",
    "trace_id",
    "root_span_id",
    "metric_config",
    "details",
)


def evaluation_rows(
    conn: Any, *, since: dt.date | None, expectation: str | None, current_only: bool
) -> Iterator[dict[str, Any]]:
    """Evaluations in id order, as JSON-able dicts with the FIELDS keys."""
    from toolscore.collector.export.attributes import pass_label, threshold_for
    from toolscore.storage.history.evaluations import history
    from toolscore.storage.history.outbox import load_thresholds

    thresholds = load_thresholds(conn)
    start = dt.datetime.combine(since, dt.time(), dt.UTC) if since is not None else None
    rows = history(conn, since=start, expectation_id=expectation, current_only=current_only)
    for r in rows:
        threshold = threshold_for(r["metric"], r["metric_type"], thresholds)
        row = {k: r[k] for k in FIELDS if k in r}
        row["is_current"] = bool(r["is_current"])
        row["created_at"] = r["created_at"].isoformat()
        row["threshold"] = threshold
        row["label"] = pass_label(r["score"], threshold, r.get("details"))
        yield {k: row[k] for k in FIELDS}

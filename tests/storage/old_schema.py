"""Writing telemetry the way versions before migration 0014 stored it (no trace numbers), to
test that migrations convert such databases."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine

from toolscore.storage.plumbing.dialect import (
    insert_ignore_duplicates,
    insert_tuples_ignore_duplicates,
)
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.row_encode import (
    SPAN_COLUMNS,
    SPAN_JSON_COLUMNS,
    log_row,
    span_values,
)
from toolscore.storage.telemetry.spans import log_records_table, spans_table


def store_unnumbered(
    engine: Engine, spans: Sequence[SpanRecord], logs: Sequence[LogRecordData], at_ns: int
) -> None:
    """Store spans and log records in a database at a revision before 0014."""
    cache: dict[int, str] = {}
    with engine.begin() as conn:
        rows = [span_values(s, at_ns, cache) for s in spans]
        insert_tuples_ignore_duplicates(
            conn, spans_table, SPAN_COLUMNS, rows, (), SPAN_JSON_COLUMNS
        )
        insert_ignore_duplicates(conn, log_records_table, [log_row(r, at_ns) for r in logs])

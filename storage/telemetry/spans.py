"""Tables ``spans`` and ``log_records``, and the exact round trip SpanRecord/LogRecordData <-> rows.

Attribute values are stored as JSON. JSON cannot hold every OTLP value as is, so three kinds are
tagged with a one-key object (and untagged on load, so ``load_spans`` returns what was received):
bytes -> ``{"$bytes": base64}``, non-finite doubles -> ``{"$float": "NaN" | "Infinity" |
"-Infinity"}``, strings containing NUL (PostgreSQL JSONB and TEXT reject it) ->
``{"$str": base64 of UTF-8}``. Long strings of span attributes, events and links are stored as
references to pieces kept once per day (``storage.telemetry.contents``, table ``span_contents``:
``storage.telemetry.content_store``), resolved by :func:`load_spans`, and so is a span's
resource attributes' JSON as a whole (``row_encode._resource_json``); on SQLite, the other
strings of COMPRESS_AT characters or more are stored compressed
(``storage.telemetry.compressed``). Plain text columns replace NUL with U+FFFD.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    Connection,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    select,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64, JsonType
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import (
    insert_ignore_duplicates,
    insert_tuples_ignore_duplicates,
    json_text,
)
from toolscore.storage.plumbing.row_lists import each_id
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.compressed import compresses_values
from toolscore.storage.telemetry.content_store import fetch_contents, insert_contents
from toolscore.storage.telemetry.contents import TAG as REF_TAG
from toolscore.storage.telemetry.contents import Key, Reference, references
from toolscore.storage.telemetry.row_decode import (
    SPAN_READ_COLUMNS,
    attributes_from_json,
    decode_spans,
    from_json_value,
    resource_from_json,
)
from toolscore.storage.telemetry.row_encode import (
    KEYED_SPAN_COLUMNS,
    SPAN_JSON_COLUMNS,
    TelemetryBatch,
    dumps,
    prepare_telemetry,
)
from toolscore.storage.telemetry.traces import number_traces, traces_table


class Span(Base):
    __tablename__ = "spans"

    # the key is (trace_seq, span_id): storage/telemetry/traces.py says why
    trace_id: Mapped[str] = mapped_column(String(32), nullable=False)
    span_id: Mapped[str] = mapped_column(String(16), nullable=False)
    parent_span_id: Mapped[str | None] = mapped_column(String(16), nullable=True)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    kind: Mapped[int] = mapped_column(Integer, nullable=False)
    start_ns: Mapped[int] = mapped_column(Int64, nullable=False)
    end_ns: Mapped[int] = mapped_column(Int64, nullable=False)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False)
    status_message: Mapped[str] = mapped_column(Text, nullable=False)
    attributes: Mapped[Any] = mapped_column(JsonType, nullable=False)
    resource_attributes: Mapped[Any] = mapped_column(JsonType, nullable=False)
    scope_name: Mapped[str] = mapped_column(Text, nullable=False)
    scope_version: Mapped[str] = mapped_column(Text, nullable=False)
    events: Mapped[Any] = mapped_column(JsonType, nullable=False)
    links: Mapped[Any] = mapped_column(JsonType, nullable=False)
    received_at_ns: Mapped[int] = mapped_column(Int64, nullable=False)
    trace_seq: Mapped[int] = mapped_column(Int64, nullable=False)

    __table_args__ = (
        PrimaryKeyConstraint("trace_seq", "span_id", name="pk_spans"),
        # SQLite only (migration 0021): finds a day's spans when retention sweeps that day's
        # stored pieces (storage/telemetry/content_store.py); PostgreSQL has the day partition
        Index("ix_spans_start_ns", "start_ns"),
    )


class LogRecord(Base):
    __tablename__ = "log_records"
    __table_args__ = (Index("ix_log_records_trace_id", "trace_id"),)

    id: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    # sha256 of the record's content: a resent batch does not store its log records twice
    record_hash: Mapped[str] = mapped_column(String(64), nullable=False, unique=True)
    trace_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    span_id: Mapped[str | None] = mapped_column(String(16), nullable=True)
    time_ns: Mapped[int] = mapped_column(Int64, nullable=False)
    observed_time_ns: Mapped[int] = mapped_column(Int64, nullable=False)
    severity_number: Mapped[int] = mapped_column(Integer, nullable=False)
    severity_text: Mapped[str] = mapped_column(Text, nullable=False)
    event_name: Mapped[str] = mapped_column(Text, nullable=False)
    body: Mapped[Any] = mapped_column(JsonType, nullable=True)
    attributes: Mapped[Any] = mapped_column(JsonType, nullable=False)
    resource_attributes: Mapped[Any] = mapped_column(JsonType, nullable=False)
    scope_name: Mapped[str] = mapped_column(Text, nullable=False)
    scope_version: Mapped[str] = mapped_column(Text, nullable=False)
    received_at_ns: Mapped[int] = mapped_column(Int64, nullable=False)


spans_table = cast(Table, Span.__table__)
log_records_table = cast(Table, LogRecord.__table__)


def store_telemetry(conn: Connection, batch: TelemetryBatch) -> frozenset[str]:
    """Insert an ingest batch; rows already stored (a resend) are skipped (``ON CONFLICT DO
    NOTHING``; COPY on PostgreSQL). The spans' traces are numbered first
    (storage/telemetry/traces.py), under locks held until the caller commits.
    Returns the traces this transaction numbered (``Numbered.new``)."""
    span_rows = batch.span_rows
    numbered = number_traces(conn, {row[0] for row in span_rows})
    insert_contents(conn, batch.contents.rows)  # before the spans that refer to them
    insert_keyed_spans(conn, keyed_span_rows(span_rows, numbered.numbers))
    insert_ignore_duplicates(conn, log_records_table, batch.log_rows)
    return numbered.new


def keyed_span_rows(
    span_rows: Sequence[tuple[Any, ...]], numbers: Mapping[str, int]
) -> list[tuple[Any, ...]]:
    """``span_rows`` (of :func:`span_values`) with their trace's number appended (of
    :func:`toolscore.storage.telemetry.traces.number_traces`): rows of KEYED_SPAN_COLUMNS."""
    return [(*row, numbers[row[0]]) for row in span_rows]


def insert_keyed_spans(conn: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert rows of :func:`keyed_span_rows`, skipping those already stored."""
    # No conflict target: on partitioned PostgreSQL tables the unique keys also hold the
    # partition key (storage/telemetry/partitions.py); each table has one unique key besides log
    # ids.
    insert_tuples_ignore_duplicates(
        conn, spans_table, KEYED_SPAN_COLUMNS, rows, (), SPAN_JSON_COLUMNS
    )


def store_spans(
    conn: Connection, spans: Sequence[SpanRecord], received_at_ns: int
) -> frozenset[str]:
    """Store ``spans`` as ingest does (tests and tools that write spans directly); returns
    what :func:`store_telemetry` returns."""
    batch = prepare_telemetry(spans, (), received_at_ns, compresses_values(conn.dialect))
    return store_telemetry(conn, batch)


def log_from_row(row: Mapping[Any, Any]) -> LogRecordData:
    return LogRecordData(
        time_ns=row["time_ns"],
        observed_time_ns=row["observed_time_ns"],
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        severity_number=row["severity_number"],
        severity_text=row["severity_text"],
        event_name=row["event_name"],
        body=from_json_value(row["body"]),
        attributes=attributes_from_json(row["attributes"]),
        resource_attributes=attributes_from_json(row["resource_attributes"]),
        scope_name=row["scope_name"],
        scope_version=row["scope_version"],
    )


# --- reads -----------------------------------------------------------------------------------


# The reads scoring runs every round, built once with bound parameters (building a statement
# costs more than running it on a round's few traces).
@cache
def _spans_of(dialect: Dialect) -> Any:
    columns = [
        json_text(spans_table.c[name]) if name in SPAN_JSON_COLUMNS else spans_table.c[name]
        for name in SPAN_READ_COLUMNS
    ]
    t = traces_table.c
    query = select(*columns, spans_table.c.received_at_ns).select_from(
        traces_table.join(spans_table, spans_table.c.trace_seq == t.seq)
    )
    return each_id(dialect, query, t.trace_id)


@cache
def _logs_of(dialect: Dialect) -> Any:
    return each_id(dialect, select(log_records_table), log_records_table.c.trace_id)


def load_spans(
    conn: Connection,
    trace_ids: Sequence[str],
    after_ns: Mapping[str, int] | None = None,
    *,
    batch_rows: int | None = None,
    tally: list[int] | None = None,
) -> list[SpanRecord]:
    """Every stored span of ``trace_ids``, ordered by trace, start time, then span id.

    ``after_ns`` (trace id -> Unix ns): of those traces, only spans received after that time
    (a pruned conversation's mark, storage/retention/spans.py). ``batch_rows``: rows are
    streamed from the database that many at a time and decoded as they come (a huge
    conversation: only one batch of raw rows in memory, and no long pause between statements
    of the transaction); otherwise each chunk of traces is fetched whole (the scoring hot
    path: one driver call per chunk). ``tally[0]``: the characters read are added to it
    (``row_decode.decode_spans``)."""
    out: list[SpanRecord] = []
    resources: dict[str, Any] = {}
    texts: dict[Key, str] = {}

    def fetch(refs: set[Reference]) -> None:
        fetch_contents(conn, refs, texts)

    for chunk in chunks(dict.fromkeys(trace_ids)):
        parts: Iterable[Sequence[Any]]
        if batch_rows is None:
            parts = [conn.execute(_spans_of(conn.dialect), {"ids": chunk}).fetchall()]
        else:
            streamed = conn.execution_options(yield_per=batch_rows)
            parts = streamed.execute(_spans_of(conn.dialect), {"ids": chunk}).partitions()
        for rows in parts:
            if after_ns:
                rows = [r for r in rows if r[-1] > after_ns.get(r[0], -1)]
            out.extend(decode_spans(rows, resources, texts, fetch, tally))
    out.sort(key=lambda s: (s.trace_id, s.start_ns, s.span_id))
    return out


def load_resource(conn: Connection, value: Any) -> dict[str, Any]:
    """Resource attributes from the decoded JSON of a ``resource_attributes`` column (for a
    read outside :func:`load_spans`), the piece a reference names fetched."""
    texts: dict[Key, str] = {}
    if isinstance(value, dict) and isinstance(value.get(REF_TAG), str):
        fetch_contents(conn, references([dumps({REF_TAG: value[REF_TAG]})]), texts)
    return resource_from_json(value, texts)


def load_logs(
    conn: Connection, trace_ids: Sequence[str], after_ns: Mapping[str, int] | None = None
) -> list[LogRecordData]:
    """Every stored log record of ``trace_ids``, in time order (then arrival order);
    ``after_ns`` as for :func:`load_spans`."""
    rows: list[tuple[int, int, LogRecordData]] = []
    after = after_ns or {}
    for chunk in chunks(dict.fromkeys(trace_ids)):
        rows.extend(
            (r["time_ns"], r["id"], log_from_row(r))
            for r in conn.execute(_logs_of(conn.dialect), {"ids": chunk}).mappings()
            if r["received_at_ns"] > after.get(r["trace_id"], -1)
        )
    rows.sort(key=lambda t: (t[0], t[1]))
    return [r[2] for r in rows]

"""Tables ``spans`` and ``log_records``, and the exact round trip SpanRecord/LogRecordData <-> rows.

Attribute values are stored as JSON. JSON cannot hold every OTLP value as is, so three kinds are
tagged with a one-key object (and untagged on load, so ``load_spans`` returns what was received):
bytes -> ``{"$bytes": base64}``, non-finite doubles -> ``{"$float": "NaN" | "Infinity" |
"-Infinity"}``, strings containing NUL (PostgreSQL JSONB and TEXT reject it) ->
``{"$str": base64 of UTF-8}``. Plain text columns replace NUL with U+FFFD.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any, cast

import orjson
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
from toolscore.storage.records import LogRecordData, SpanEvent, SpanLink, SpanRecord
from toolscore.storage.telemetry.row_decode import (
    SPAN_READ_COLUMNS,
    attributes_from_json,
    decode_spans,
    from_json_value,
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

    __table_args__ = (PrimaryKeyConstraint("trace_seq", "span_id", name="pk_spans"),)


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


# --- JSON-safe values ------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def to_json_value(value: Any) -> Any:
    """An attribute value as JSON-storable data (tags bytes, NaN/inf and NUL-bearing strings)."""
    if isinstance(value, str):
        return {"$str": _b64(value.encode("utf-8"))} if "\x00" in value else value
    if isinstance(value, bool | int) or value is None:
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {
            "$float": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        }
    if isinstance(value, bytes):
        return {"$bytes": _b64(value)}
    if isinstance(value, Mapping):
        return {_safe_text(str(k)): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    return str(value)


def attributes_to_json(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attributes`` as JSON-storable data (the same object when nothing needs tagging)."""
    # Fast path: the usual attribute set (strings, ints, bools, finite floats) needs no copy.
    for key, value in attributes.items():
        if "\x00" in key:
            break
        kind = type(value)
        if kind is str:
            if "\x00" in value:
                break
        elif kind is int or kind is bool:
            continue
        elif kind is not float or value - value != 0.0:  # NaN and infinities fail this
            break
    else:
        return attributes
    return {_safe_text(k): to_json_value(v) for k, v in attributes.items()}


def _safe_text(text: str) -> str:
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


# --- rows ------------------------------------------------------------------------------------


def span_row(span: SpanRecord, received_at_ns: int) -> dict[str, Any]:
    """The ``spans`` row for ``span`` (column name -> value)."""
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": _safe_text(span.name),
        "kind": span.kind,
        "start_ns": span.start_ns,
        "end_ns": span.end_ns,
        "status_code": span.status_code,
        "status_message": _safe_text(span.status_message),
        "attributes": attributes_to_json(span.attributes),
        "resource_attributes": attributes_to_json(span.resource_attributes),
        "scope_name": _safe_text(span.scope_name),
        "scope_version": _safe_text(span.scope_version),
        "events": _events_json(span.events),
        "links": _links_json(span.links),
        "received_at_ns": received_at_ns,
    }


SPAN_COLUMNS: tuple[str, ...] = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns",
    "status_code", "status_message", "attributes", "resource_attributes", "scope_name",
    "scope_version", "events", "links", "received_at_ns",
)  # fmt: skip
KEYED_SPAN_COLUMNS = (*SPAN_COLUMNS, "trace_seq")  # what store_telemetry inserts
SPAN_JSON_COLUMNS = frozenset({"attributes", "resource_attributes", "events", "links"})


def dumps(value: Any) -> str:
    """JSON text of a JSON-storable value (see :func:`to_json_value`)."""
    return orjson.dumps(value).decode("utf-8")


def span_values(span: SpanRecord, received_at_ns: int, cache: dict[int, str]) -> tuple[Any, ...]:
    """The ``spans`` row for ``span`` as a tuple in SPAN_COLUMNS order, JSON already serialised
    (the ingest fast path). ``cache`` memoises JSON of shared resource attribute mappings; it
    must not outlive the spans it was used with."""
    resource = span.resource_attributes
    resource_json = cache.get(id(resource))
    if resource_json is None:
        resource_json = cache[id(resource)] = dumps(attributes_to_json(resource))
    return (
        span.trace_id,
        span.span_id,
        span.parent_span_id,
        _safe_text(span.name),
        span.kind,
        span.start_ns,
        span.end_ns,
        span.status_code,
        _safe_text(span.status_message),
        dumps(attributes_to_json(span.attributes)),
        resource_json,
        _safe_text(span.scope_name),
        _safe_text(span.scope_version),
        dumps(_events_json(span.events)) if span.events else "[]",
        dumps(_links_json(span.links)) if span.links else "[]",
        received_at_ns,
    )


def _events_json(events: Sequence[SpanEvent]) -> list[dict[str, Any]]:
    return [
        {
            "name": _safe_text(e.name),
            "time_ns": e.time_ns,
            "attributes": attributes_to_json(e.attributes),
        }
        for e in events
    ]


def _links_json(links: Sequence[SpanLink]) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": lk.trace_id,
            "span_id": lk.span_id,
            "attributes": attributes_to_json(lk.attributes),
        }
        for lk in links
    ]


def log_row(record: LogRecordData, received_at_ns: int) -> dict[str, Any]:
    """The ``log_records`` row for ``record``; ``record_hash`` identifies its content."""
    row: dict[str, Any] = {
        "trace_id": record.trace_id,
        "span_id": record.span_id,
        "time_ns": record.time_ns,
        "observed_time_ns": record.observed_time_ns,
        "severity_number": record.severity_number,
        "severity_text": _safe_text(record.severity_text),
        "event_name": _safe_text(record.event_name),
        "body": to_json_value(record.body),
        "attributes": attributes_to_json(record.attributes),
        "resource_attributes": attributes_to_json(record.resource_attributes),
        "scope_name": _safe_text(record.scope_name),
        "scope_version": _safe_text(record.scope_version),
    }
    digest = hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest()
    row["record_hash"] = digest
    row["received_at_ns"] = received_at_ns
    return row


def store_telemetry(
    conn: Connection, span_rows: Sequence[tuple[Any, ...]], log_rows: Sequence[Mapping[str, Any]]
) -> frozenset[str]:
    """Insert an ingest batch (rows of :func:`span_values` and :func:`log_row`); rows already
    stored (a resend) are skipped (``ON CONFLICT DO NOTHING``; COPY on PostgreSQL). The spans'
    traces are numbered first (storage/telemetry/traces.py), under locks held until the caller
    commits.
    Returns the traces this transaction numbered (``Numbered.new``)."""
    numbered = number_traces(conn, {row[0] for row in span_rows})
    insert_keyed_spans(conn, keyed_span_rows(span_rows, numbered.numbers))
    insert_ignore_duplicates(conn, log_records_table, log_rows)
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
    cache: dict[int, str] = {}
    return store_telemetry(conn, [span_values(s, received_at_ns, cache) for s in spans], ())


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
) -> list[SpanRecord]:
    """Every stored span of ``trace_ids``, ordered by trace, start time, then span id.

    ``after_ns`` (trace id -> Unix ns): of those traces, only spans received after that time
    (a pruned conversation's mark, storage/retention/spans.py). ``batch_rows``: rows are
    streamed from the database that many at a time and decoded as they come (a huge
    conversation: only one batch of raw rows in memory, and no long pause between statements
    of the transaction); otherwise each chunk of traces is fetched whole (the scoring hot
    path: one driver call per chunk)."""
    out: list[SpanRecord] = []
    resources: dict[str, Any] = {}
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
            out.extend(decode_spans(rows, resources))
    out.sort(key=lambda s: (s.trace_id, s.start_ns, s.span_id))
    return out


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

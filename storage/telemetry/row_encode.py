"""Decoded spans and log records to the rows of ``spans`` and ``log_records``: JSON-safe values
(bytes, NaN and NUL tagged, long strings packed on request; ``row_decode`` reads them back) and
the rows ingest inserts.

Pure: no SQL; ``spans.store_telemetry`` inserts what :func:`prepare_telemetry` builds.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolscore.storage.records import LogRecordData, SpanEvent, SpanLink, SpanRecord
from toolscore.storage.telemetry.compressed import COMPRESS_AT, pack
from toolscore.storage.telemetry.contents import (
    REF_AT,
    RESOURCE_REF_AT,
    ContentBatch,
    KnownContents,
    StoredContents,
    day_of,
)
from toolscore.storage.telemetry.contents import TAG as REF_TAG

Ref = Callable[[str], Any]  # a long string -> its stored reference (contents.ContentBatch.ref)

# --- JSON-safe values ------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def to_json_value(value: Any, compress: bool = False, ref: Ref | None = None) -> Any:
    """An attribute value as JSON-storable data (tags bytes, NaN/inf and NUL-bearing strings;
    with ``ref``, long strings become references to their stored pieces:
    ``storage.telemetry.contents``; else with ``compress``, packs them:
    ``storage.telemetry.compressed``)."""
    if isinstance(value, str):
        if ref is not None and len(value) >= REF_AT:
            return ref(value)
        if compress and len(value) >= COMPRESS_AT:
            return pack(value)
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
        return {_safe_text(str(k)): to_json_value(v, compress, ref) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v, compress, ref) for v in value]
    return str(value)


def attributes_to_json(
    attributes: Mapping[str, Any], compress: bool = False, ref: Ref | None = None
) -> Mapping[str, Any]:
    """``attributes`` as JSON-storable data (the same object when nothing needs tagging)."""
    # Fast path: the usual attribute set (strings, ints, bools, finite floats) needs no copy.
    long = min(REF_AT if ref is not None else 1 << 62, COMPRESS_AT if compress else 1 << 62)
    for key, value in attributes.items():
        if "\x00" in key:
            break
        kind = type(value)
        if kind is str:
            if len(value) >= long or "\x00" in value:  # a long value is not scanned for NUL
                break
        elif kind is int or kind is bool:
            continue
        elif kind is not float or value - value != 0.0:  # NaN and infinities fail this
            break
    else:
        return attributes
    return _converted(attributes, compress, ref, long)


def _converted(
    attributes: Mapping[str, Any], compress: bool, ref: Ref | None, long: int
) -> dict[str, Any]:
    # A span with a long message still has mostly short values: those are kept as they are.
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        kind = type(value)
        plain = kind is int or kind is bool or (kind is str and len(value) < long)
        if plain and "\x00" not in key and (kind is not str or "\x00" not in value):
            out[key] = value
        else:
            out[_safe_text(key)] = to_json_value(value, compress, ref)
    return out


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


def span_values(
    span: SpanRecord,
    received_at_ns: int,
    cache: dict[tuple[int, int], str],
    compress: bool = False,
    contents: ContentBatch | None = None,
) -> tuple[Any, ...]:
    """The ``spans`` row for ``span`` as a tuple in SPAN_COLUMNS order, JSON already serialised
    (the ingest fast path). ``contents``: long strings of its attributes, events and links become
    references to pieces it collects (``storage.telemetry.contents``), and so does its
    resource's JSON as a whole (:func:`_resource_json`); ``compress``: other long strings are
    packed. ``cache`` memoises the resource column of shared resource attribute mappings (by
    their id and day); it must not outlive the spans it was used with."""
    resource, day = span.resource_attributes, day_of(span.start_ns)
    resource_json = cache.get((id(resource), day))
    if resource_json is None:
        resource_json = _resource_json(resource, compress, contents, day)
        cache[(id(resource), day)] = resource_json
    ref = None if contents is None else contents.referrer(day)
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
        dumps(attributes_to_json(span.attributes, compress, ref)),
        resource_json,
        _safe_text(span.scope_name),
        _safe_text(span.scope_version),
        dumps(_events_json(span.events, compress, ref)) if span.events else "[]",
        dumps(_links_json(span.links, compress, ref)) if span.links else "[]",
        received_at_ns,
    )


def _resource_json(
    resource: Mapping[str, Any], compress: bool, contents: ContentBatch | None, day: int
) -> str:
    """The ``resource_attributes`` column: with ``contents``, a reference to the attributes'
    JSON stored as a piece when that JSON is RESOURCE_REF_AT characters or more (every span
    of a resource repeats it), or when its only key is the reference tag (else read back as
    a reference); otherwise the JSON itself."""
    if contents is None:
        return dumps(attributes_to_json(resource, compress))
    whole = dumps(attributes_to_json(resource))
    if len(whole) >= RESOURCE_REF_AT or (len(resource) == 1 and REF_TAG in resource):
        return dumps(contents.ref(whole, day, cut=False))
    return whole  # too short for any string to be packed


def _events_json(
    events: Sequence[SpanEvent], compress: bool = False, ref: Ref | None = None
) -> list[dict[str, Any]]:
    return [
        {
            "name": _safe_text(e.name),
            "time_ns": e.time_ns,
            "attributes": attributes_to_json(e.attributes, compress, ref),
        }
        for e in events
    ]


def _links_json(
    links: Sequence[SpanLink], compress: bool = False, ref: Ref | None = None
) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": lk.trace_id,
            "span_id": lk.span_id,
            "attributes": attributes_to_json(lk.attributes, compress, ref),
        }
        for lk in links
    ]


def log_row(record: LogRecordData, received_at_ns: int, compress: bool = False) -> dict[str, Any]:
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
    # hashed unpacked: the same record has the same hash whatever database or zstd version
    digest = hashlib.sha256(orjson.dumps(row, option=orjson.OPT_SORT_KEYS)).hexdigest()
    if compress:
        row["body"] = to_json_value(record.body, compress)
        row["attributes"] = attributes_to_json(record.attributes, compress)
        row["resource_attributes"] = attributes_to_json(record.resource_attributes, compress)
    row["record_hash"] = digest
    row["received_at_ns"] = received_at_ns
    return row


NO_CONTENTS = StoredContents()


@dataclass(frozen=True, slots=True)
class TelemetryBatch:
    """Decoded spans and log records as the rows :func:`store_telemetry` inserts, serialised
    by :func:`prepare_telemetry` before the transaction opens (so that it is not held open,
    with SQLite's write lock, while JSON is written and pieces compressed)."""

    span_rows: tuple[tuple[Any, ...], ...]  # of span_values
    log_rows: tuple[dict[str, Any], ...]  # of log_row, one per distinct record
    contents: StoredContents = NO_CONTENTS  # the pieces the span rows refer to


def prepare_telemetry(
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData],
    received_at_ns: int,
    compress: bool = False,
    known: KnownContents | None = None,
) -> TelemetryBatch:
    """The rows of ``spans`` and ``logs``, received at ``received_at_ns``; a log record sent
    twice in the batch is stored once. Long strings of spans become references to stored
    pieces (``storage.telemetry.contents``; ``known``: the pieces this writer stored lately).
    ``compress``: pack the other long strings, for a database that does not compress them
    itself (``storage.telemetry.compressed.compresses_values``)."""
    cache: dict[tuple[int, int], str] = {}
    contents = ContentBatch(received_at_ns, known)
    span_rows = tuple([span_values(s, received_at_ns, cache, compress, contents) for s in spans])
    rows = (log_row(x, received_at_ns, compress) for x in logs)
    log_rows = {r["record_hash"]: r for r in rows}
    stored = StoredContents(tuple(contents.rows()), tuple(contents.keys()))
    return TelemetryBatch(span_rows, tuple(log_rows.values()), stored)

"""``SpanRecord``s rebuilt from ``spans`` rows whose JSON columns were read as text.

The scoring hot path (``storage.telemetry.spans.load_spans``) reads ``attributes``,
``resource_attributes``, ``events`` and ``links`` as their stored JSON text
(``storage.plumbing.dialect.json_text``) and decodes them here, once per distinct text where texts
repeat:
one resource's attributes are shared by every span of a request (as ingest's decoding shares
them), and most spans have no events or links. Values decode exactly as the JSON columns do
(``storage.plumbing.jsoncodec.json_loads``), then are untagged (``storage.telemetry.spans``'s tags).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolscore.storage.plumbing.jsoncodec import json_loads
from toolscore.storage.records import SPAN_FIELDS, SPAN_SETTERS, SpanEvent, SpanLink, SpanRecord
from toolscore.storage.telemetry.compressed import TAG, unpack
from toolscore.storage.telemetry.contents import TAG as REF_TAG
from toolscore.storage.telemetry.contents import Key, resolve

# The columns a SpanRecord is rebuilt from, in :func:`decode_spans`'s row order (the columns
# carry the fields' names).
SPAN_READ_COLUMNS: tuple[str, ...] = SPAN_FIELDS

_TAGS = ("$bytes", "$float", "$str", TAG, REF_TAG)
_NO_TEXTS: Mapping[Key, str] = {}


def from_json_value(value: Any, texts: Mapping[Key, str] = _NO_TEXTS) -> Any:
    """Inverse of ``storage.telemetry.row_encode.to_json_value``; ``texts``: the stored pieces
    that references resolve to (``content_store.fetch_contents``)."""
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, inner),) = value.items()
            if key in _TAGS and isinstance(inner, str):
                if key == REF_TAG:
                    return resolve(inner, texts)
                if key == "$bytes":
                    return base64.b64decode(inner)
                if key == "$str":
                    return base64.b64decode(inner).decode("utf-8")
                if key == TAG:
                    return unpack(inner)
                return float(inner)
        return {k: from_json_value(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [from_json_value(v, texts) for v in value]
    return value


def attributes_from_json(value: Any, texts: Mapping[Key, str] = _NO_TEXTS) -> dict[str, Any]:
    """Decoded attributes (a mapping of JSON-storable values), untagged."""
    if not isinstance(value, dict):
        return {}
    # Fast path: scalar values (the usual case) carry no tags, so the decoded dict is the value.
    for v in value.values():
        if type(v) is dict or type(v) is list:
            return {k: from_json_value(v, texts) for k, v in value.items()}
    return value


def resource_from_json(value: Any, texts: Mapping[Key, str] = _NO_TEXTS) -> dict[str, Any]:
    """Decoded resource attributes: the column holds either their JSON or a reference to it
    stored as a piece (``row_encode._resource_json``)."""
    if isinstance(value, dict) and len(value) == 1:
        inner = value.get(REF_TAG)
        if isinstance(inner, str):
            value = json_loads(resolve(inner, texts))
    return attributes_from_json(value)


def decode_spans(
    rows: Iterable[Sequence[Any]],
    resources: dict[str, Any] | None = None,
    texts: Mapping[Key, str] = _NO_TEXTS,
) -> list[SpanRecord]:
    """One ``SpanRecord`` per row of :data:`SPAN_READ_COLUMNS` (JSON columns as text);
    ``resources`` (resource JSON -> decoded) is shared between calls when given; ``texts``:
    the stored pieces the rows refer to."""
    if resources is None:
        resources = {}
    out: list[SpanRecord] = []
    append = out.append
    for (
        trace_id,
        span_id,
        parent_span_id,
        name,
        kind,
        start_ns,
        end_ns,
        attributes,
        resource_text,
        scope_name,
        scope_version,
        status_code,
        status_message,
        events,
        links,
        *_,
    ) in rows:
        resource = resources.get(resource_text)
        if resource is None:
            resource = resource_from_json(json_loads(resource_text), texts)
            resources[resource_text] = resource
        # SpanRecord(...) without its frozen __init__ (storage.records.SPAN_SETTERS)
        span = new_span(SpanRecord)
        set_trace_id(span, trace_id)
        set_span_id(span, span_id)
        set_parent(span, parent_span_id)
        set_name(span, name)
        set_kind(span, kind)
        set_start(span, start_ns)
        set_end(span, end_ns)
        set_attributes(span, attributes_from_json(json_loads(attributes), texts))
        set_resource(span, resource)
        set_scope_name(span, scope_name)
        set_scope_version(span, scope_version)
        set_status_code(span, status_code)
        set_status_message(span, status_message)
        set_events(span, () if events == "[]" else _events(json_loads(events), texts))
        set_links(span, () if links == "[]" else _links(json_loads(links), texts))
        append(span)
    return out


new_span = object.__new__
(
    set_trace_id, set_span_id, set_parent, set_name, set_kind, set_start, set_end,
    set_attributes, set_resource, set_scope_name, set_scope_version, set_status_code,
    set_status_message, set_events, set_links,
) = SPAN_SETTERS  # fmt: skip


def _events(events: Any, texts: Mapping[Key, str]) -> tuple[SpanEvent, ...]:
    return tuple(
        SpanEvent(e["name"], e["time_ns"], attributes_from_json(e.get("attributes"), texts))
        for e in events or ()
    )


def _links(links: Any, texts: Mapping[Key, str]) -> tuple[SpanLink, ...]:
    return tuple(
        SpanLink(lk["trace_id"], lk["span_id"], attributes_from_json(lk.get("attributes"), texts))
        for lk in links or ()
    )

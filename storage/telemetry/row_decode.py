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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolscore.storage.plumbing.jsoncodec import json_loads
from toolscore.storage.records import SPAN_FIELDS, SPAN_SETTERS, SpanEvent, SpanLink, SpanRecord
from toolscore.storage.telemetry.compressed import TAG, unpack
from toolscore.storage.telemetry.contents import TAG as REF_TAG
from toolscore.storage.telemetry.contents import Key, Reference, referred, resolve, resolved_chars

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
            return {
                k: from_json_value(v, texts) if type(v) is dict or type(v) is list else v
                for k, v in value.items()
            }
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
    fetch: Callable[[set[Reference]], None] | None = None,
    tally: list[int] | None = None,
) -> list[SpanRecord]:
    """One ``SpanRecord`` per row of :data:`SPAN_READ_COLUMNS` (JSON columns as text);
    ``resources`` (resource JSON -> decoded) is shared between calls when given; ``texts``:
    the stored pieces the rows refer to, or, with ``fetch``, where it adds them: it is called
    once, with every piece the rows refer to, only when they refer to some. ``tally[0]``: the
    characters read are added to it (name, status message, the JSON of attributes, events and
    links, and the long strings their references stand for, once per reference)."""
    pending = _Pending()
    out, chars = _decode_rows(rows, {} if resources is None else resources, texts, pending)
    if pending.refs:  # one fetch for every piece of the rows
        if fetch is not None:
            fetch(pending.refs)
        chars += pending.resolve(texts, tally is not None)
    if tally is not None:
        tally[0] += chars
    return out


@dataclass(slots=True)
class _Pending:
    """What refers to pieces, decoded once every piece is in ``texts``: resources (their dicts
    already shared by their spans, filled in place) and spans' attributes, events, links."""

    refs: set[Reference] = field(default_factory=set)
    found: list[str] = field(default_factory=list)  # each reference, as often as it occurs
    fresh: list[tuple[dict[str, Any], Any]] = field(default_factory=list)
    late: list[tuple[SpanRecord, Any, Any, Any]] = field(default_factory=list)

    def resolve(self, texts: Mapping[Key, str], count: bool) -> int:
        """Decode what waited for its pieces; the characters its references stand for (when
        ``count``)."""
        for resource, value in self.fresh:
            resource.update(resource_from_json(value, texts))
        for span, values, evs, lks in self.late:
            _set_values(span, values, evs, lks, texts)
        return sum(resolved_chars(encoded, texts) for encoded in self.found) if count else 0


def _decode_rows(
    rows: Iterable[Sequence[Any]],
    resources: dict[str, Any],
    texts: Mapping[Key, str],
    pending: _Pending,
) -> tuple[list[SpanRecord], int]:
    """The spans of ``rows``, those referring to pieces left in ``pending``; characters read."""
    out: list[SpanRecord] = []
    append = out.append
    chars = 0
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
            resource = _resource(json_loads(resource_text), pending)
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
        set_resource(span, resource)
        set_scope_name(span, scope_name)
        set_scope_version(span, scope_version)
        set_status_code(span, status_code)
        set_status_message(span, status_message)
        chars += len(name) + len(status_message) + len(attributes) + len(events) + len(links)
        values = json_loads(attributes)
        # most spans: no event or link, attributes without containers (so without tags)
        flat = type(values) is dict and events == "[]" and links == "[]"
        if flat:
            for v in values.values():
                if type(v) is dict or type(v) is list:
                    flat = False
                    break
        if flat:
            set_attributes(span, values)
            set_events(span, ())
            set_links(span, ())
        else:
            _nested(span, values, events, links, texts, pending)
        append(span)
    return out, chars


def _nested(
    span: SpanRecord,
    values: Any,
    events: str,
    links: str,
    texts: Mapping[Key, str],
    pending: _Pending,
) -> None:
    """Set a span's attributes, events and links that hold containers (tags, references: a
    span whose values refer to pieces waits in ``pending``)."""
    evs = () if events == "[]" else json_loads(events)
    lks = () if links == "[]" else json_loads(links)
    refs, found = pending.refs, pending.found
    if _refers(values, refs, found) | _refers(evs, refs, found) | _refers(lks, refs, found):
        pending.late.append((span, values, evs, lks))
    else:
        _set_values(span, values, evs, lks, texts)


def _resource(value: Any, pending: _Pending) -> Any:
    """Decoded resource attributes; one stored as a piece is an empty dict until
    :func:`decode_spans` has fetched it (left in ``pending``)."""
    if isinstance(value, dict) and len(value) == 1:
        inner = value.get(REF_TAG)
        if isinstance(inner, str):
            pending.refs.update(referred(inner))
            resource: dict[str, Any] = {}
            pending.fresh.append((resource, value))
            return resource
    return resource_from_json(value)


def _refers(value: Any, refs: set[Reference], found: list[str]) -> bool:
    """Whether decoded JSON holds references to pieces (added to ``refs``, and each reference
    to ``found``)."""
    if isinstance(value, dict):
        if len(value) == 1:
            inner = value.get(REF_TAG)
            if isinstance(inner, str):
                refs.update(referred(inner))
                found.append(inner)
                return True
        values: Iterable[Any] = value.values()
    elif isinstance(value, list):
        values = value
    else:
        return False
    refers = False
    for v in values:
        if (type(v) is dict or type(v) is list) and _refers(v, refs, found):
            refers = True
    return refers


def _set_values(
    span: SpanRecord, values: Any, evs: Any, lks: Any, texts: Mapping[Key, str]
) -> None:
    set_attributes(span, attributes_from_json(values, texts))
    set_events(span, _events(evs, texts) if evs else ())
    set_links(span, _links(lks, texts) if lks else ())


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

"""The telemetry records the service decodes and stores, defined in :mod:`toolscore.storage.records`
(the layer that stores them owns them) and named here for the collector's modules."""

from toolscore.storage.records import (
    SPAN_KIND_NAMES,
    Attributes,
    LogRecordData,
    SpanEvent,
    SpanLink,
    SpanRecord,
)

__all__ = ["SPAN_KIND_NAMES", "Attributes", "LogRecordData", "SpanEvent", "SpanLink", "SpanRecord"]

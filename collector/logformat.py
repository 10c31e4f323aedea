"""How ``serve`` and its scoring processes log: ``text`` for people, ``json`` for log shippers.

``json`` writes one object per line: ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
``logger``, ``message``, then the record's structured fields (what a call passed as
``extra={...}``, e.g. the activity line's counts) and ``exception`` when there is one. ``text``
is the classic ``time LEVEL logger: message`` line. Both are set up by :func:`configure` on the
root logger, so every library's records go through the same formatter (docs/configuration.md).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any, TextIO

TEXT = "text"
JSON = "json"
FORMATS = (TEXT, JSON)
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

# Attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys()
) | {"message", "asctime", "taskName"}


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields a call attached to ``record`` with ``extra=``."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines inside values are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        time = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
        out: dict[str, Any] = {
            "time": time.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in fields_of(record).items():
            out.setdefault(key, value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    if log_format == JSON:
        return JsonFormatter()
    if log_format == TEXT:
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"log format must be one of {', '.join(FORMATS)}: {log_format!r}")


def configure(level: str, log_format: str, stream: TextIO | None = None) -> None:
    """Send every record at ``level`` and above to ``stream`` (stderr) in ``log_format``.

    Replaces the root logger's handlers (a scoring process inherits none: spawn starts afresh),
    and routes ``warnings.warn`` through logging so they are formatted alike.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per migration is noise

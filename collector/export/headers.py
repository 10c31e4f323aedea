"""OTLP export headers: parsed from ``k=v`` lists (URL-encoded), from a file, and merged.

Header values are secrets (API keys, bearer tokens): they never appear in an error message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote

from toolscore.collector.configuration import ConfigError

ENV_HEADERS_FILE = "TOOLSCORE_EXPORT_HEADERS_FILE"
MAX_HEADERS_FILE_BYTES = 64 * 1024

Headers = tuple[tuple[str, str], ...]
_HEADER_KEY = re.compile(r"^[a-z0-9!#$%&'*+.^_`|~-]+$")  # an HTTP token, lower-cased
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def parse_headers(text: str, source: str = "OTEL_EXPORTER_OTLP_HEADERS") -> Headers:
    """``k=v,k2=v2`` (OTLP header list, URL-encoded values) as pairs; keys are lower-cased.

    ``source`` names the flag or variable in errors, which never show a value.
    """
    pairs: list[tuple[str, str]] = []
    for n, item in enumerate(text.split(","), start=1):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        where = f"{source}, item {n}"
        pairs.append(_header(unquote(key.strip()), unquote(value.strip()), sep, where))
    return tuple(pairs)


def _header(key: str, value: str, sep: str, where: str) -> tuple[str, str]:
    """A validated (lower-cased key, value); errors name the key at most, never the value."""
    key = key.lower()
    if not sep or not key:
        raise ConfigError(f"invalid OTLP header ({where}): expected key=value")
    if not _HEADER_KEY.match(key):
        raise ConfigError(
            f"invalid OTLP header ({where}): the key must be a header name (letters, digits, -)"
        )
    if _CONTROL.search(value):
        raise ConfigError(
            f"invalid OTLP header {key!r} ({where}): the value holds control characters"
        )
    return key, value


def read_headers_file(path: str | Path) -> Headers:
    """Headers from a file of ``key=value`` lines (blank lines and ``# comments`` skipped).

    Values are taken literally (no URL decoding), trimmed; keys are lower-cased.
    """
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_HEADERS_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"export headers file {where}: {exc.strerror}") from None
    if len(data) > MAX_HEADERS_FILE_BYTES:
        raise ConfigError(f"export headers file {where}: larger than 64 KiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError(f"export headers file {where}: not UTF-8 text") from None
    pairs: list[tuple[str, str]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        pairs.append(_header(key.strip(), value.strip(), sep, f"{where}:{n}"))
    return tuple(pairs)


def merge_headers(*layers: Iterable[tuple[str, str]]) -> Headers:
    """Later layers win per key (first position kept); repeats within one layer are kept."""
    merged: dict[str, list[str]] = {}
    for layer in layers:
        this: dict[str, list[str]] = {}
        for key, value in layer:
            this.setdefault(key, []).append(value)
        merged.update(this)
    return tuple((key, value) for key, values in merged.items() for value in values)


def header_item(text: str) -> tuple[str, str]:
    """One ``key=value`` header (URL-encoded, as in ``OTEL_EXPORTER_OTLP_HEADERS``)."""
    key, sep, value = text.partition("=")
    key = unquote(key.strip()).lower()
    if not sep or not _HEADER_KEY.match(key):
        raise ValueError("expected KEY=VALUE with KEY a header name (letters, digits, -)")
    value = unquote(value.strip())
    if _CONTROL.search(value):
        raise ValueError(f"the value of header {key!r} holds control characters")
    return key, value

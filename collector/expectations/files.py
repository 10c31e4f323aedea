"""Reference-expectation files: YAML, JSON, or Ragas JSONL samples, read and validated.

A file holds expectations, each with an ``id``, ``reference_tool_calls`` (Ragas form: a list of
``{name, args}``, or groups of them as lists), and optionally ``user_input`` (a string or Ragas
messages), ``metrics`` (metric instance names of the scoring config) and ``match``
(``conversation_id``, ``user_input`` text or ``{regex}``, ``attributes``, ``priority``: checked by
storage/expectations/rules.py). YAML and JSON files are a list of
expectations or a mapping ``{expectations: [...]}``; JSONL files have one Ragas sample per line.

A file is accepted whole or not at all: every problem found is reported with where it is (line for
JSONL and YAML, path such as ``expectations[3].reference_tool_calls[0].name`` for all).
Reading records from the text is collector/expectations/reading.py; the checks are here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from toolscore.collector.expectations.reading import (
    MAX_PROBLEMS,
    Format,
    Problem,
    Reader,
    Record,
    RefsFileError,
    Segment,
    format_path,
)
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.expectations.rules import match_problems, regex_of
from toolscore.storage.expectations.templates import template_problems

FORMATS_BY_SUFFIX: Mapping[str, Format] = {
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
}
EXPECTATION_KEYS = ("id", "reference_tool_calls", "user_input", "metrics", "match")
# Other fields of a Ragas MultiTurnSample: allowed in a sample, not used here.
RAGAS_SAMPLE_KEYS = frozenset({"reference", "rubrics", "reference_topics"})
MESSAGE_TYPES = ("human", "ai", "tool")


def format_for(path: Path) -> Format:
    """The file format implied by ``path``'s suffix."""
    fmt = FORMATS_BY_SUFFIX.get(path.suffix.lower())
    if fmt is None:
        known = ", ".join(FORMATS_BY_SUFFIX)
        raise RefsFileError([Problem(str(path), f"unknown file type (expected one of {known})")])
    return fmt


def load_refs_file(
    path: Path, *, fmt: Format | None = None, metric_names: Collection[str] | None = None
) -> list[ExpectationData]:
    """Read and validate every expectation in ``path``, or raise ``RefsFileError``.

    ``metric_names``: the instance names of the scoring config; when given, an expectation naming
    any other metric is rejected.
    """
    chosen = fmt or format_for(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a BOM (Windows editors)
    except (OSError, UnicodeDecodeError) as exc:
        raise RefsFileError([Problem(str(path), f"cannot read: {exc}")]) from exc
    return parse_refs_text(text, chosen, source=str(path), metric_names=metric_names)


def parse_refs_text(
    text: str, fmt: Format, *, source: str = "<input>", metric_names: Collection[str] | None = None
) -> list[ExpectationData]:
    """Parse and validate expectations from ``text`` in format ``fmt``; see ``load_refs_file``."""
    checker = _Checker(source, metric_names)
    jsonl = fmt == "jsonl"
    records = checker.jsonl_records(text) if jsonl else checker.document_records(text, fmt)
    items = checker.expectations(records)
    if checker.problems:
        raise RefsFileError(checker.problems)
    if not items:
        raise RefsFileError([Problem(source, "no expectations in the file")])
    return items


class _Checker(Reader):
    def __init__(self, source: str, metric_names: Collection[str] | None) -> None:
        super().__init__(source)
        self.metric_names = metric_names

    # --- validation ---------------------------------------------------------------------------

    def expectations(self, records: list[Record]) -> list[ExpectationData]:
        items: list[ExpectationData] = []
        first_seen: dict[str, str] = {}
        for record in records:
            before = len(self.problems)
            item = self.expectation(record)
            if item is None or len(self.problems) > before:
                continue
            here = f"line {record.line}" if record.line else format_path(record.prefix)
            if item.id in first_seen:
                self.fail(
                    record,
                    (*record.prefix, "id"),
                    f"duplicate id {item.id!r} (first at {first_seen[item.id]})",
                )
                continue
            first_seen[item.id] = here
            items.append(item)
        return items

    def expectation(self, record: Record) -> ExpectationData | None:
        value, p = record.value, record.prefix
        if not isinstance(value, dict):
            self.fail(record, p, f"expected a mapping, got {_kind(value)}")
            return None
        for key in value:
            if key not in EXPECTATION_KEYS and key not in RAGAS_SAMPLE_KEYS:
                allowed = ", ".join(EXPECTATION_KEYS)
                self.fail(record, (*p, key), f"unknown key (expected {allowed})")
        ident = value.get("id")
        if "id" not in value:
            self.fail(record, (*p, "id"), "missing")
        elif not isinstance(ident, str) or not ident.strip():
            self.fail(record, (*p, "id"), _not_a_string(ident))
        if "reference_tool_calls" not in value:
            self.fail(record, (*p, "reference_tool_calls"), "missing")
            reference: list[Any] = []
        else:
            reference = self.reference(
                record, (*p, "reference_tool_calls"), value.get("reference_tool_calls")
            )
        user_input = value.get("user_input")
        if user_input is not None:
            self.user_input(record, (*p, "user_input"), user_input)
        metrics = self.metrics(record, (*p, "metrics"), value.get("metrics"))
        match = self.match(record, (*p, "match"), value.get("match"))
        if not isinstance(ident, str):
            return None
        item = ExpectationData(ident, reference, user_input, metrics, match)
        if regex_of(match) is not None:
            self.templates(record, p, item)
        return item

    def reference(self, record: Record, p: tuple[Segment, ...], value: Any) -> list[Any]:
        if not isinstance(value, list):
            self.fail(record, p, f"must be a list of tool calls, got {_kind(value)}")
            return []
        before = len(self.problems)
        calls: list[Any] = []
        for i, element in enumerate(value):
            if isinstance(element, list):
                if not element:
                    self.fail(record, (*p, i), "a group of calls must not be empty")
                group = []
                for j, inner in enumerate(element):
                    if isinstance(inner, list):
                        self.fail(record, (*p, i, j), "groups cannot be nested")
                    else:
                        group.append(self.call(record, (*p, i, j), inner))
                calls.append(group)
            else:
                calls.append(self.call(record, (*p, i), element))
        self.json_values(record, p, calls)
        if len(self.problems) == before:
            self.scorer_check(record, p, calls)
        return calls

    def call(self, record: Record, p: tuple[Segment, ...], value: Any) -> Any:
        if not isinstance(value, dict):
            self.fail(record, p, f"expected a tool call {{name, args}}, got {_kind(value)}")
            return value
        for key in value:
            if key not in ("name", "args", "optional"):
                hint = " (did you mean 'args'?)" if key in ("arguments", "arg", "params") else ""
                self.fail(record, (*p, key), f"unknown key in a tool call{hint}")
        name = value.get("name")
        if "name" not in value:
            self.fail(record, (*p, "name"), "missing")
        elif not isinstance(name, str) or not name.strip():
            self.fail(record, (*p, "name"), _not_a_string(name))
        args = value.get("args", {})
        if not isinstance(args, dict):
            self.fail(record, (*p, "args"), f"must be a mapping of arguments, got {_kind(args)}")
        # A missing "args" means a call without arguments, written out as Ragas expects.
        if "optional" in value:  # kept only when given, so that other calls stay as written
            return {"name": name, "args": args, "optional": value["optional"]}
        return {"name": name, "args": args}

    def scorer_check(self, record: Record, p: tuple[Segment, ...], calls: list[Any]) -> None:
        """The scorer's own parser has the last word on what a reference is."""
        from toolscore.scorer import parse_reference

        try:
            parse_reference(calls, format_path(p))
        except (ValueError, TypeError) as exc:
            # the scorer's message starts with the path we gave it
            line = record.line if record.line is not None else record.locate(p)
            where = self.source if line is None else f"{self.source}:{line}"
            if len(self.problems) < MAX_PROBLEMS:
                self.problems.append(Problem(where, str(exc)))

    def user_input(self, record: Record, p: tuple[Segment, ...], value: Any) -> None:
        if isinstance(value, str):
            return
        if not isinstance(value, list):
            self.fail(record, p, f"must be a string or a list of messages, got {_kind(value)}")
            return
        for i, message in enumerate(value):
            if not isinstance(message, dict):
                self.fail(record, (*p, i), f"expected a message mapping, got {_kind(message)}")
                continue
            if message.get("type") not in MESSAGE_TYPES:
                types = ", ".join(MESSAGE_TYPES)
                self.fail(record, (*p, i, "type"), f"must be one of {types}")
            if not isinstance(message.get("content", ""), str):
                self.fail(record, (*p, i, "content"), "must be a string")
            if "tool_calls" in message:
                tool_calls = message["tool_calls"]
                if not isinstance(tool_calls, list):
                    self.fail(record, (*p, i, "tool_calls"), "must be a list of tool calls")
                else:
                    for j, call in enumerate(tool_calls):
                        self.call(record, (*p, i, "tool_calls", j), call)
        self.json_values(record, p, value)

    def metrics(self, record: Record, p: tuple[Segment, ...], value: Any) -> tuple[str, ...] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not value:
            self.fail(record, p, "must be a non-empty list of metric instance names (omit for all)")
            return None
        for i, name in enumerate(value):
            if not isinstance(name, str) or not name.strip():
                self.fail(record, (*p, i), _not_a_string(name))
            elif value.index(name) != i:
                self.fail(record, (*p, i), f"{name!r} is listed twice")
            elif self.metric_names is not None and name not in self.metric_names:
                known = ", ".join(self.metric_names) or "none"
                self.fail(
                    record, (*p, i), f"unknown metric instance {name!r} (configured: {known})"
                )
        return tuple(v for v in value if isinstance(v, str))

    def match(self, record: Record, p: tuple[Segment, ...], value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        for where, message in match_problems(value):
            self.fail(record, (*p, *where), message)
        return dict(value) if isinstance(value, dict) else None

    def templates(self, record: Record, p: tuple[Segment, ...], item: ExpectationData) -> None:
        """Templates name the regex's groups with known filters; none without a regex."""
        try:
            groups = re.compile(regex_of(item.match) or "").groupindex
        except re.error:  # reported with the match
            return
        for where, message in template_problems(item.reference_tool_calls, groups):
            self.fail(record, (*p, "reference_tool_calls", *where), message)

    def json_values(self, record: Record, p: tuple[Segment, ...], value: Any) -> None:
        """Only what JSON can hold: YAML also has non-string keys, NaN, infinities, binary."""
        if isinstance(value, dict):
            for key, inner in value.items():
                if not isinstance(key, str):
                    self.fail(record, p, f"key {key!r} must be a string")
                else:
                    self.json_values(record, (*p, key), inner)
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                self.json_values(record, (*p, i), inner)
        elif isinstance(value, float) and not math.isfinite(value):
            self.fail(record, p, f"{value} cannot be stored as JSON")
        elif value is not None and not isinstance(value, str | int | float | bool):
            self.fail(record, p, f"unsupported value of type {type(value).__name__}")


def _not_a_string(value: Any) -> str:
    if isinstance(value, str):
        return "must not be blank"
    return f"must be a string, got {_kind(value)}"


def _kind(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), type(value).__name__)


__all__ = [
    "FORMATS_BY_SUFFIX",
    "Format",
    "Problem",
    "RefsFileError",
    "format_for",
    "load_refs_file",
    "parse_refs_text",
]

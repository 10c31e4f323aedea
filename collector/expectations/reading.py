"""Reading reference-expectation files into records, with where each value is written.

A record is one expectation: its value, its path in the document, and its line (JSONL) or a
way to find the line of any path inside it (YAML). Problems are collected, not raised, so that a
file's every problem is reported at once (collector/expectations/files.py validates the records).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

Format = Literal["yaml", "json", "jsonl"]
Segment = str | int
MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class Problem:
    where: str  # "file:line: path" or "file: path"
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class RefsFileError(ValueError):
    """The file was rejected; ``problems`` says what is wrong and where (at most 20)."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


@dataclass(frozen=True, slots=True)
class Record:
    value: Any
    prefix: tuple[Segment, ...]  # path of this expectation inside the document
    line: int | None  # JSONL line of the record
    locate: Callable[[tuple[Segment, ...]], int | None]  # YAML: line of a path


def no_lines(_path: tuple[Segment, ...]) -> int | None:
    return None


class Reader:
    """Reads a file's records and collects its problems (at most MAX_PROBLEMS)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[Problem] = []

    def fail(self, record: Record | None, path: tuple[Segment, ...], message: str) -> None:
        if len(self.problems) >= MAX_PROBLEMS:
            return
        line = None
        if record is not None:
            line = record.line if record.line is not None else record.locate(path)
        where = self.source if line is None else f"{self.source}:{line}"
        shown = format_path(path)
        self.problems.append(Problem(f"{where}: {shown}" if shown else where, message))

    def jsonl_records(self, text: str) -> list[Record]:
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                where = f"{self.source}:{number}"
                self.problems.append(
                    Problem(where, f"invalid JSON: {exc.msg} (column {exc.colno})")
                )
                continue
            records.append(Record(value, (), number, no_lines))
        return records

    def document_records(self, text: str, fmt: Format) -> list[Record]:
        locate: Callable[[tuple[Segment, ...]], int | None] = no_lines
        try:
            if fmt == "json":
                document = json.loads(text)
            else:
                loader = _Loader(text)
                try:
                    node = loader.get_single_node()
                    document = loader.construct_document(node) if node is not None else None
                finally:
                    loader.dispose()
                locate = _yaml_locator(node)
        except json.JSONDecodeError as exc:
            self.problems.append(Problem(f"{self.source}:{exc.lineno}", f"invalid JSON: {exc.msg}"))
            return []
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = self.source if mark is None else f"{self.source}:{mark.line + 1}"
            problem = getattr(exc, "problem", None) or str(exc)
            self.problems.append(Problem(where, f"invalid YAML: {problem}"))
            return []
        prefix: tuple[Segment, ...] = ()
        if isinstance(document, dict) and "expectations" in document:
            top = Record(document, (), None, locate)
            for key in document:
                if key != "expectations":
                    self.fail(top, (key,), "unknown top-level key (expected 'expectations')")
            document, prefix = document["expectations"], ("expectations",)
        if not isinstance(document, list):
            top = Record(document, (), None, locate)
            self.fail(
                top,
                prefix,
                "expected a list of expectations or a mapping with an 'expectations' list",
            )
            return []
        return [Record(v, (*prefix, i), None, locate) for i, v in enumerate(document)]


def format_path(path: tuple[Segment, ...]) -> str:
    out = ""
    for segment in path:
        if isinstance(segment, int):
            out += f"[{segment}]"
        else:
            out += f".{segment}" if out else segment
    return out


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps dates and times as the strings they were written as."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_locator(root: yaml.Node | None) -> Callable[[tuple[Segment, ...]], int | None]:
    """Maps a path to the 1-based line of the deepest YAML node found along it."""

    def locate(path: tuple[Segment, ...]) -> int | None:
        if root is None:
            return None
        node, line = root, root.start_mark.line + 1
        for segment in path:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if key_node.value == segment:
                        # the key's line: where "name:" is written, even for a nested value
                        child, line = value_node, key_node.start_mark.line + 1
                        break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(segment, int)
                and 0 <= segment < len(node.value)
            ):
                child = node.value[segment]
                line = child.start_mark.line + 1
            if child is None:
                break
            node = child
        return line

    return locate

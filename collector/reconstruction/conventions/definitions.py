"""Tool definitions sent to the model, used to recover parameter names lost on tool spans.

A traceloop ``@tool`` span called positionally (``{"args": ["Asia/Tokyo"], "kwargs": {}}``) or an
OpenInference LangChain single-argument tool (``input.value = "Asia/Tokyo"``) loses the parameter
names. The model-call spans list the tools' JSON schemas; their ``properties`` order gives the
names. Keys read: ``gen_ai.tool.definitions``, ``llm.tools.{i}.tool.json_schema``,
``llm.request.functions.{i}.name|parameters``, ``ai.prompt.tools``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import as_list, maybe_json, unflatten
from toolscore.collector.reconstruction.conventions.key_facts import TOOL_DEFINITION, key_facts
from toolscore.storage.records import SpanRecord


def parameter_names(spans: Sequence[SpanRecord]) -> dict[str, tuple[str, ...]]:
    """Map tool name → parameter names in schema order, from every definition in ``spans``."""
    names: dict[str, tuple[str, ...]] = {}
    # Each model call sends the tools again: a definition text seen before gives nothing new
    # (the first definition of a name wins), so it is not parsed again.
    seen: set[str] = set()  # definitions' texts
    listed: set[str] = set()  # texts of lists of definitions
    for span in spans:
        attrs = span.attributes
        if not key_facts(attrs) & TOOL_DEFINITION:
            continue  # most spans define no tools
        candidates: list[Any] = []
        candidates += _listed(attrs.get("gen_ai.tool.definitions"), listed)
        candidates += _listed(attrs.get("ai.prompt.tools"), listed)
        for tool in as_list(unflatten(attrs, "llm.tools")):
            if isinstance(tool, Mapping):
                inner = tool.get("tool", tool)
                if isinstance(inner, Mapping):
                    candidates.append(inner.get("json_schema", inner))
        candidates += as_list(unflatten(attrs, "llm.request.functions"))
        if "tool.json_schema" in attrs and attrs.get("tool.name"):  # an OpenInference TOOL span
            schema = {"name": attrs["tool.name"], "parameters": attrs["tool.json_schema"]}
            candidates.append(schema)
        for candidate in candidates:
            if type(candidate) is str:
                if candidate in seen:
                    continue
                seen.add(candidate)
            try:
                found = _from_definition(maybe_json(candidate))
            except Exception:  # a malformed definition only costs the name recovery
                found = None
            if found and found[0] not in names:
                names[found[0]] = found[1]
    return names


def _listed(value: object, seen: set[str]) -> list[Any]:
    """``as_list(value)``, or nothing for a text already listed."""
    if type(value) is str:
        if value in seen:
            return []
        seen.add(value)
    return as_list(value)


def _from_definition(definition: object) -> tuple[str, tuple[str, ...]] | None:
    if not isinstance(definition, Mapping):
        return None
    function = definition.get("function")
    if isinstance(
        function, Mapping
    ):  # OpenAI chat-completions {"type": "function", "function": {}}
        definition = function
    name = definition.get("name")
    if not isinstance(name, str) or not name:
        return None
    schema = maybe_json(
        definition.get("parameters", definition.get("inputSchema", definition.get("input_schema")))
    )
    if isinstance(schema, Mapping) and isinstance(schema.get("jsonSchema"), Mapping):
        schema = schema["jsonSchema"]
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return None
    return name, tuple(str(k) for k in properties)

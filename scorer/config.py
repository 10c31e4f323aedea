"""Named metric instances, read from YAML/JSON and validated at load time.

```yaml
metrics:
  tool_call_accuracy: {type: tool_call_accuracy}
  accuracy_fuzzy:
    type: tool_call_accuracy
    order: unordered            # strict | flexible | unordered | subsequence | grouped
    length_mismatch: prefix     # zero | prefix
    args: levenshtein           # default comparator for every argument
    tools:
      search: {args: {query: normalized}, default: exact}
```

Every error names the offending path, e.g.
``metrics.accuracy_fuzzy.tools.search.args.query: unknown comparator 'normalised'``. The same
file may hold a ``serve:`` section, the server's options (docs/configuration.md), which the
scorer leaves alone; a file with only that section scores with the built-in instances.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from toolscore.scorer.accuracy import LENGTH_POLICIES, ORDERS, ToolCallAccuracy, flat_calls
from toolscore.scorer.arguments import ArgumentPolicy, ToolPolicy
from toolscore.scorer.comparators import EXACT, Comparator, parse_comparator
from toolscore.scorer.duplicates import DUPLICATE_POLICIES
from toolscore.scorer.f1 import ToolCallF1
from toolscore.scorer.model import ConfigError, Reference, Score, ToolCall
from toolscore.scorer.nesting import NestingError, check_calls
from toolscore.scorer.readings import (
    best_reading,
    has_alternatives,
    has_inline_comparators,
    plain_values,
)

METRIC_TYPES = ("tool_call_accuracy", "tool_call_f1")
#: Top-level sections of the file that belong to others (``toolscore serve``'s options).
OTHER_SECTIONS = ("serve",)
#: Keys of an output line; an instance may not be named like them.
RESERVED_NAMES = frozenset({"id", "details", "errors", "error"})

Metric = ToolCallAccuracy | ToolCallF1


@dataclass(frozen=True, slots=True)
class MetricInstance:
    """A configured metric under its name (the key in outputs and the ``metric`` column)."""

    name: str
    metric: Metric

    @property
    def type(self) -> str:
        return self.metric.type

    def options_dict(self) -> dict[str, Any]:
        """The instance's normalised configuration, JSON-able (defaults filled in)."""
        metric = self.metric
        if isinstance(metric, ToolCallF1):
            return {"type": metric.type}
        policy = metric.arguments
        tools: dict[str, Any] = {}
        for tool, tool_policy in policy.tools.items():
            entry: dict[str, Any] = {"args": {k: c.spec() for k, c in tool_policy.args.items()}}
            if tool_policy.default is not None:
                entry["default"] = tool_policy.default.spec()
            tools[tool] = entry
        options = {
            "type": metric.type,
            "order": metric.order,
            "length_mismatch": metric.length_mismatch,
            "args": policy.default.spec(),
            "tools": tools,
        }
        if metric.duplicates != "keep":  # absent by default: stored configurations keep their hash
            options["duplicates"] = metric.duplicates
        return options

    def score(self, predicted: Sequence[ToolCall], reference: Reference | None) -> Score:
        """Score one sample; a missing reference gives ``value=None`` and an ``error``."""
        if reference is None:
            return Score(None, {}, "reference_tool_calls is missing (null): nothing to compare to")
        try:
            _check_nesting(predicted, reference)
            value, details = self.evaluate(predicted, reference)
        except NestingError as exc:  # the sample cannot be compared; the others still can
            return Score(None, {}, str(exc))
        return Score(value, details, None)

    def evaluate(
        self, predicted: Sequence[ToolCall], reference: Reference
    ) -> tuple[float, dict[str, Any]]:
        """The metric's score and explanation; with optional calls or ``any_of`` arguments,
        those of the best reading of the reference (scorer/readings.py); with comparators
        named in the reference, those comparators for those arguments."""
        alternatives, inline = has_alternatives(reference), has_inline_comparators(reference)
        if not alternatives and not inline:
            return self.metric.evaluate(predicted, reference)
        evaluate = partial(_evaluate_inline, self.metric, predicted) if inline else None
        if not alternatives:
            assert evaluate is not None
            return evaluate(reference)
        return best_reading(reference, evaluate or partial(self.metric.evaluate, predicted))

    def metric_value(self, predicted: Sequence[ToolCall], reference: Reference) -> float:
        """The score alone, as :meth:`evaluate` gives it."""
        if has_alternatives(reference) or has_inline_comparators(reference):
            return self.evaluate(predicted, reference)[0]
        return self.metric.value(predicted, reference)

    def value(self, predicted: Sequence[ToolCall], reference: Reference | None) -> float | None:
        """The score alone (no explanation), for callers that only need the value."""
        if reference is None:
            return None
        try:
            _check_nesting(predicted, reference)
            return self.metric_value(predicted, reference)
        except NestingError:
            return None


def _evaluate_inline(
    metric: Metric, predicted: Sequence[ToolCall], reference: Reference
) -> tuple[float, dict[str, Any]]:
    """``metric`` on a reference whose values may name their comparator: ToolCallAccuracy uses
    them (its general path), ToolCallF1 compares the values by equality, as always."""
    if isinstance(metric, ToolCallF1):
        return metric.evaluate(predicted, plain_values(reference))
    inline = replace(metric, arguments=replace(metric.arguments, inline=True))
    return inline.evaluate(predicted, plain_values(reference))


def _check_nesting(predicted: Sequence[ToolCall], reference: Reference) -> None:
    check_calls(predicted, "predicted")
    check_calls(flat_calls(reference), "reference")


@dataclass(frozen=True, slots=True)
class ScoringConfig:
    instances: Mapping[str, MetricInstance]


def default_config() -> ScoringConfig:
    """Without a file: ``tool_call_accuracy`` and ``tool_call_f1`` with Ragas defaults."""
    return ScoringConfig(
        {
            "tool_call_accuracy": MetricInstance("tool_call_accuracy", ToolCallAccuracy()),
            "tool_call_f1": MetricInstance("tool_call_f1", ToolCallF1()),
        }
    )


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: must be a mapping, got {_kind(value)}")
    for key in value:
        if not isinstance(key, str):
            raise ConfigError(f"{path}: keys must be strings, got {key!r}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _check_keys(raw: Mapping[str, Any], allowed: Collection[str], path: str, what: str) -> None:
    for key in raw:
        if key not in allowed:
            raise ConfigError(
                f"{path}.{key}: unknown key for {what} (allowed: {', '.join(allowed)})"
            )


def _choice(raw: Mapping[str, Any], key: str, choices: Sequence[str], path: str) -> str:
    value = raw.get(key, choices[0])
    if value not in choices:
        raise ConfigError(
            f"{path}.{key}: unknown {key} {value!r} (expected one of {', '.join(choices)})"
        )
    return str(value)


def _tool_policy(raw: object, path: str) -> ToolPolicy:
    entry = _mapping(raw, path)
    _check_keys(entry, ("args", "default"), path, "a tool")
    args: dict[str, Comparator] = {}
    if "args" in entry:
        for arg, spec in _mapping(entry["args"], f"{path}.args").items():
            args[arg] = parse_comparator(spec, f"{path}.args.{arg}")
    default = parse_comparator(entry["default"], f"{path}.default") if "default" in entry else None
    return ToolPolicy(args, default)


_ACCURACY_KEYS = ("type", "order", "length_mismatch", "args", "tools", "duplicates")


def _instance(name: str, raw: object, path: str) -> MetricInstance:
    entry = _mapping(raw, path)
    if "type" not in entry:
        raise ConfigError(f"{path}.type: missing (one of {', '.join(METRIC_TYPES)})")
    kind = entry["type"]
    if kind not in METRIC_TYPES:
        raise ConfigError(
            f"{path}.type: unknown metric type {kind!r} (expected one of {', '.join(METRIC_TYPES)})"
        )
    if kind == "tool_call_f1":
        _check_keys(entry, ("type",), path, "tool_call_f1 (it takes no options)")
        return MetricInstance(name, ToolCallF1())
    _check_keys(entry, _ACCURACY_KEYS, path, "tool_call_accuracy")
    order = _choice(entry, "order", ORDERS, path)
    length_mismatch = _choice(entry, "length_mismatch", LENGTH_POLICIES, path)
    default = parse_comparator(entry["args"], f"{path}.args") if "args" in entry else EXACT
    tools = {
        tool: _tool_policy(spec, f"{path}.tools.{tool}")
        for tool, spec in _mapping(entry.get("tools", {}), f"{path}.tools").items()
    }
    policy = ArgumentPolicy(default, tools)
    duplicates = _choice(entry, "duplicates", DUPLICATE_POLICIES, path)
    return MetricInstance(name, ToolCallAccuracy(order, length_mismatch, policy, duplicates))


def parse_config(
    mapping: object, *, other_sections: Collection[str] = OTHER_SECTIONS
) -> ScoringConfig:
    """Validate a decoded configuration. ``other_sections`` are top-level keys left to others;
    a file holding only those scores with the built-in instances."""
    root = _mapping(mapping, "(config)")
    for key in root:
        if key != "metrics" and key not in other_sections:
            expected = ", ".join(repr(k) for k in ("metrics", *other_sections))
            raise ConfigError(f"{key}: unknown top-level key (expected {expected})")
    if "metrics" not in root and root:
        return default_config()
    if "metrics" not in root:
        raise ConfigError("metrics: missing (a mapping of metric instance names to settings)")
    metrics = _mapping(root["metrics"], "metrics")
    if not metrics:
        raise ConfigError("metrics: at least one metric instance is required")
    instances: dict[str, MetricInstance] = {}
    for name, raw in metrics.items():
        path = f"metrics.{name}"
        if not name or name in RESERVED_NAMES:
            raise ConfigError(f"{path}: reserved or empty instance name {name!r}")
        instances[name] = _instance(name, raw, path)
    return ScoringConfig(instances)


def load_config(
    path: str | Path, *, other_sections: Collection[str] = OTHER_SECTIONS
) -> ScoringConfig:
    """Read a YAML (or ``.json``) file and :func:`parse_config` it; errors name the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else _load_yaml(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    try:
        return parse_config(data, other_sections=other_sections)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _load_yaml(text: str) -> Any:
    import yaml

    class _UniqueKeyLoader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            if key in seen:
                mark = key_node.start_mark
                raise ValueError(f"duplicate key {key!r} at line {mark.line + 1}")
            seen.add(key)
        return loader.construct_mapping(node)

    _UniqueKeyLoader.add_constructor(
        yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping
    )
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ValueError(f"invalid YAML: {exc}") from None

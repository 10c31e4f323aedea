"""Argument comparators: how one predicted argument value scores against the expected one.

Every comparator maps (predicted value, expected value) to a score in [0, 1]. ``exact`` is Ragas's
default (``ExactMatch`` on the ``str()`` of both values); ``levenshtein``, ``jaro_winkler``,
``jaro`` and ``hamming`` equal Ragas's ``NonLLMStringSimilarity`` (``1 - normalized_distance``
from rapidfuzz, reference first).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from toolscore.scorer.model import ConfigError
from toolscore.scorer.nesting import MAX_ARGUMENT_DEPTH, too_deep


class Comparator(Protocol):
    """Scores a predicted argument value against the expected one."""

    @property
    def name(self) -> str: ...

    def compare(self, predicted: Any, expected: Any) -> float: ...

    def spec(self) -> str | dict[str, Any]:
        """The normalised configuration form (a name, or ``{name: {options}}``)."""
        ...


@dataclass(frozen=True, slots=True)
class Exact:
    name: str = "exact"

    def compare(self, predicted: Any, expected: Any) -> float:
        return float(str(predicted) == str(expected))

    def spec(self) -> str | dict[str, Any]:
        return self.name


def _maybe_decode(value: Any) -> Any:
    # Arguments sometimes carry JSON documents as strings; compare what they encode.
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # too deep for json: compared as the text
            return value
    return value


def json_equal(a: Any, b: Any, depth: int = 1) -> bool:
    """Deep equality of JSON values: key order ignored, ``1 == 1.0``; ``"1" != 1 != true``.

    Values nested deeper than ``MAX_ARGUMENT_DEPTH`` raise :class:`NestingError`.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        if depth > MAX_ARGUMENT_DEPTH:
            raise too_deep("argument values")
        return a.keys() == b.keys() and all(json_equal(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if depth > MAX_ARGUMENT_DEPTH:
            raise too_deep("argument values")
        return len(a) == len(b) and all(
            json_equal(x, y, depth + 1) for x, y in zip(a, b, strict=True)
        )
    return type(a) is type(b) and a == b


@dataclass(frozen=True, slots=True)
class JsonEqual:
    name: str = "json"

    def compare(self, predicted: Any, expected: Any) -> float:
        return float(json_equal(_maybe_decode(predicted), _maybe_decode(expected)))

    def spec(self) -> str | dict[str, Any]:
        return self.name


_WHITESPACE = re.compile(r"\s+")


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def normalize(value: Any, depth: int = 1) -> Any:
    """Case- and whitespace-insensitive form; numeric strings become numbers.

    Values nested deeper than ``MAX_ARGUMENT_DEPTH`` raise :class:`NestingError`.
    """
    if isinstance(value, str):
        number = _as_number(value)
        if number is not None:
            return number
        return _WHITESPACE.sub(" ", value).strip().casefold()
    if isinstance(value, bool) or value is None:
        return str(value).casefold() if value is not None else None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, dict | list | tuple) and depth > MAX_ARGUMENT_DEPTH:
        raise too_deep("argument values")
    if isinstance(value, dict):
        return frozenset((str(k).casefold(), normalize(v, depth + 1)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(normalize(v, depth + 1) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class Normalized:
    name: str = "normalized"

    def compare(self, predicted: Any, expected: Any) -> float:
        return float(normalize(predicted) == normalize(expected))

    def spec(self) -> str | dict[str, Any]:
        return self.name


@dataclass(frozen=True, slots=True)
class Numeric:
    """Numbers (or numeric strings) within ``abs_tol`` or ``rel_tol`` (``math.isclose``)."""

    abs_tol: float = 0.0
    rel_tol: float = 0.0
    name: str = "numeric"

    def compare(self, predicted: Any, expected: Any) -> float:
        a, b = _as_number(predicted), _as_number(expected)
        if a is None or b is None:
            return 0.0
        return float(math.isclose(a, b, rel_tol=self.rel_tol, abs_tol=self.abs_tol))

    def spec(self) -> str | dict[str, Any]:
        return {self.name: {"abs_tol": self.abs_tol, "rel_tol": self.rel_tol}}


def _rapidfuzz_measures() -> dict[str, Callable[[str, str], float]]:
    from rapidfuzz import distance

    return {
        "levenshtein": distance.Levenshtein.normalized_distance,
        "jaro_winkler": distance.JaroWinkler.normalized_distance,
        "jaro": distance.Jaro.normalized_distance,
        "hamming": distance.Hamming.normalized_distance,
    }


@dataclass(frozen=True, slots=True)
class StringSimilarity:
    """Ragas ``NonLLMStringSimilarity``: ``1 - distance(str(expected), str(predicted))``."""

    name: str
    distance: Callable[[str, str], float]

    def compare(self, predicted: Any, expected: Any) -> float:
        return 1 - self.distance(str(expected), str(predicted))

    def spec(self) -> str | dict[str, Any]:
        return self.name


@lru_cache(maxsize=4096)
def _compile(pattern: str, flags: int) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, flags)
    except re.error:
        return None


@dataclass(frozen=True, slots=True)
class Regex:
    """The expected value is a pattern the whole ``str()`` of the predicted value must match."""

    ignore_case: bool = False
    name: str = "regex"

    def compare(self, predicted: Any, expected: Any) -> float:
        pattern = _compile(str(expected), re.IGNORECASE if self.ignore_case else 0)
        if pattern is None:
            return 0.0
        return float(pattern.fullmatch(str(predicted)) is not None)

    def spec(self) -> str | dict[str, Any]:
        return {self.name: {"ignore_case": self.ignore_case}}


@dataclass(frozen=True, slots=True)
class Ignore:
    name: str = "ignore"

    def compare(self, predicted: Any, expected: Any) -> float:
        return 1.0

    def spec(self) -> str | dict[str, Any]:
        return self.name


EXACT = Exact()

COMPARATOR_NAMES = (
    "exact",
    "json",
    "normalized",
    "numeric",
    "levenshtein",
    "jaro_winkler",
    "jaro",
    "hamming",
    "regex",
    "ignore",
)


def _number_option(value: object, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{path}: must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{path}: must be a finite number >= 0, got {value!r}")
    return float(value)


def _options(name: str, raw: object, allowed: tuple[str, ...], path: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}.{name}: options must be a mapping, got {raw!r}")
    for key in raw:
        if key not in allowed:
            hint = f" (allowed: {', '.join(allowed)})" if allowed else " (it takes no options)"
            raise ConfigError(f"{path}.{name}.{key}: unknown option of {name}{hint}")
    return raw


def parse_comparator(spec: object, path: str) -> Comparator:
    """``"levenshtein"`` or ``{"numeric": {"abs_tol": 0.5}}`` into a comparator."""
    if isinstance(spec, str):
        name, raw_options = spec, None
    elif isinstance(spec, Mapping) and len(spec) == 1:
        ((name, raw_options),) = spec.items()
        if not isinstance(name, str):
            raise ConfigError(f"{path}: unknown comparator {name!r}")
    else:
        raise ConfigError(
            f"{path}: a comparator is a name or a one-key mapping {{name: options}}, got {spec!r}"
        )
    if name not in COMPARATOR_NAMES:
        raise ConfigError(f"{path}: unknown comparator {name!r}")
    if name == "numeric":
        opts = _options(name, raw_options, ("abs_tol", "rel_tol"), path)
        return Numeric(
            abs_tol=_number_option(opts.get("abs_tol", 0.0), f"{path}.numeric.abs_tol"),
            rel_tol=_number_option(opts.get("rel_tol", 0.0), f"{path}.numeric.rel_tol"),
        )
    if name == "regex":
        opts = _options(name, raw_options, ("ignore_case",), path)
        ignore_case = opts.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise ConfigError(f"{path}.regex.ignore_case: must be true or false")
        return Regex(ignore_case=ignore_case)
    _options(name, raw_options, (), path)
    if name in ("levenshtein", "jaro_winkler", "jaro", "hamming"):
        return StringSimilarity(name, _rapidfuzz_measures()[name])
    simple: dict[str, Comparator] = {
        "exact": EXACT,
        "json": JsonEqual(),
        "normalized": Normalized(),
        "ignore": Ignore(),
    }
    return simple[name]

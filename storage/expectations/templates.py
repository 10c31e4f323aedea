"""Templated reference arguments, filled from the named groups of the user-input regex.

In an expectation whose ``match.user_input`` is a regex, an argument value (at any depth) that
is a string may hold ``{group}`` or ``{group|filter}`` naming one of the regex's named groups.
A string that is one template alone becomes the filtered value (``"{n|int}"`` -> ``4``); a
template inside a longer string is replaced by the filtered value's text. Only expectations
with a regex are filled (a file naming a group the regex lacks is rejected), so references
without one never change.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

TEMPLATE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\|([A-Za-z_]+))?\}")


def _to_int(text: str) -> int:
    return int(text)


def _to_float(text: str) -> float:
    return float(text)


FILTERS: Mapping[str, Callable[[str], Any]] = {
    "int": _to_int,
    "float": _to_float,
    "lower": str.lower,
    "upper": str.upper,
}


class TemplateError(ValueError):
    """A template could not be filled (a group that did not take part, a value a filter
    refuses)."""


def template_problems(reference: Any, groups: Collection[str]) -> list[tuple[tuple[Any, ...], str]]:
    """Templates of an expectation with a regex (named ``groups``) that name no group or an
    unknown filter, as (path in the reference, message)."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    for path, text in _argument_strings(reference):
        for found in TEMPLATE.finditer(text):
            name, how = found.group(1), found.group(2)
            if name not in groups:
                known = ", ".join(groups) or "none"
                message = f"{found.group(0)} names no named group of match.user_input.regex"
                problems.append((path, f"{message} (its groups: {known})"))
            elif how is not None and how not in FILTERS:
                known = ", ".join(FILTERS)
                problems.append((path, f"unknown filter {how!r} in {found.group(0)} ({known})"))
    return problems


def _argument_strings(reference: Any) -> list[tuple[tuple[Any, ...], str]]:
    found: list[tuple[tuple[Any, ...], str]] = []
    for i, item in enumerate(reference if isinstance(reference, list) else []):
        calls = (
            [((i, j), c) for j, c in enumerate(item)] if isinstance(item, list) else [((i,), item)]
        )
        for where, call in calls:
            if isinstance(call, Mapping):
                found += _strings(call.get("args"), (*where, "args"))
    return found


def fill(reference: Any, values: Mapping[str, str | None]) -> tuple[Any, dict[str, Any]]:
    """``reference`` with its arguments' templates filled from ``values`` (the regex's named
    groups), and the value each template took (keyed by the template as written)."""
    used: dict[str, Any] = {}
    out = []
    for item in reference:
        if isinstance(item, list):
            out.append([_call(c, values, used) for c in item])
        else:
            out.append(_call(item, values, used))
    return out, used


def _call(call: Any, values: Mapping[str, str | None], used: dict[str, Any]) -> Any:
    if not isinstance(call, Mapping) or not isinstance(call.get("args"), Mapping):
        return call
    return {**call, "args": _value(call["args"], values, used)}


def _value(value: Any, values: Mapping[str, str | None], used: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _text(value, values, used)
    if isinstance(value, Mapping):
        return {k: _value(v, values, used) for k, v in value.items()}
    if isinstance(value, list):
        return [_value(v, values, used) for v in value]
    return value


def _text(text: str, values: Mapping[str, str | None], used: dict[str, Any]) -> Any:
    whole = TEMPLATE.fullmatch(text)
    if whole is not None and whole.group(1) in values:
        return _filled(whole, values, used)
    return TEMPLATE.sub(
        lambda m: str(_filled(m, values, used)) if m.group(1) in values else m.group(0), text
    )


def _filled(found: re.Match[str], values: Mapping[str, str | None], used: dict[str, Any]) -> Any:
    name, how = found.group(1), found.group(2)
    raw = values[name]
    if raw is None:
        raise TemplateError(
            f"{found.group(0)}: the group {name!r} has no value (the user-input regex did not "
            "match the first user message, or the group took no part in the match)"
        )
    try:
        result = FILTERS[how](raw) if how is not None else raw
    except (KeyError, ValueError) as exc:
        raise TemplateError(f"{found.group(0)}: cannot apply {how!r} to {raw!r} ({exc})") from None
    used[found.group(0)] = result
    return result


def _strings(value: Any, path: tuple[Any, ...]) -> list[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in _strings(v, (*path, k))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, (*path, i))]
    return []

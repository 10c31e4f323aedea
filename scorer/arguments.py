"""The argument score of one (reference, predicted) pair of calls with the same name.

Ragas 0.4.3 (``ToolCallAccuracy._get_arg_score``): both argument dicts empty → 1.0; reference
empty but predicted not → 0.0; otherwise the mean, over the *reference's* argument names, of the
comparator on that argument (0 when the predicted call lacks it). Extra predicted arguments are
ignored. The sum runs in reference key order, as in Ragas, so floats match to the last bit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolscore.scorer.comparators import EXACT, Comparator, Ignore, parse_comparator
from toolscore.scorer.model import ToolCall
from toolscore.scorer.readings import COMPARE, ComparedCall


def inline_comparator(spec: Any) -> Comparator:
    """The comparator a reference value names (checked when the reference was read)."""
    key = json.dumps(spec, sort_keys=True)
    found = _INLINE.get(key)
    if found is None:
        found = _INLINE[key] = parse_comparator(spec, COMPARE)
    return found


_INLINE: dict[str, Comparator] = {}  # a handful of specs: parsed once each


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Comparators for one tool: per argument, and a default for its other arguments."""

    args: Mapping[str, Comparator] = field(default_factory=dict)
    default: Comparator | None = None


@dataclass(frozen=True, slots=True)
class ArgumentPolicy:
    """Which comparator applies to argument ``arg`` of tool ``tool``."""

    default: Comparator = EXACT
    tools: Mapping[str, ToolPolicy] = field(default_factory=dict)
    #: reference calls may name comparators (``readings.ComparedCall``): the general path
    inline: bool = False

    @property
    def is_exact(self) -> bool:
        """True when every argument of every tool uses Ragas's exact ``str()`` comparison."""
        return self.default is EXACT and not self.tools and not self.inline

    def comparator(self, tool: str, arg: str) -> Comparator:
        policy = self.tools.get(tool)
        if policy is None:
            return self.default
        found = policy.args.get(arg)
        if found is not None:
            return found
        return policy.default if policy.default is not None else self.default


def exact_arg_score(predicted: Mapping[str, Any], expected: Mapping[str, Any]) -> float:
    """Ragas's default argument score (``ExactMatch`` on ``str()`` of the values)."""
    if not expected:
        return 0.0 if predicted else 1.0
    score = 0.0
    for key, value in expected.items():
        if key in predicted and str(predicted[key]) == str(value):
            score += 1.0
    return score / len(expected)


def exact_arg_score_detailed(
    predicted: ToolCall, expected: ToolCall
) -> tuple[float, dict[str, float]]:
    """:func:`exact_arg_score` with each reference argument's own score."""
    p_args, r_args = predicted.args, expected.args
    if not r_args:
        return (0.0 if p_args else 1.0), {}
    score = 0.0
    per_arg: dict[str, float] = {}
    for key, value in r_args.items():
        if key in p_args and str(p_args[key]) == str(value):
            per_arg[key] = 1.0
            score += 1.0
        else:
            per_arg[key] = 0.0
    return score / len(r_args), per_arg


def arg_score_detailed(
    predicted: ToolCall, expected: ToolCall, policy: ArgumentPolicy
) -> tuple[float, dict[str, float]]:
    """The argument score and each reference argument's own score."""
    p_args, r_args = predicted.args, expected.args
    if not r_args:
        return (0.0 if p_args else 1.0), {}
    score = 0.0
    per_arg: dict[str, float] = {}
    tool = expected.name
    named = expected.comparators if isinstance(expected, ComparedCall) else {}
    for key, value in r_args.items():
        spec = named.get(key)
        comparator = policy.comparator(tool, key) if spec is None else inline_comparator(spec)
        if key in p_args:
            one = comparator.compare(p_args[key], value)
            # Comparators are in [0, 1] by construction; clamp float noise all the same.
            one = 0.0 if one < 0.0 else (1.0 if one > 1.0 else one)
        elif isinstance(comparator, Ignore):
            one = 1.0
        else:
            one = 0.0
        per_arg[key] = one
        score += one
    return score / len(r_args), per_arg
